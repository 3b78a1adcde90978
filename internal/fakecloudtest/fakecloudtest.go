// Package fakecloudtest serves a fakecloud to the code under test for as
// long as the test runs: its ECS/VPC API and one instance's metadata
// service over HTTP on loopback (Start), or the API on loopback with the
// instances as node namespaces of a VPC fabric (StartLab). VPCClient
// calls a served fakecloud through the real SDK.
package fakecloudtest

import (
	"net/http/httptest"
	"testing"

	"github.com/terway-sim/terway/fakecloud"
)

// Server is a fakecloud served over HTTP.
type Server struct {
	Cloud *fakecloud.Cloud
	// API serves ECS and VPC; Metadata the metadata service of the
	// instance Start was given.
	API, Metadata *httptest.Server
}

// Start builds a fakecloud with o and serves it, with the metadata of
// instance; all of it closes when t ends.
func Start(t testing.TB, o fakecloud.Options, instance string) *Server {
	t.Helper()
	c, err := fakecloud.New(o)
	if err != nil {
		t.Fatalf("fakecloud: %v", err)
	}
	s := &Server{Cloud: c, API: httptest.NewServer(c), Metadata: httptest.NewServer(c.MetadataHandler(instance))}
	t.Cleanup(func() { s.API.Close(); s.Metadata.Close(); c.Close() })
	return s
}
