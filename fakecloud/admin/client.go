package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client talks to a fakecloud's admin API over HTTP.
type Client struct {
	// URL is fakecloud's base URL, e.g. "http://127.0.0.1:18080".
	URL string
	// Token is the admin bearer token (the emulator's --admin-token).
	Token string
	// HTTP is the client to use; nil means one with a 10 s timeout.
	HTTP *http.Client
}

// World returns the admin view of the world.
func (a *Client) World(ctx context.Context) (*WorldView, error) {
	var w WorldView
	return &w, a.do(ctx, http.MethodGet, "/fakecloud/world", nil, &w)
}

// Calls returns the call counters.
func (a *Client) Calls(ctx context.Context) ([]CallStat, error) {
	var c []CallStat
	return c, a.do(ctx, http.MethodGet, "/fakecloud/calls", nil, &c)
}

// ResetCalls zeroes the call counters.
func (a *Client) ResetCalls(ctx context.Context) error {
	return a.do(ctx, http.MethodDelete, "/fakecloud/calls", nil, nil)
}

// AddFault installs a fault and returns its name.
func (a *Client) AddFault(ctx context.Context, f Fault) (string, error) {
	var out struct {
		Name string `json:"name"`
	}
	return out.Name, a.do(ctx, http.MethodPost, "/fakecloud/faults", f, &out)
}

// ClearFaults removes every fault.
func (a *Client) ClearFaults(ctx context.Context) error {
	return a.do(ctx, http.MethodDelete, "/fakecloud/faults", nil, nil)
}

func (a *Client) do(ctx context.Context, method, path string, in, out any) error {
	u := strings.TrimRight(a.URL, "/") + path
	req, err := newRequest(ctx, method, u, in)
	if err != nil {
		return fmt.Errorf("fakecloud admin %s %s: %w", method, u, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	c := a.HTTP
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("fakecloud admin %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("fakecloud admin %s %s: read body: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("fakecloud admin %s %s: %s: %s", method, u, resp.Status, strings.TrimSpace(string(data)))
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("fakecloud admin %s %s: decode: %w", method, u, err)
	}
	return nil
}

// newRequest builds a request with in, if not nil, as its JSON body.
func newRequest(ctx context.Context, method, url string, in any) (*http.Request, error) {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}
