package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/daemon/store/storetest"
)

// terwaydArgsEnv carries the arguments of a terwayd run by runTerwayd: the
// test binary runs TestTerwaydProcess, which runs main with them.
const terwaydArgsEnv = "TERWAYD_TEST_ARGS"

func TestTerwaydProcess(t *testing.T) {
	args := os.Getenv(terwaydArgsEnv)
	if args == "" {
		t.Skip("runs terwayd's main for runTerwayd")
	}
	var list []string
	if err := json.Unmarshal([]byte(args), &list); err != nil {
		t.Fatal(err)
	}
	os.Args = append([]string{"terwayd"}, list...)
	main()
	os.Exit(0)
}

// runTerwayd runs terwayd (main, in a child process) and returns its exit
// code and stderr.
func runTerwayd(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTerwaydProcess$")
	list, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(), append(env, terwaydArgsEnv+"="+string(list))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), stderr.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, stderr.String()
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("terwayd still running after 60s; stderr:\n%s", stderr.String())
		return 0, ""
	}
}

// fakeAPIServer answers what terwayd asks before and around the store: the
// node (not found), an empty pod list, and event creation (recorded).
type fakeAPIServer struct {
	mu     sync.Mutex
	events []string // request bodies (JSON or protobuf: the strings are in both)
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events"):
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.events = append(f.events, string(body))
		f.mu.Unlock()
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") == "":
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}
}

func (f *fakeAPIServer) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

// A damaged store used to crash terwayd in a loop with a Go stack. Now it
// exits 1 with one line naming the file and --rebuild-store, and the node
// gets a StoreDamaged event; --rebuild-store moves the file aside.
func TestDamagedStoreExitsWithOneLine(t *testing.T) {
	dir, err := os.MkdirTemp("", "tdcmd") // short: the socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	api := &fakeAPIServer{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	storePath := filepath.Join(dir, "state", "ResRelation.db")
	if err := os.MkdirAll(filepath.Dir(storePath), 0o700); err != nil {
		t.Fatal(err)
	}
	before := storetest.Damaged(t, storePath)
	conf := filepath.Join(dir, "eni_conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`{"store_path":%q,"socket_path":%q,"metadata_endpoint":%q,
		"kube_sync_timeout":"2s","backoff_override":{"metadata":{"Duration":"5ms","Steps":1}}}`,
		storePath, filepath.Join(dir, "run", "eni.socket"), srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"NODE_NAME=node-1", "HTTP_PROXY=", "http_proxy=", "HTTPS_PROXY=", "https_proxy="}
	args := []string{"--kubeconfig", kubeconfig, "--config", conf, "--host-netns=", "--device-plugin-dir=",
		"--readonly-listen", "127.0.0.1:0", "--log-level", "error"}

	code, stderr := runTerwayd(t, env, args...)
	t.Logf("exit %d, stderr:\n%s", code, stderr)
	if code == 0 {
		t.Fatal("terwayd exited 0 on a damaged store")
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], storePath) || !strings.Contains(lines[0], "--rebuild-store") {
		t.Errorf("stderr is not one line naming %s and --rebuild-store:\n%s", storePath, stderr)
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic:") {
		t.Error("stderr has a Go stack")
	}
	if got := api.sent(); len(got) != 1 || !strings.Contains(got[0], "StoreDamaged") ||
		!strings.Contains(got[0], storePath) || !strings.Contains(got[0], "--rebuild-store") {
		t.Errorf("events sent to the API server: %q, want one StoreDamaged naming the file and --rebuild-store", got)
	}
	if after, _ := os.ReadFile(storePath); !bytes.Equal(before, after) {
		t.Error("the refused store was modified")
	}

	// --rebuild-store: the damaged file is moved aside (this terwayd then
	// stops at the metadata service, which the fake API server is not).
	code, stderr = runTerwayd(t, env, append(args, "--rebuild-store")...)
	t.Logf("with --rebuild-store: exit %d, stderr:\n%s", code, stderr)
	aside, _ := filepath.Glob(storePath + store.DamagedSuffix + "*")
	if len(aside) != 1 {
		t.Fatalf("moved aside: %v", aside)
	}
	if b, _ := os.ReadFile(aside[0]); !bytes.Equal(b, before) {
		t.Error("the moved-aside file is not the damaged store")
	}
	if strings.Contains(stderr, "--rebuild-store") {
		t.Errorf("the store was refused again: %s", stderr)
	}
}
