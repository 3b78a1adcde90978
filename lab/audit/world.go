package audit

import (
	"context"
	"net/http"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// readWorld fetches fakecloud's admin view of the world.
func readWorld(ctx context.Context, c *http.Client, baseURL, token string) (*admin.WorldView, error) {
	return (&admin.Client{URL: baseURL, Token: token, HTTP: c}).World(ctx)
}
