package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/fakecloudtest"
	"github.com/terway-sim/terway/internal/nlsafe"
)

// fabricLab is a supervisor on a real fakecloud and VPC fabric (node
// namespaces with real ENI interfaces), a fake API server, and a
// stand-in process per node: what stop and release act on, without a
// Kubernetes node (whose start needs the machine's mount points).
func fabricLab(t *testing.T) *Supervisor {
	t.Helper()
	spec := fakecloud.DefaultSpec()
	l := fakecloudtest.StartLab(t, "cl", fakecloud.Options{Spec: &spec, Seed: 1, TimeScale: 0.01})
	dir := t.TempDir()
	ps, err := newProcs(dir, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	s := &Supervisor{cfg: Config{Name: "t", Dir: dir, Mode: "ENIMultiIP"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		st: &State{Name: "t", Dir: dir}, procs: ps, cloud: l.Cloud, fabric: l.Fabric}
	if err := s.recordNodes(); err != nil {
		t.Fatal(err)
	}
	var nodes []corev1.Node
	for i := range s.st.Nodes {
		n := s.newNode(&s.st.Nodes[i])
		// The node's "kubelet": a process in its network namespace.
		p, err := ps.start(n.st.Name+"-kubelet", "nsenter", "--net="+n.st.NetNS, "--", "sleep", "600")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.stop(time.Second) })
		n.list, n.comps = []*proc{p}, map[string]*proc{ComponentKubelet: p}
		s.nodes = append(s.nodes, n)
		nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.st.Name}})
	}
	s.kube = fake.NewClientset(&corev1.NodeList{Items: nodes})
	return s
}

// litter leaves in node n what pods and a daemon leave: a veth pair,
// a rule, a route in another table, and files in /run.
func litter(t *testing.T, n NodeState) {
	t.Helper()
	h, err := nlsafe.Open(n.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cali0test"}, PeerName: "cali0peer"}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	l, err := h.LinkByName("cali0test")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	_, dst, _ := net.ParseCIDR("192.168.77.7/32")
	if err := h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Table: 1001}); err != nil {
		t.Fatal(err)
	}
	r := netlink.NewRule()
	r.Priority, r.Table, r.Src = 1000, 1001, dst
	if err := h.RuleAdd(r); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/run/eni/eni.socket", "/run/netns/cni-1"} {
		if err := os.WriteFile(n.HostPath(p), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// leftovers lists what litter left and a reboot clears, plus the ENI
// links, in node n.
func leftovers(t *testing.T, n NodeState) (links []string, rules, routes int) {
	t.Helper()
	h, err := nlsafe.Open(n.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ls, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Attrs().Name != "lo" {
			links = append(links, l.Attrs().Name)
		}
	}
	rs, err := h.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Priority == 1000 {
			rules++
		}
	}
	rt, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 1001}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	return links, rules, len(rt)
}

func TestStopAndReleaseOnTheFabric(t *testing.T) {
	s := fabricLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if len(s.nodes) < 2 {
		t.Fatalf("%d nodes, want 2 or more", len(s.nodes))
	}
	n := *s.nodes[0].st
	for _, p := range nodePaths {
		if err := os.MkdirAll(n.HostPath(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	litter(t, n)
	if links, rules, routes := leftovers(t, n); len(links) < 3 || rules != 1 || routes != 1 {
		t.Fatalf("before stop: links %v, rules %d, routes %d", links, rules, routes)
	}
	kubelet := s.nodes[0].comps[ComponentKubelet]

	if err := s.StopNode(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.cloud.Instance(n.InstanceID); in.Status != fakecloud.StatusStopped {
		t.Errorf("instance %s is %s, want Stopped", n.InstanceID, in.Status)
	}
	if links, rules, routes := leftovers(t, n); len(links) != 0 || rules != 0 || routes != 0 {
		t.Errorf("after stop: links %v, rules %d, routes %d; want none", links, rules, routes)
	}
	for _, p := range []string{"/run/eni/eni.socket", "/run/netns/cni-1"} {
		if _, err := os.Stat(n.HostPath(p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the power-off: %v", p, err)
		}
	}
	if kubelet.running() {
		t.Error("the node's kubelet survived the power-off")
	}
	if p := s.procs.firstExited(); p != nil {
		t.Errorf("%s's exit counts as a failure", p.name)
	}
	st, err := ReadState(s.st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Nodes[0].Status != NodeStopped {
		t.Errorf("state file says %s is %q, want stopped", n.Name, st.Nodes[0].Status)
	}
	if err := s.Kill(ctx, ComponentKubelet, n.Name, 0); !errors.Is(err, ErrNodeState) {
		t.Errorf("kill on a stopped node: %v", err)
	}

	if err := s.ReleaseNode(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.cloud.Instance(n.InstanceID); ok {
		t.Errorf("instance %s still exists", n.InstanceID)
	}
	if _, err := os.Stat(n.NetNS); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("node namespace %s still there: %v", n.NetNS, err)
	}
	if _, err := s.kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node %s: %v, want NotFound", n.Name, err)
	}
	st, err = ReadState(s.st.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Released) != 1 || st.Released[0].Name != n.Name || st.Released[0].Status != NodeReleased {
		t.Errorf("released %+v, want %s", st.Released, n.Name)
	}
	for _, m := range st.Nodes {
		if m.Name == n.Name {
			t.Errorf("%s still among the nodes", n.Name)
		}
	}

	// A running node is released in one go: its processes die as expected.
	other := s.nodes[0]
	okubelet := other.comps[ComponentKubelet]
	if err := s.ReleaseNode(ctx, other.st.Name); err != nil {
		t.Fatal(err)
	}
	if okubelet.running() {
		t.Error("the released node's kubelet survived")
	}
	if p := s.procs.firstExited(); p != nil {
		t.Errorf("%s's exit counts as a failure", p.name)
	}
}
