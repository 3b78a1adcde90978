package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
)

// kernelHasIPVlan asks iproute2, independently of the code under test,
// whether an ipvlan link can be created in namespace n.
func kernelHasIPVlan(t *testing.T, n *testnetns.NS) bool {
	t.Helper()
	ip := func(args ...string) ([]byte, error) {
		return exec.Command("nsenter", append([]string{"--net=" + n.Path(), "ip"}, args...)...).CombinedOutput()
	}
	if out, err := ip("link", "add", "dptprb0", "type", "veth", "peer", "name", "dptprb1"); err != nil {
		t.Fatalf("oracle: add veth: %v: %s", err, out)
	}
	defer func() { _, _ = ip("link", "del", "dptprb0") }()
	out, err := ip("link", "add", "link", "dptprb0", "name", "dptprb2", "type", "ipvlan", "mode", "l2")
	if err == nil {
		return true
	}
	msg := strings.ToLower(string(out))
	if strings.Contains(msg, "unknown device type") || strings.Contains(msg, "not supported") {
		t.Logf("oracle: this kernel lacks ipvlan: %s", strings.TrimSpace(string(out)))
		return false
	}
	t.Fatalf("oracle: ip link add type ipvlan failed unclearly: %v: %s", err, out)
	return false
}

func TestProbeIPVlan(t *testing.T) {
	pod := nsWithoutDAD(t)
	ph := testnetns.Handle(t, pod.Path())
	before := dump(t, ph)
	has := kernelHasIPVlan(t, pod)
	t.Logf("kernel has ipvlan: %v", has) // make test-kernel looks for true
	err := ProbeIPVlan(pod.Path())
	switch {
	case has && err != nil:
		t.Errorf("ProbeIPVlan = %v on a kernel with ipvlan", err)
	case !has && !errors.Is(err, ErrIPVlanUnsupported):
		t.Errorf("ProbeIPVlan = %v on a kernel without ipvlan, want ErrIPVlanUnsupported", err)
	}
	requireSame(t, "pod after the probe", before, dump(t, ph))

	err = ProbeIPVlan(t.TempDir() + "/no-such-netns")
	if err == nil || errors.Is(err, ErrIPVlanUnsupported) {
		t.Errorf("ProbeIPVlan of a missing netns = %v, want another error", err)
	}
}

// needLinkKind skips the test, saying why, on a kernel that cannot create
// links of kind (ipvlan, vlan): make test-kernel runs it in a VM whose
// kernel can, and fails there on any skip.
func needLinkKind(t testing.TB, kind string) {
	t.Helper()
	n := nsWithoutDAD(t)
	ip := func(args ...string) ([]byte, error) {
		return exec.Command("nsenter", append([]string{"--net=" + n.Path(), "ip"}, args...)...).CombinedOutput()
	}
	if out, err := ip("link", "add", "dptk0", "type", "veth", "peer", "name", "dptk1"); err != nil {
		t.Fatalf("oracle: add veth: %v: %s", err, out)
	}
	args := []string{"link", "add", "link", "dptk0", "name", "dptk2", "type", kind}
	if kind == "vlan" {
		args = append(args, "id", "7")
	}
	out, err := ip(args...)
	if err == nil {
		return
	}
	msg := strings.ToLower(string(out))
	if strings.Contains(msg, "unknown device type") || strings.Contains(msg, "not supported") {
		t.Skipf("this kernel lacks %s (%s): make test-kernel runs this test in a VM whose kernel has it", kind, strings.TrimSpace(string(out)))
	}
	t.Fatalf("oracle: ip link add type %s failed unclearly: %v: %s", kind, err, out)
}

// wantIPVlanPod is the pod side of IPVlan: the slave with the ENI's MAC,
// the address under the vSwitch mask, the default route via the vSwitch
// gateway, and the node IP through the slave at the ENI's MAC.
func wantIPVlanPod(s *Spec, eniMAC string) []string {
	m := s.mtu()
	want := []string{
		fmt.Sprintf("link eth0 ipvlan up mtu %d", m),
		fmt.Sprintf("addr eth0 %s/24", s.IPv4),
		fmt.Sprintf("route 254 default via %s dev eth0 onlink", eniGW4),
		fmt.Sprintf("route 254 %s/32 dev eth0 scope link", nodeIP4),
		fmt.Sprintf("neigh eth0 %s lladdr %s permanent", nodeIP4, eniMAC),
	}
	if s.IPv6.IsValid() {
		want = append(want,
			fmt.Sprintf("addr eth0 %s/64", s.IPv6),
			fmt.Sprintf("route 254 default via %s dev eth0 onlink", eniGW6),
			fmt.Sprintf("route 254 %s/128 dev eth0", nodeIP6),
			fmt.Sprintf("neigh eth0 %s lladdr %s permanent", nodeIP6, eniMAC))
	}
	if s.EgressBPS > 0 {
		want = append(want, fmt.Sprintf("qdisc eth0 tbf 1:0 parent root rate %d", s.EgressBPS))
	}
	if s.IngressBPS > 0 {
		want = append(want,
			fmt.Sprintf("link ifbeth0 ifb up mtu %d", m),
			fmt.Sprintf("qdisc ifbeth0 tbf 1:0 parent root rate %d", s.IngressBPS),
			"qdisc eth0 ingress ffff:0 parent ingress")
	}
	return want
}

// wantIPVlanHost is the node side of IPVlan for s on ENI slave ipvl.
func wantIPVlanHost(s *Spec, ipvl string) []string {
	m := s.mtu()
	want := []string{
		fmt.Sprintf("link %s veth up mtu %d", eniName, m),
		fmt.Sprintf("link %s ipvlan up mtu %d", ipvl, m),
		fmt.Sprintf("addr %s %s/32", ipvl, nodeIP4),
		fmt.Sprintf("route 254 %s/32 dev %s scope link", s.IPv4, ipvl),
		fmt.Sprintf("qdisc %s clsact ffff:0 parent ingress", eniName),
	}
	if s.IPv6.IsValid() {
		want = append(want,
			fmt.Sprintf("addr %s %s/128", ipvl, nodeIP6),
			fmt.Sprintf("route 254 %s/128 dev %s", s.IPv6, ipvl))
	}
	return want
}

// ipvlName is the ENI's node-side slave on n.
func (n *node) ipvlName(t *testing.T) string {
	t.Helper()
	return hostSlaveName(n.eni(t).Attrs().Index)
}

func TestIPVlan(t *testing.T) {
	needLinkKind(t, "ipvlan")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			u := newSetUp(t, IPVlan, v.o)
			n, s, pod, ph := u.n, u.s, u.pod, u.ph
			ipvl := n.ipvlName(t)
			podLink := n.link(t, ph, "eth0")
			requireResult(t, u.res, s, nil, podLink, eniGW4, eniGW6)
			nodeDump, podDump := dump(t, n.nl), dump(t, ph)
			requireLines(t, "pod", podDump, wantIPVlanPod(s, n.eniMAC.String())...)
			requireLines(t, "node", nodeDump, wantIPVlanHost(s, ipvl)...)
			requireHostSysctls(t, n, s, ipvl, eniName)
			requirePodSysctls(t, pod, s, "eth0")
			if err := Check(s); err != nil {
				t.Fatalf("Check after Setup: %v", err)
			}
			u.again(t, nodeDump, podDump)

			// Out through the ENI to the vSwitch gateway; to the node's
			// IP through the node-side slave; the node to the pod.
			n.routePod(t, s.IPv4, s.IPv6)
			udpEcho(t, n.fabric, netip.AddrPortFrom(eniGW4, 7))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(eniGW4, 7))
			udpEcho(t, n.ns, netip.AddrPortFrom(nodeIP4, 8))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(nodeIP4, 8))
			udpEcho(t, pod, netip.AddrPortFrom(s.IPv4, 9))
			reach(t, n.ns, nodeIP4, netip.AddrPortFrom(s.IPv4, 9))
			if s.IPv6.IsValid() {
				udpEcho(t, n.fabric, netip.AddrPortFrom(eniGW6, 7))
				reach(t, pod, s.IPv6, netip.AddrPortFrom(eniGW6, 7))
				udpEcho(t, n.ns, netip.AddrPortFrom(nodeIP6, 8))
				reach(t, pod, s.IPv6, netip.AddrPortFrom(nodeIP6, 8))
			}

			// A Service address the node serves itself (as IPVS binds
			// them): only the ENI's redirect brings it there, the VPC
			// has no route for it.
			svc4, svc6 := addN(svcCIDR4.Addr(), 10), addN(svcCIDR6.Addr(), 10)
			lo := n.link(t, n.nl, "lo")
			n.addAddr(t, n.nl, lo, netip.PrefixFrom(svc4, 32))
			udpEcho(t, n.ns, netip.AddrPortFrom(svc4, 53))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(svc4, 53))
			if s.IPv6.IsValid() {
				n.addAddr(t, n.nl, lo, netip.PrefixFrom(svc6, 128))
				udpEcho(t, n.ns, netip.AddrPortFrom(svc6, 53))
				reach(t, pod, s.IPv6, netip.AddrPortFrom(svc6, 53))
			}

			// A second pod on the ENI: the two meet inside the ipvlan
			// port, and it reaches the gateway too.
			s2 := n.spec(IPVlan, 1, v.o)
			pod2 := newPod(t, s2)
			setup(t, s2)
			n.routePod(t, s2.IPv4, s2.IPv6)
			udpEcho(t, pod2, netip.AddrPortFrom(s2.IPv4, 9))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(s2.IPv4, 9))
			reach(t, pod2, s2.IPv4, netip.AddrPortFrom(eniGW4, 7))
			if s.IPv6.IsValid() {
				udpEcho(t, pod2, netip.AddrPortFrom(s2.IPv6, 9))
				reach(t, pod, s.IPv6, netip.AddrPortFrom(s2.IPv6, 9))
			}

			teardownTwice(t, s, s2)
			requireSame(t, "pod after Teardown", u.podBefore, dump(t, ph))
			nodeAfter := dump(t, n.nl)
			gone, added := diff(u.nodeBefore, nodeAfter)
			// Only the shared ENI state may differ: the ENI, its slave
			// and its qdisc; the Service address is the test's.
			for _, l := range append(gone, added...) {
				if !strings.Contains(l+" ", " "+eniName+" ") && !strings.Contains(l+" ", " "+ipvl+" ") && !strings.HasPrefix(l, "addr lo ") {
					t.Errorf("node after Teardown differs in %q, which is not ENI state", l)
				}
			}
			requireNoLine(t, "node after Teardown", nodeAfter,
				" "+s.IPv4.String()+"/", " "+s2.IPv4.String()+"/", ipFrag(s.IPv6), ipFrag(s2.IPv6))
			if err := Check(s); err == nil {
				t.Error("Check passes after Teardown")
			}
		})
	}
}

// TestIPVlanOneAddressOnePod: the ENI's ipvlan port refuses a second
// pod with an address another pod of the ENI holds, and that failed Setup
// leaves the first pod working; a late Teardown of a pod whose namespace
// vanished leaves the route of the newer pod that holds its address.
func TestIPVlanOneAddressOnePod(t *testing.T) {
	needLinkKind(t, "ipvlan")
	n := newNode(t)
	a := n.spec(IPVlan, 0, podOpts{dual: true})
	podA := newPod(t, a)
	setup(t, a)
	b := n.spec(IPVlan, 1, podOpts{dual: true})
	b.IPv4, b.IPv6 = a.IPv4, a.IPv6
	podB := newPod(t, b)
	phB := testnetns.Handle(t, podB.Path())
	before := dump(t, phB)
	if _, err := Setup(b); err == nil {
		t.Fatal("Setup of a second pod with the first pod's address succeeded")
	} else {
		t.Logf("second pod refused: %v", err)
	}
	requireSame(t, "second pod after its failed Setup", before, dump(t, phB))
	if err := Check(a); err != nil {
		t.Fatalf("first pod after the second's failed Setup: %v", err)
	}

	// A's namespace vanishes without DEL; B gets the address; A's late
	// DEL must not remove B's route.
	if err := podA.Remove(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the pod's slave to go with its namespace", func() error {
		if _, err := Setup(b); err != nil {
			return err
		}
		return nil
	})
	teardownTwice(t, a)
	if err := Check(b); err != nil {
		t.Fatalf("the newer pod after the late Teardown of the old one: %v", err)
	}
	teardownTwice(t, b)
	requireNoLine(t, "node after both Teardowns", dump(t, n.nl), ipFrag(a.IPv4), ipFrag(a.IPv6))
}

// TestIPVlanStaleRedirect: a filter for a Service CIDR no longer in the
// spec is removed, the new CIDR's added.
func TestIPVlanStaleRedirect(t *testing.T) {
	needLinkKind(t, "ipvlan")
	u := newSetUp(t, IPVlan, podOpts{})
	n, s := u.n, u.s
	eni := n.eni(t)
	s.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.100.0.0/16")}
	setup(t, s)
	fs, err := n.nl.FilterList(eni, netlink.HANDLE_MIN_EGRESS)
	if err != nil {
		t.Fatal(err)
	}
	var dsts []string
	for _, f := range fs {
		if d := decodeRedirect(f); d.dst.IsValid() {
			dsts = append(dsts, d.dst.String())
		}
	}
	if strings.Join(dsts, ",") != "10.100.0.0/16" {
		t.Errorf("redirect filters for %v after the Service CIDR changed, want only 10.100.0.0/16", dsts)
	}
}

func TestCheckIPVlan(t *testing.T) {
	needLinkKind(t, "ipvlan")
	u := newSetUp(t, IPVlan, podOpts{dual: true, ingressBPS: 1_000_000, egressBPS: 500_000})
	n, s, ph := u.n, u.s, u.ph
	ipvl := n.ipvlName(t)
	host4 := netip.PrefixFrom(s.IPv4, 32)
	onLink4 := netip.PrefixFrom(s.IPv4, 24)
	runTampers(t, s, []tamper{
		{"pod address", delAddr(ph, "eth0", onLink4), fmt.Sprintf("address %s on eth0 in pod: missing", onLink4)},
		{"pod default route", delRoute(ph, "eth0", defaultRoute(family{}), unix.RT_TABLE_MAIN), fmt.Sprintf("route default via %s in pod: missing", eniGW4)},
		{"pod route to the node", delRoute(ph, "eth0", netip.PrefixFrom(nodeIP4, 32), unix.RT_TABLE_MAIN), fmt.Sprintf("route %s/32 dev eth0 in pod: missing", nodeIP4)},
		{"pod neighbour of the node", delNeigh(ph, "eth0", nodeIP4), fmt.Sprintf("neighbour %s on eth0: missing", nodeIP4)},
		{"pod IPv6 neighbour of the node", delNeigh(ph, "eth0", nodeIP6), fmt.Sprintf("neighbour %s on eth0: missing", nodeIP6)},
		{"pod link down", setDown(ph, "eth0"), "link eth0 in pod: down"},
		{"host route", delRoute(n.nl, ipvl, host4, unix.RT_TABLE_MAIN), fmt.Sprintf("route %s dev %s: missing", host4, ipvl)},
		{"node IP on the slave", delAddr(n.nl, ipvl, netip.PrefixFrom(nodeIP4, 32)), fmt.Sprintf("address %s/32 on %s in host: missing", nodeIP4, ipvl)},
		{"slave ARP on", func() error { return n.nl.LinkSetARPOn(n.link(t, n.nl, ipvl)) }, fmt.Sprintf("flag NOARP of %s in host: not set", ipvl)},
		{"slave down", setDown(n.nl, ipvl), fmt.Sprintf("link %s in host: down", ipvl)},
		{"ENI down", setDown(n.nl, eniName), fmt.Sprintf("link %s in host: down", eniName)},
		{"clsact", delQdisc(n.nl, eniName, "clsact"), fmt.Sprintf("qdisc clsact on %s: missing", eniName)},
		{"Service redirect", delRedirect(n.nl, eniName, RedirectPriorityV6), fmt.Sprintf("filter redirecting %s on %s to %s: missing", svcCIDR6, eniName, ipvl)},
		{"egress qdisc", delQdisc(ph, "eth0", "tbf"), "qdisc tbf on eth0: missing"},
		{"ingress qdisc", delQdisc(ph, "ifbeth0", "tbf"), "qdisc tbf on ifbeth0: missing"},
		{"slave deleted", func() error { return n.nl.LinkDel(n.link(t, n.nl, ipvl)) },
			fmt.Sprintf("link %s in host: missing or not an ipvlan of ENI %s", ipvl, eniName)},
	})
}

// delRedirect deletes dev's egress filters at prio.
func delRedirect(h *nlsafe.Handle, dev string, prio uint16) func() error {
	return func() error {
		l, err := linkIn(h, dev)
		if err != nil {
			return err
		}
		fs, err := h.FilterList(l, netlink.HANDLE_MIN_EGRESS)
		if err != nil {
			return err
		}
		for _, f := range fs {
			if f.Attrs().Priority == prio {
				return h.FilterDel(f)
			}
		}
		return fmt.Errorf("no filter at %d on %s", prio, dev)
	}
}
