package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/cluster"
)

// The supervisor and the chaos engine name components alike.
func TestComponentNames(t *testing.T) {
	for c, ch := range map[string]string{
		cluster.ComponentTerwayd: chaos.ComponentTerwayd, cluster.ComponentContainerd: chaos.ComponentContainerd,
		cluster.ComponentKubelet: chaos.ComponentKubelet, cluster.ComponentAPIServer: chaos.ComponentAPIServer,
	} {
		if c != ch {
			t.Errorf("cluster calls %q what chaos calls %q", c, ch)
		}
	}
}

// socketLab is a lab directory whose control socket records what it is
// asked, in the wire format of lab/cluster's control socket.
type socketLab struct {
	dir  string
	mu   sync.Mutex
	reqs []string
}

func newSocketLab(t *testing.T) *socketLab {
	l := &socketLab{dir: t.TempDir()}
	ln, err := net.Listen("unix", cluster.ControlSocketPath(l.dir))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.reqs = append(l.reqs, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(body)))
		l.mu.Unlock()
		if r.URL.Path == "/v1/nodes" {
			_, _ = io.WriteString(w, `{"node":{"name":"lab-3","instanceId":"i-3","instanceType":"ecs.g7.xlarge","zone":"z","primaryIp":"10.0.0.3"}}`)
			return
		}
		if strings.Contains(r.URL.Path, "lab-9") {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":"node \"lab-9\": no such node"}`)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l
}

func (l *socketLab) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCommand(&out, &out)
	root.SetArgs(append(args, "--state-dir", l.dir))
	err := root.Execute()
	return out.String(), err
}

func TestNodeAndKillCommands(t *testing.T) {
	l := newSocketLab(t)
	for _, args := range [][]string{
		{"node", "stop", "lab-1"}, {"node", "start", "lab-1"}, {"node", "release", "lab-2"},
		{"node", "remove", "lab-1"}, {"node", "add"},
		{"kill", "kubelet", "--node", "lab-1", "--downtime", "3s"}, {"kill", "kube-apiserver"},
	} {
		if out, err := l.run(t, args...); err != nil {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	want := []string{"POST /v1/nodes/lab-1/stop", "POST /v1/nodes/lab-1/start", "POST /v1/nodes/lab-2/release",
		"POST /v1/nodes/lab-1/remove", "POST /v1/nodes",
		`POST /v1/kill {"component":"kubelet","node":"lab-1","downtime":"3s"}`,
		`POST /v1/kill {"component":"kube-apiserver","downtime":"10s"}`}
	if !reflect.DeepEqual(l.reqs, want) {
		t.Errorf("requests\n%q\nwant\n%q", l.reqs, want)
	}
	out, err := l.run(t, "node", "stop", "lab-9")
	if err == nil || !strings.Contains(err.Error(), "no such node") {
		t.Errorf("stop of an unknown node: %v\n%s", err, out)
	}
	if out, err := l.run(t, "node", "add"); err != nil || !strings.Contains(out, "node lab-3 added: instance i-3") {
		t.Errorf("add: %v\n%s", err, out)
	}
}

func TestNodeCommandsNeedALab(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand(&out, &out)
	root.SetArgs([]string{"node", "stop", "lab-1", "--state-dir", t.TempDir()})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "no control socket") {
		t.Errorf("without a lab: %v", err)
	}
}
