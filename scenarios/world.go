package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/terway-sim/terway/fakecloud"
)

// FetchWorld reads fakecloud's admin view of the world (GET
// /fakecloud/world with the admin bearer token).
func FetchWorld(ctx context.Context, c *http.Client, baseURL, token string) (*fakecloud.WorldView, error) {
	u := strings.TrimRight(baseURL, "/") + "/fakecloud/world"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("world request %s: %w", u, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: read body: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	var w fakecloud.WorldView
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("GET %s: decode world: %w", u, err)
	}
	return &w, nil
}
