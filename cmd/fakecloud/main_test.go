package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/testlog"
	"github.com/terway-sim/terway/internal/testwait"
)

func TestMain(m *testing.M) {
	noproxy.Unset()
	os.Exit(m.Run())
}

// TestServe runs "fakecloud serve" as other tooling does: it waits for
// the one stdout line with the endpoint, calls the API through the SDK,
// stops it and checks the state file was written.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	pr, pw := io.Pipe()
	stderr := &testlog.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRootCommand(pw, stderr)
	root.SetArgs([]string{"serve", "--listen", "127.0.0.1:0", "--state", state, "--time-scale", "0.01",
		"--access-key-id", "LTAIcli", "--access-key-secret", "cli-secret", "--admin-token", "tok",
		"--metadata-listen", "127.0.0.1:0=i-bp1lab0000000000001"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no endpoint line: %v (stderr: %s)", err, stderr)
	}
	go io.Copy(io.Discard, pr)
	u, err := url.Parse(strings.TrimSpace(line))
	if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Fatalf("endpoint line %q", line)
	}
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	c, err := ecs.NewClientWithOptions("cn-hangzhou", cfg, credentials.NewAccessKeyCredential("LTAIcli", "cli-secret"))
	if err != nil {
		t.Fatal(err)
	}
	c.Domain = u.Host
	req := ecs.CreateCreateNetworkInterfaceRequest()
	req.VSwitchId, req.SecurityGroupId = "vsw-bp1lab0000000000001", "sg-bp1lab0000000000001"
	created, err := c.CreateNetworkInterface(req)
	if err != nil {
		t.Fatal(err)
	}
	hreq, _ := http.NewRequest(http.MethodGet, u.String()+"/fakecloud/world", nil)
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
	if strings.Contains(stderr.String(), "cli-secret") {
		t.Fatal("the secret appears in the logs")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
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

func TestWorldCommandPrintsLoadableWorld(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand(&out, io.Discard)
	root.SetArgs([]string{"world"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(p, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	o2, e2 := &testlog.Buffer{}, &testlog.Buffer{}
	root = newRootCommand(o2, e2)
	ctx, cancel := context.WithCancel(context.Background())
	root.SetArgs([]string{"serve", "--listen", "127.0.0.1:0", "--world", p})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	// serve prints its endpoint line once it is ready; one that fails to
	// load the world returns before.
	testwait.Until(t, 10*time.Second, "serve ready (its endpoint line) or stopped", func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve stopped before it was ready: %v (%s)", err, e2.String())
		default:
		}
		return strings.HasSuffix(o2.String(), "\n")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serving the printed world: %v (%s)", err, e2.String())
	}
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
