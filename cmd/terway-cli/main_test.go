package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/rpc"
)

// tracingStub is a narrow stand-in for the daemon's tracing API, to check
// how the CLI renders answers and which exit status it chooses.
type tracingStub struct {
	rpc.UnimplementedTerwayTracingServer
	mapping []*rpc.PodResourceMapping
}

func (s *tracingStub) GetResourceTypes(context.Context, *rpc.Placeholder) (*rpc.ResourcesTypesReply, error) {
	return &rpc.ResourcesTypesReply{TypeNames: []string{"network_service", "resource_pool"}}, nil
}

func (s *tracingStub) GetResourceMapping(context.Context, *rpc.Placeholder) (*rpc.PodResourceMappingReply, error) {
	return &rpc.PodResourceMappingReply{Info: s.mapping}, nil
}

func serve(t *testing.T, stub *tracingStub) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rpc.RegisterTerwayTracingServer(srv, stub)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return sock
}

func run(t *testing.T, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := newCommand(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestMappingExitStatus(t *testing.T) {
	stub := &tracingStub{mapping: []*rpc.PodResourceMapping{{PodName: "ns/a", ResourceName: "mac.1.2.3.4", FactoryResourceName: "mac.1.2.3.4"}}}
	sock := serve(t, stub)
	out, err := run(t, "--socket", sock, "mapping")
	if err != nil || !strings.Contains(out, "Normal") || !strings.Contains(out, "ns/a") {
		t.Fatalf("healthy mapping: %v\n%s", err, out)
	}
	stub.mapping = append(stub.mapping, &rpc.PodResourceMapping{Type: rpc.ResourceMappingType_MappingTypeError, PodName: "ns/b"})
	out, err = run(t, "--socket", sock, "mapping")
	var me mappingError
	if !errors.As(err, &me) || me.n != 1 || !strings.Contains(out, "Error") {
		t.Fatalf("broken mapping must fail: %v\n%s", err, out)
	}
	if out, err := run(t, "--socket", sock, "list"); err != nil || !strings.Contains(out, "resource_pool") {
		t.Fatalf("list: %v %s", err, out)
	}
}

func TestMetadataCommand(t *testing.T) {
	c, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	md := httptest.NewServer(c.MetadataHandler("i-bp1lab0000000000001"))
	defer md.Close()
	out, err := run(t, "--metadata-endpoint", md.URL, "metadata")
	if err != nil || !strings.Contains(out, "i-bp1lab0000000000001") || !strings.Contains(out, "(primary)") || !strings.Contains(out, "192.168.0.") {
		t.Fatalf("metadata: %v\n%s", err, out)
	}
}
