package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// Calls returns the counters of API calls.
func (a *Client) Calls(ctx context.Context) ([]CallStat, error) {
	var c []CallStat
	return c, a.do(ctx, http.MethodGet, "/fakecloud/calls", nil, &c)
}

// MetadataCalls returns the counters of metadata reads.
func (a *Client) MetadataCalls(ctx context.Context) ([]CallStat, error) {
	var c []CallStat
	return c, a.do(ctx, http.MethodGet, "/fakecloud/calls?service="+ServiceMetadata, nil, &c)
}

// ResetCalls zeroes the call counters, metadata reads' included.
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

// Faults lists the installed faults in the order they were added.
func (a *Client) Faults(ctx context.Context) ([]FaultStatus, error) {
	var f []FaultStatus
	return f, a.do(ctx, http.MethodGet, "/fakecloud/faults", nil, &f)
}

// RemoveFault removes the fault name; calls it holds continue. A name
// that is not installed is an error (404).
func (a *Client) RemoveFault(ctx context.Context, name string) error {
	return a.do(ctx, http.MethodDelete, "/fakecloud/faults/"+url.PathEscape(name), nil, nil)
}

// Settings returns the behaviour knobs.
func (a *Client) Settings(ctx context.Context) (Settings, error) {
	var s Settings
	return s, a.do(ctx, http.MethodGet, "/fakecloud/settings", nil, &s)
}

// UpdateSettings changes the settings partial names, by their JSON keys
// (e.g. {"attachDelay": "30s"} or {"throttle": map[string]int{...}}),
// and returns the settings now in force. Each key present replaces that
// setting whole, a map included, so that writing back a value read
// earlier restores it exactly; keys absent keep their values.
func (a *Client) UpdateSettings(ctx context.Context, partial map[string]any) (Settings, error) {
	var s Settings
	return s, a.do(ctx, http.MethodPut, "/fakecloud/settings", partial, &s)
}

// StopInstance stops a running instance; its ENIs stay attached.
func (a *Client) StopInstance(ctx context.Context, id string) error {
	return a.instanceOp(ctx, id, "stop")
}

// StartInstance starts a stopped instance.
func (a *Client) StartInstance(ctx context.Context, id string) error {
	return a.instanceOp(ctx, id, "start")
}

// ReleaseInstance releases an instance as ECS does: its secondary ENIs
// are detached (or deleted when DeleteOnRelease is set) and its primary
// ENI is deleted with it.
func (a *Client) ReleaseInstance(ctx context.Context, id string) error {
	return a.instanceOp(ctx, id, "release")
}

// DrainVSwitch takes the free IPv4 addresses of vSwitch id away so that
// only leave stay free: the emulator holds them, no ENI gets them and no
// call hands them out until RefillVSwitch. Draining again moves the
// level.
func (a *Client) DrainVSwitch(ctx context.Context, id string, leave int) error {
	body := struct {
		Leave int `json:"leave"`
	}{leave}
	return a.do(ctx, http.MethodPost, "/fakecloud/vswitches/"+url.PathEscape(id)+"/drain", body, nil)
}

// RefillVSwitch gives back every address a drain of vSwitch id holds.
func (a *Client) RefillVSwitch(ctx context.Context, id string) error {
	return a.do(ctx, http.MethodPost, "/fakecloud/vswitches/"+url.PathEscape(id)+"/refill", nil, nil)
}

func (a *Client) instanceOp(ctx context.Context, id, op string) error {
	return a.do(ctx, http.MethodPost, "/fakecloud/instances/"+url.PathEscape(id)+"/"+op, nil, nil)
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
