package audit

import (
	"context"
	"net/http"

	"github.com/terway-sim/terway/fakecloud"
)

// readWorld fetches fakecloud's admin view of the world.
func readWorld(ctx context.Context, c *http.Client, baseURL, token string) (*fakecloud.WorldView, error) {
	return (&fakecloud.AdminClient{URL: baseURL, Token: token, HTTP: c}).World(ctx)
}
