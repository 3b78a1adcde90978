package fleet

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/terway-sim/terway/fakecloud"
)

// fleetServers are what every daemon talks to: the ECS/VPC API on a
// loopback listener (the daemons' SDK clients dial it, as they would the
// real endpoint), and the metadata service, served in memory: the
// daemons' shared metadata HTTP client hands each request straight to
// fakecloud's handler for the instance named in the path (each daemon's
// metadata_endpoint is http://metadata.fleet/<instance>). The daemon's
// metadata client runs unchanged (tokens, retries, parsing); only the
// socket is skipped, which keeps a thousand daemons' metadata polls from
// costing loopback round trips whose real time the time scale would
// magnify.
type fleetServers struct {
	api *httptest.Server
	// mdClient is the daemons' shared metadata HTTP client.
	mdClient *http.Client
}

// fleetMetadataBase is the metadata endpoint's base; no one listens there.
const fleetMetadataBase = "http://metadata.fleet"

func newFleetServers(fc *fakecloud.Cloud, logger *slog.Logger) *fleetServers {
	errLog := log.New(io.Discard, "", 0)
	if logger.Enabled(context.Background(), slog.LevelWarn) {
		errLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	}
	api := httptest.NewUnstartedServer(fc)
	// Idle keep-alive connections of finished nodes go away, so that
	// open files stay proportional to the busy nodes.
	api.Config.IdleTimeout = 5 * time.Second
	api.Config.ErrorLog = errLog
	api.Start()
	return &fleetServers{api: api, mdClient: &http.Client{Timeout: 30 * time.Second,
		Transport: fleetHandlerTransport{fleetMetadataRouter{fc: fc}}}}
}

func (s *fleetServers) metadataURL(instance string) string { return fleetMetadataBase + "/" + instance }

func (s *fleetServers) close() { s.api.Close() }

// fleetHandlerTransport answers HTTP requests by calling a handler.
type fleetHandlerTransport struct{ h http.Handler }

func (t fleetHandlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// fleetMetadataRouter serves /<instance>/latest/... as instance's metadata.
type fleetMetadataRouter struct{ fc *fakecloud.Cloud }

func (r fleetMetadataRouter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	inst, _, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	if !ok || !strings.HasPrefix(inst, "i-") {
		http.NotFound(w, req)
		return
	}
	http.StripPrefix("/"+inst, r.fc.MetadataHandler(inst)).ServeHTTP(w, req)
}
