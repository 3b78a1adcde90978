package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// labWithoutProcesses is a supervisor with three nodes recorded and no
// process, cloud or cluster: enough for what is decided before any of
// those is touched.
func labWithoutProcesses(t *testing.T) *Supervisor {
	t.Helper()
	s := &Supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil)), procs: &procs{},
		st: &State{Name: "t", Dir: t.TempDir(), Nodes: []NodeState{
			{Name: "t-1", InstanceID: "i-1", Status: NodeRunning},
			{Name: "t-2", InstanceID: "i-2", Status: NodeStopped},
			{Name: "t-3", InstanceID: "i-3"},
		}}}
	for i := range s.st.Nodes {
		s.nodes = append(s.nodes, s.newNode(&s.st.Nodes[i]))
	}
	s.st.Released = []NodeState{{Name: "t-0", InstanceID: "i-0", Status: NodeReleased}}
	return s
}

func TestOperationRefusals(t *testing.T) {
	s := labWithoutProcesses(t)
	ctx := context.Background()
	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"stop an unknown node", s.StopNode(ctx, "t-9"), ErrUnknownNode},
		{"stop a released node", s.StopNode(ctx, "t-0"), ErrNodeState},
		{"stop a stopped node", s.StopNode(ctx, "t-2"), ErrNodeState},
		{"start a running node", s.StartNode(ctx, "t-1"), ErrNodeState},
		{"start a node of an old state file (running)", s.StartNode(ctx, "t-3"), ErrNodeState},
		{"remove a stopped node", s.RemoveNode(ctx, "t-2"), ErrNodeState},
		{"release an unknown node", s.ReleaseNode(ctx, "nope"), ErrUnknownNode},
		{"kill an unknown component", s.Kill(ctx, "etcd", "", 0), ErrBadRequest},
		{"kill kube-apiserver on a node", s.Kill(ctx, ComponentAPIServer, "t-1", 0), ErrBadRequest},
		{"kill with a negative downtime", s.Kill(ctx, ComponentKubelet, "t-1", -time.Second), ErrBadRequest},
		{"kill the kubelet of a stopped node", s.Kill(ctx, ComponentKubelet, "t-2", 0), ErrNodeState},
		{"kill terwayd on a stopped node", s.Kill(ctx, ComponentTerwayd, "t-2", 0), ErrNodeState},
		{"kill a kubelet that is not running", s.Kill(ctx, ComponentKubelet, "t-1", 0), ErrNodeState},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.err, c.want)
		}
	}
}

// Waiting for a terwayd to kill ends with the caller's context.
func TestKillTerwaydWaitsWithinContext(t *testing.T) {
	s := labWithoutProcesses(t)
	s.st.Nodes[0].Cgroup = "terway-lab-test-no-such-cgroup"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := s.Kill(ctx, ComponentTerwayd, "t-1", 0)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no terwayd ran on t-1") {
		t.Errorf("kill with no terwayd: %v", err)
	}
}

// A released node leaves the nodes for the released list, and the other
// runners still describe their own entry.
func TestForgetNode(t *testing.T) {
	s := labWithoutProcesses(t)
	s.nodes[1].st.HolderPID = 42
	s.forgetNode(s.nodes[1])
	var names []string
	for _, n := range s.st.Nodes {
		names = append(names, n.Name)
	}
	if !reflect.DeepEqual(names, []string{"t-1", "t-3"}) {
		t.Errorf("nodes %v, want t-1 t-3", names)
	}
	if len(s.nodes) != 2 {
		t.Fatalf("%d runners, want 2", len(s.nodes))
	}
	for i, n := range s.nodes {
		if n.st != &s.st.Nodes[i] {
			t.Errorf("runner %d points elsewhere than its state entry", i)
		}
	}
	s.nodes[1].st.MaxPods = 7
	if s.st.Nodes[1].MaxPods != 7 {
		t.Error("a runner's change does not reach the state")
	}
	last := s.st.Released[len(s.st.Released)-1]
	if last.Name != "t-2" || last.Status != NodeReleased || last.HolderPID != 0 {
		t.Errorf("released entry %+v", last)
	}
	if n, ok := s.st.Node("t-2"); !ok || n.Status != NodeReleased {
		t.Errorf("State.Node(t-2) = %+v, %v", n, ok)
	}
	if _, err := s.findNode("t-2"); !errors.Is(err, ErrNodeState) {
		t.Errorf("findNode of a released node: %v", err)
	}
}

// The state file keeps the operator's key, node statuses and released
// nodes, readable by root only.
func TestStateRoundTrip(t *testing.T) {
	s := labWithoutProcesses(t)
	s.st.OperatorAccessKeyID, s.st.OperatorAccessKeySecret = "LTAIop", "secret"
	if err := s.st.write(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(StatePath(s.st.Dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := ReadState(s.st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s.st) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, s.st)
	}
	if !got.Nodes[2].Running() || got.Nodes[1].Running() {
		t.Error("Running: an empty status is running, stopped is not")
	}
}

// Only an exit the supervisor did not cause is a failure.
func TestExpectedExits(t *testing.T) {
	ps, err := newProcs(t.TempDir(), os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	killed, err := ps.start("killed", "sleep", "300")
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := ps.start("stopped", "sleep", "300")
	if err != nil {
		t.Fatal(err)
	}
	alive, err := ps.start("alive", "sleep", "300")
	if err != nil {
		t.Fatal(err)
	}
	defer alive.stop(time.Second)
	killed.kill()
	stopped.stop(time.Second)
	if p := ps.firstExited(); p != nil {
		t.Errorf("%s counts as a failure, but the supervisor ended it", p.name)
	}
	crashed, err := ps.start("crashed", "sh", "-c", "exit 3")
	if err != nil {
		t.Fatal(err)
	}
	<-crashed.done
	if p := ps.firstExited(); p != crashed {
		t.Errorf("firstExited = %v, want the crashed process", p)
	}
	ps.forget()
	var names []string
	for _, p := range ps.list {
		names = append(names, p.name)
	}
	if !reflect.DeepEqual(names, []string{"alive", "crashed"}) {
		t.Errorf("after forget: %v, want the running and the crashed", names)
	}
	if !alive.running() || killed.running() {
		t.Error("running() is wrong")
	}
}

func TestResetRuleset(t *testing.T) {
	saved := `# Generated by iptables-save
*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -j KUBE-SERVICES
COMMIT
*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
COMMIT
*weird
COMMIT
`
	want := "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n" +
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
	if got := string(resetRuleset([]byte(saved))); got != want {
		t.Errorf("reset\n%s\nwant\n%s", got, want)
	}
	if got := resetRuleset(nil); len(got) != 0 {
		t.Errorf("nothing saved, reset %q", got)
	}
}

func TestEmptyRun(t *testing.T) {
	root := t.TempDir()
	n := NodeState{Name: "t-1", Root: root}
	for _, p := range []string{"/run/eni/eni.socket", "/run/netns/cni-1", "/var/lib/kubelet/keep"} {
		if err := os.MkdirAll(n.HostPath(p+"-dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n.HostPath(p), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := emptyRun(n); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"/run/eni/eni.socket", "/run/netns/cni-1", "/run/eni/eni.socket-dir"} {
		if _, err := os.Stat(n.HostPath(gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived: %v", gone, err)
		}
	}
	for _, kept := range []string{"/run/eni", "/var/lib/kubelet/keep", "/var/lib/kubelet/keep-dir"} {
		if _, err := os.Stat(n.HostPath(kept)); err != nil {
			t.Errorf("%s went: %v", kept, err)
		}
	}
}

// LiveAuditInput reads the state at each call: a node released between
// two rounds of an audit is not audited in the second.
func TestLiveAuditInput(t *testing.T) {
	s := labWithoutProcesses(t)
	if err := s.st.write(); err != nil {
		t.Fatal(err)
	}
	input := LiveAuditInput(s.st.Dir, nil)
	names := func() []string {
		in, err := input()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range in.Nodes {
			out = append(out, n.Name)
		}
		return out
	}
	if got := names(); !reflect.DeepEqual(got, []string{"t-1", "t-2", "t-3"}) {
		t.Fatalf("nodes %v", got)
	}
	s.st.Nodes = s.st.Nodes[:1]
	if err := s.st.write(); err != nil {
		t.Fatal(err)
	}
	if got := names(); !reflect.DeepEqual(got, []string{"t-1"}) {
		t.Fatalf("nodes after two went %v, want [t-1]", got)
	}
	if _, err := LiveAuditInput(t.TempDir(), nil)(); !errors.Is(err, ErrNoLab) {
		t.Fatalf("no lab: %v", err)
	}
}
