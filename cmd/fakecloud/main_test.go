package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/noproxy"
)

func TestMain(m *testing.M) { noproxy.Main(m) }

// TestServe runs "fakecloud serve" as other tooling does: it waits for
// the one stdout line with the endpoint, calls the API through the SDK,
// stops it and checks the state file was written.
func TestServe(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	s := startServe(t, "--state", state, "--time-scale", "0.01", "--admin-token", "tok",
		"--metadata-listen", "127.0.0.1:0=i-bp1lab0000000000001")
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	c, err := ecs.NewClientWithOptions(cdRegion, cfg, credentials.NewAccessKeyCredential(cdAK, cdSecret))
	if err != nil {
		t.Fatal(err)
	}
	c.Domain = s.url.Host
	req := ecs.CreateCreateNetworkInterfaceRequest()
	req.VSwitchId, req.SecurityGroupId = cdVSw, cdSG
	created, err := c.CreateNetworkInterface(req)
	if err != nil {
		t.Fatal(err)
	}
	hreq, _ := http.NewRequest(http.MethodGet, s.url.String()+"/fakecloud/world", nil)
	hreq.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), created.NetworkInterfaceId) {
		t.Fatalf("admin world: %d %s", resp.StatusCode, b)
	}
	if strings.Contains(s.stderr.String(), cdSecret) {
		t.Fatal("the secret appears in the logs")
	}
	s.stop(t)
	data, err := os.ReadFile(state)
	if err != nil || !strings.Contains(string(data), created.NetworkInterfaceId) {
		t.Fatalf("state file lacks the ENI: %v", err)
	}
	if fi, _ := os.Stat(state); fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v", fi.Mode().Perm())
	}
}

func TestServeRejectsBadFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"secret without id":   {"serve", "--access-key-secret", "x"},
		"id without secret":   {"serve", "--access-key-id", "x"},
		"bad time scale":      {"serve", "--time-scale", "0"},
		"bad listen":          {"serve", "--listen", "not-an-address"},
		"unknown world":       {"serve", "--world", "/nonexistent/world.yaml"},
		"metadata for nobody": {"serve", "--listen", "127.0.0.1:0", "--metadata-listen", "127.0.0.1:0=i-nobody"},
		"unexpected argument": {"serve", "extra"},
		"bad log level":       {"serve", "--log-level", "loud"},
	} {
		var out, errb bytes.Buffer
		root := newRootCommand(&out, &errb)
		root.SetArgs(args)
		if err := root.Execute(); err == nil {
			t.Errorf("%s: accepted", name)
		} else if out.Len() != 0 {
			t.Errorf("%s: printed an endpoint: %q", name, out.String())
		}
	}
}

func TestHelpDocumentsFlags(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand(&out, &out)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--listen", "--world", "--state", "--seed", "--time-scale", "--access-key-id",
		"--access-key-secret", "--admin-token", "--metadata-listen", "/fakecloud/", "/latest/"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("help lacks %s", f)
		}
	}
}

// TestWorldCommandPrintsLoadableWorld: serve loads what world prints.
// startServe fails the test when serve stops before its endpoint line
// (as it does when the world does not load) or stops with an error.
func TestWorldCommandPrintsLoadableWorld(t *testing.T) {
	_, path := savedWorld(t)
	startServe(t, "--world", path)
}

// savedWorld runs "fakecloud world" and saves what it prints to a file,
// as a user who edits it would; it returns both.
func savedWorld(t *testing.T) (world []byte, path string) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCommand(&out, io.Discard)
	root.SetArgs([]string{"world"})
	if err := root.Execute(); err != nil {
		t.Fatalf("fakecloud world: %v", err)
	}
	path = filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), path
}

// TestListenersHaveTimeouts: every listener serve opens (API, bound and
// by-source metadata) has a body-read and an idle timeout besides the
// header timeout, so a client trickling its body or idling cannot hold a
// connection as long as it likes. No write timeout: pause faults hold
// calls on purpose.
func TestListenersHaveTimeouts(t *testing.T) {
	cloud, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.Close()
	o := &serveOptions{listen: "127.0.0.1:0", metadataListen: []string{"127.0.0.1:0=i-bp1lab0000000000001", "127.0.0.1:0"}}
	servers, _, err := listenAll(o, cloud, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	if len(servers) != 3 {
		t.Fatalf("%d servers, want 3", len(servers))
	}
	for i, s := range servers {
		if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.IdleTimeout <= 0 || s.WriteTimeout != 0 {
			t.Errorf("server %d: header %v, read %v, idle %v, write %v", i, s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout, s.WriteTimeout)
		}
	}
}
