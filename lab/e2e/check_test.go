package e2e

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// tamper breaks one object of a pod's datapath.
type tamper struct {
	name string
	want string // CHECK's error must mention this (case-insensitive)
	do   func(t *testing.T, p *pod)
}

// inNode runs fn with a netlink handle in the pod's node.
func inNode(t testing.TB, p *pod, fn func(h *nlsafe.Handle) error) {
	t.Helper()
	inNS(t, p.n.ln.NetNSPath(), fn)
}

// inPod runs fn with a netlink handle in the pod.
func inPod(t testing.TB, p *pod, fn func(h *nlsafe.Handle) error) {
	t.Helper()
	inNS(t, p.netns.Path(), fn)
}

// inNS runs fn with a handle in the namespace at path, closed right after
// so that it does not keep a pod's namespace alive.
func inNS(t testing.TB, path string, fn func(h *nlsafe.Handle) error) {
	t.Helper()
	h, err := nlsafe.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := fn(h); err != nil {
		t.Fatal(err)
	}
}

func hostVeth(h *nlsafe.Handle, p *pod) (netlink.Link, error) {
	for _, i := range p.result.Interfaces {
		if i.Sandbox == "" {
			return h.LinkByName(i.Name)
		}
	}
	return nil, unix.ENOENT
}

func podRule(h *nlsafe.Handle, p *pod, prio int) (*netlink.Rule, error) {
	rules, err := h.RuleList(netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		if r.Priority != prio {
			continue
		}
		if (r.Dst != nil && r.Dst.IP.Equal(p.ip.AsSlice())) || (r.Src != nil && r.Src.IP.Equal(p.ip.AsSlice())) {
			return &r, nil
		}
	}
	return nil, unix.ENOENT
}

func host32(a netip.Addr) *net.IPNet { return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)} }

// tamperWith is a tamper that finds one object of the pod's datapath
// with find, in the namespace in runs it in, and breaks it with change.
func tamperWith[T any](in func(testing.TB, *pod, func(*nlsafe.Handle) error), find func(*nlsafe.Handle, *pod) (T, error),
	change func(*nlsafe.Handle, *pod, T) error) func(*testing.T, *pod) {
	return func(t *testing.T, p *pod) {
		in(t, p, func(h *nlsafe.Handle) error {
			obj, err := find(h, p)
			if err != nil {
				return err
			}
			return change(h, p, obj)
		})
	}
}

func podEth0(h *nlsafe.Handle, _ *pod) (netlink.Link, error) { return h.LinkByName("eth0") }

// ruleAt finds the pod's rule at priority prio.
func ruleAt(prio int) func(*nlsafe.Handle, *pod) (*netlink.Rule, error) {
	return func(h *nlsafe.Handle, p *pod) (*netlink.Rule, error) { return podRule(h, p, prio) }
}

func delRule(h *nlsafe.Handle, _ *pod, r *netlink.Rule) error { return h.RuleDel(r) }

// delFirst deletes the first of the listed objs that match accepts, or
// returns the listing's error.
func delFirst[T any](objs []T, listErr error, match func(T) bool, del func(T) error) error {
	if listErr != nil {
		return listErr
	}
	for _, o := range objs {
		if match(o) {
			return del(o)
		}
	}
	return unix.ENOENT
}

var tampers = []tamper{
	{"pod address", "address", tamperWith(inPod, podEth0, func(h *nlsafe.Handle, p *pod, l netlink.Link) error {
		return h.AddrDel(l, &netlink.Addr{IPNet: host32(p.ip)})
	})},
	{"host route", "route", tamperWith(inNode, hostVeth, func(h *nlsafe.Handle, p *pod, l netlink.Link) error {
		return h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: host32(p.ip), Scope: netlink.SCOPE_LINK})
	})},
	{"rule 512", "512", tamperWith(inNode, ruleAt(512), delRule)},
	{"rule 2048", "2048", tamperWith(inNode, ruleAt(2048), delRule)},
	{"table default route", "default", tamperWith(inNode, ruleAt(2048), func(h *nlsafe.Handle, _ *pod, r *netlink.Rule) error {
		routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: r.Table}, netlink.RT_FILTER_TABLE)
		return delFirst(routes, err, func(rt netlink.Route) bool { return rt.Dst == nil || rt.Dst.IP.IsUnspecified() },
			func(rt netlink.Route) error { return h.RouteDel(&rt) })
	})},
	{"neighbour", "neigh", tamperWith(inPod, podEth0, func(h *nlsafe.Handle, _ *pod, l netlink.Link) error {
		return h.NeighDel(&netlink.Neigh{LinkIndex: l.Attrs().Index, IP: net.ParseIP("169.254.1.1"), Family: netlink.FAMILY_V4})
	})},
	{"MTU", "mtu", tamperWith(inPod, podEth0, func(h *nlsafe.Handle, _ *pod, l netlink.Link) error {
		return h.LinkSetMTU(l, 1400)
	})},
	{"link down", "down", tamperWith(inNode, hostVeth, func(h *nlsafe.Handle, _ *pod, l netlink.Link) error {
		return h.LinkSetDown(l)
	})},
	{"qdisc", "tbf", tamperWith(inNode, hostVeth, func(h *nlsafe.Handle, _ *pod, l netlink.Link) error {
		qs, err := h.QdiscList(l)
		return delFirst(qs, err, func(q netlink.Qdisc) bool { return q.Type() == "tbf" }, h.QdiscDel)
	})},
}

func withBandwidth(p *corev1.Pod) {
	p.Annotations = map[string]string{"k8s.aliyun.com/ingress-bandwidth": "10M", "k8s.aliyun.com/egress-bandwidth": "5M"}
}

// TestCheckFailsForEachTampering breaks each object of a PolicyRoute pod
// in turn: CHECK must fail naming it, DEL must still clean up, and the
// daemon's periodic CHECK must report a broken pod.
func TestCheckFailsForEachTampering(t *testing.T) {
	e := newEnv(t)
	n := e.node(1, nodeOpts{})
	for _, tp := range tampers {
		p := n.newPod("t-"+strings.ToLower(strings.ReplaceAll(tp.name, " ", "-")), withBandwidth)
		p.mustAdd("1.0.0")
		if err := p.check("1.0.0"); err != nil {
			t.Fatalf("%s: CHECK before tampering: %v", tp.name, err)
		}
		tp.do(t, p)
		err := p.check("1.0.0")
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tp.want)) {
			t.Fatalf("%s: CHECK after tampering = %v, want an error naming %q", tp.name, err, tp.want)
		}
		t.Logf("%s: %v", tp.name, err)
		if tp.name == "link down" {
			// The daemon's own periodic CHECK runs the plugin too.
			if err := n.d.Check(context.Background()); err != nil {
				t.Fatal(err)
			}
			assertEvent(t, n, p.name, "ResourceInvalid")
		}
		p.mustDel("1.0.0")
		assertClean(t, n, p.ip)
	}
}

var _ = ns.NetNS(nil)
