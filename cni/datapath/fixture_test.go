package datapath

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
)

// The lab's address plan: the node's primary interface in vSwitch
// 192.168.0.0/24, the ENI in vSwitch 192.168.1.0/24, gateways at .253.
var (
	nodeIP4  = netip.MustParseAddr("192.168.0.10")
	nodeIP6  = netip.MustParseAddr("fd00:192:168::10")
	nodeGW4  = netip.MustParseAddr("192.168.0.253")
	nodeGW6  = netip.MustParseAddr("fd00:192:168::253")
	eniCIDR4 = netip.MustParsePrefix("192.168.1.0/24")
	eniCIDR6 = netip.MustParsePrefix("fd00:192:168:1::/64")
	eniGW4   = netip.MustParseAddr("192.168.1.253")
	eniGW6   = netip.MustParseAddr("fd00:192:168:1::253")
	podCIDR4 = netip.MustParsePrefix("172.20.3.0/24")
	svcCIDR4 = netip.MustParsePrefix("10.96.0.0/12")
	svcCIDR6 = netip.MustParsePrefix("fd00:96::/108")
	// A trunk's member ENI (VLAN) is in vSwitch 192.168.5.0/24, tagged
	// memberVID on the trunk eth1.
	memberCIDR4 = netip.MustParsePrefix("192.168.5.0/24")
	memberCIDR6 = netip.MustParsePrefix("fd00:192:168:5::/64")
	memberGW4   = netip.MustParseAddr("192.168.5.253")
	memberGW6   = netip.MustParseAddr("fd00:192:168:5::253")
)

// memberVID is the member ENI's VLAN on the trunk.
const memberVID = 100

// eniName is the ENI's name in the node namespace.
const eniName = "eth1"

// nsWithoutDAD is a test namespace (testnetns.ForTest) without duplicate
// address detection: addresses are usable at once.
func nsWithoutDAD(t testing.TB) *testnetns.NS {
	t.Helper()
	n := testnetns.ForTest(t)
	setSysctls(t, n, map[string]string{
		"net/ipv6/conf/all/accept_dad":     "0",
		"net/ipv6/conf/default/accept_dad": "0",
	})
	return n
}

// setSysctls writes sysctls inside a test namespace (fixture setup).
func setSysctls(t testing.TB, n ns.NetNS, kv map[string]string) {
	t.Helper()
	err := n.Do(func(ns.NetNS) error {
		for k, v := range kv {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("fixture sysctls in %s: %v", n.Path(), err)
	}
}

// readSysctl reads one sysctl inside a namespace.
func readSysctl(t testing.TB, n ns.NetNS, key string) string {
	t.Helper()
	var v []byte
	err := n.Do(func(ns.NetNS) error {
		var err error
		v, err = os.ReadFile(filepath.Join("/proc/sys", key))
		return err
	})
	if err != nil {
		t.Fatalf("read sysctl %s: %v", key, err)
	}
	return strings.TrimSpace(string(v))
}

// node is a node namespace standing in for a host, wired to a fabric
// namespace standing in for the VPC: the node's primary interface eth0
// (node IP, default route via the fabric) and its ENI eth1, each a veth
// whose other end sits in the fabric with the vSwitch gateway address.
// The fabric plays the VPC's SDN for pod addresses with permanent
// neighbours at the ENI's MAC (the VPC knows which ENI holds an address).
type node struct {
	ns, fabric *testnetns.NS
	nl, fnl    *nlsafe.Handle
	eniMAC     net.HardwareAddr
	// fabricENI is the fabric end of the ENI.
	fabricENI netlink.Link
}

func newNode(t testing.TB) *node {
	t.Helper()
	n := &node{ns: nsWithoutDAD(t), fabric: nsWithoutDAD(t)}
	n.nl, n.fnl = testnetns.Handle(t, n.ns.Path()), testnetns.Handle(t, n.fabric.Path())
	n.eniMAC = randomMAC(t)
	// The node starts with a strict reverse-path filter: Setup must
	// turn it off for the links it uses.
	setSysctls(t, n.ns, map[string]string{
		"net/ipv4/conf/all/rp_filter":     "1",
		"net/ipv4/conf/default/rp_filter": "1",
	})
	setSysctls(t, n.fabric, map[string]string{
		"net/ipv4/conf/all/forwarding":    "1",
		"net/ipv4/conf/all/rp_filter":     "0",
		"net/ipv6/conf/all/forwarding":    "1",
		"net/ipv4/conf/default/rp_filter": "0",
	})
	primary := n.addUplink(t, "eth0", "n0", nil)
	n.addAddr(t, n.nl, primary, netip.PrefixFrom(nodeIP4, 24))
	n.addAddr(t, n.nl, primary, netip.PrefixFrom(nodeIP6, 64))
	fp := n.link(t, n.fnl, "n0")
	n.addAddr(t, n.fnl, fp, netip.PrefixFrom(nodeGW4, 24))
	n.addAddr(t, n.fnl, fp, netip.PrefixFrom(nodeGW6, 64))
	for _, gw := range []netip.Addr{nodeGW4, nodeGW6} {
		if err := n.nl.RouteAdd(&netlink.Route{LinkIndex: primary.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
			t.Fatalf("fixture default route via %s: %v", gw, err)
		}
	}
	n.addUplink(t, eniName, "e1", n.eniMAC)
	n.fabricENI = n.link(t, n.fnl, "e1")
	n.addAddr(t, n.fnl, n.fabricENI, netip.PrefixFrom(eniGW4, 24))
	n.addAddr(t, n.fnl, n.fabricENI, netip.PrefixFrom(eniGW6, 64))
	// The ENI starts down, as a freshly attached NIC does.
	if err := n.nl.LinkSetDown(n.link(t, n.nl, eniName)); err != nil {
		t.Fatalf("fixture: ENI down: %v", err)
	}
	return n
}

// randomMAC is a locally administered unicast address.
func randomMAC(t testing.TB) net.HardwareAddr {
	t.Helper()
	mac := make(net.HardwareAddr, 6)
	if _, err := rand.Read(mac); err != nil {
		t.Fatalf("random MAC: %v", err)
	}
	mac[0] = mac[0]&0xfc | 0x02
	return mac
}

// addUplink creates a veth nodeName (node) / fabricName (fabric), both up.
func (n *node) addUplink(t testing.TB, nodeName, fabricName string, mac net.HardwareAddr) netlink.Link {
	t.Helper()
	err := n.nl.LinkAdd(&netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: nodeName, HardwareAddr: mac},
		PeerName:      fabricName,
		PeerNamespace: netlink.NsFd(int(n.fabric.Fd())),
	})
	if err != nil {
		t.Fatalf("fixture veth %s/%s: %v", nodeName, fabricName, err)
	}
	l := n.link(t, n.nl, nodeName)
	if err := n.nl.LinkSetUp(l); err != nil {
		t.Fatalf("fixture: %s up: %v", nodeName, err)
	}
	if err := n.fnl.LinkSetUp(n.link(t, n.fnl, fabricName)); err != nil {
		t.Fatalf("fixture: %s up: %v", fabricName, err)
	}
	return l
}

func (n *node) link(t testing.TB, h *nlsafe.Handle, name string) netlink.Link {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return l
}

func (n *node) addAddr(t testing.TB, h *nlsafe.Handle, l netlink.Link, p netip.Prefix) {
	t.Helper()
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: nlsafe.IPNet(p)}); err != nil {
		t.Fatalf("fixture address %s on %s: %v", p, l.Attrs().Name, err)
	}
}

// eni returns the ENI's current link in the node, or nil.
func (n *node) eni(t testing.TB) netlink.Link {
	t.Helper()
	links, err := n.nl.LinkList()
	if err != nil {
		t.Fatalf("list node links: %v", err)
	}
	for _, l := range links {
		if l.Attrs().HardwareAddr.String() == n.eniMAC.String() {
			return l
		}
	}
	return nil
}

// eniTable is the ENI's route table (the ENI must be in the node).
func (n *node) eniTable(t testing.TB) int {
	t.Helper()
	l := n.eni(t)
	if l == nil {
		t.Fatal("ENI not in node")
	}
	return ENITableBase + l.Attrs().Index
}

// routePod tells the fabric which ENI holds a pod address.
func (n *node) routePod(t testing.TB, ips ...netip.Addr) {
	t.Helper()
	for _, ip := range ips {
		if !ip.IsValid() {
			continue
		}
		fam := netlink.FAMILY_V4
		if ip.Is6() {
			fam = netlink.FAMILY_V6
		}
		err := n.fnl.NeighSet(&netlink.Neigh{
			LinkIndex: n.fabricENI.Attrs().Index, Family: fam, State: netlink.NUD_PERMANENT,
			IP: ip.AsSlice(), HardwareAddr: n.eniMAC,
		})
		if err != nil {
			t.Fatalf("fabric neighbour %s: %v", ip, err)
		}
	}
}

// podOpts varies the spec a test pod gets.
type podOpts struct {
	dual       bool
	mtu        int
	ingressBPS uint64
	egressBPS  uint64
}

// spec is pod i's spec on node n (no namespace of its own yet).
func (n *node) spec(kind Kind, i int, o podOpts) *Spec {
	s := &Spec{
		Kind:       kind,
		HostNetNS:  n.ns.Path(),
		IfName:     "eth0",
		HostVeth:   VethName(linkPrefix, "default", fmt.Sprintf("pod-%d", i), "eth0"),
		MTU:        o.mtu,
		IPv4:       addN(eniCIDR4.Addr(), 10+i),
		CIDRv4:     eniCIDR4,
		Gatewayv4:  eniGW4,
		ENIMAC:     n.eniMAC.String(),
		IngressBPS: o.ingressBPS,
		EgressBPS:  o.egressBPS,
	}
	if kind == VPCRoute {
		s.IPv4, s.CIDRv4, s.Gatewayv4, s.ENIMAC = addN(podCIDR4.Addr(), 10+i), podCIDR4, netip.Addr{}, ""
	}
	if kind == ExclusiveENI || kind == IPVlan || kind == VLAN {
		s.ServiceCIDRs = []netip.Prefix{svcCIDR4, svcCIDR6}
	}
	if kind == VLAN {
		s.IPv4, s.CIDRv4, s.Gatewayv4, s.VLANID = addN(memberCIDR4.Addr(), 10+i), memberCIDR4, memberGW4, memberVID
	}
	if o.dual {
		s.IPv6, s.CIDRv6 = addN(eniCIDR6.Addr(), 0xa0+i), eniCIDR6
		if kind != VPCRoute {
			s.Gatewayv6 = eniGW6
		}
		if kind == VLAN {
			s.IPv6, s.CIDRv6, s.Gatewayv6 = addN(memberCIDR6.Addr(), 0xa0+i), memberCIDR6, memberGW6
		}
	}
	return s
}

func addN(a netip.Addr, n int) netip.Addr {
	for range n {
		a = a.Next()
	}
	return a
}

// newPod gives s a fresh pod namespace.
func newPod(t testing.TB, s *Spec) *testnetns.NS {
	t.Helper()
	p := nsWithoutDAD(t)
	// Runtimes often start pods with IPv6 off; Setup must turn it on.
	setSysctls(t, p, map[string]string{"net/ipv6/conf/default/disable_ipv6": "1"})
	s.PodNetNS = p.Path()
	return p
}

// setup runs Setup and fails the test on error.
func setup(t testing.TB, s *Spec) {
	t.Helper()
	if _, err := Setup(s); err != nil {
		t.Fatalf("Setup: %v", err)
	}
}

// dump renders a namespace's links, addresses, routes, rules, permanent
// neighbours and qdiscs as sorted lines, `ip`-like, leaving out what the
// kernel manages by itself (link-local addresses and routes, the local
// table, learned neighbours).
func dump(t *testing.T, h *nlsafe.Handle) []string {
	t.Helper()
	var lines []string
	links, err := h.LinkList()
	if err != nil {
		t.Fatalf("dump links: %v", err)
	}
	names := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		state := "down"
		if a.Flags&net.FlagUp != 0 {
			state = "up"
		}
		lines = append(lines,
			fmt.Sprintf("link %s %s %s mtu %d", a.Name, l.Type(), state, a.MTU),
			fmt.Sprintf("link %s mac %s alias %q index %d", a.Name, a.HardwareAddr, a.Alias, a.Index))
		qs, err := h.QdiscList(l)
		if err != nil {
			t.Fatalf("dump qdiscs: %v", err)
		}
		for _, q := range qs {
			line := fmt.Sprintf("qdisc %s %s %s parent %s", a.Name, q.Type(), netlink.HandleStr(q.Attrs().Handle), netlink.HandleStr(q.Attrs().Parent))
			if tbf, ok := q.(*netlink.Tbf); ok {
				line += fmt.Sprintf(" rate %d", tbf.Rate)
			}
			lines = append(lines, line)
		}
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		addrs, err := h.AddrList(nil, fam)
		if err != nil {
			t.Fatalf("dump addresses: %v", err)
		}
		for _, a := range addrs {
			if !isKernelLinkLocal(a.IP) {
				lines = append(lines, fmt.Sprintf("addr %s %s", names[a.LinkIndex], a.IPNet))
			}
		}
		routes, err := h.RouteListFiltered(fam, &netlink.Route{}, netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatalf("dump routes: %v", err)
		}
		for _, r := range routes {
			if r.Table == unix.RT_TABLE_LOCAL || (r.Dst != nil && (isKernelLinkLocal(r.Dst.IP) || r.Dst.IP.IsMulticast())) {
				continue
			}
			lines = append(lines, routeLine(r, names))
		}
		rules, err := h.RuleList(fam)
		if err != nil {
			t.Fatalf("dump rules: %v", err)
		}
		for _, r := range rules {
			lines = append(lines, fmt.Sprintf("rule %d from %s to %s iif %s lookup %d", r.Priority, netOrAll(r.Src), netOrAll(r.Dst), r.IifName, r.Table))
		}
		neighs, err := h.NeighList(0, fam)
		if err != nil {
			t.Fatalf("dump neighbours: %v", err)
		}
		for _, nb := range neighs {
			if nb.State&netlink.NUD_PERMANENT != 0 {
				lines = append(lines, fmt.Sprintf("neigh %s %s lladdr %s permanent", names[nb.LinkIndex], nb.IP, nb.HardwareAddr))
			}
		}
	}
	sort.Strings(lines)
	return lines
}

// isKernelLinkLocal reports IPv6 link-local addresses, which the kernel
// adds and removes with link state (169.254.0.0/16 is ours to check).
func isKernelLinkLocal(ip net.IP) bool {
	return ip.To4() == nil && ip.IsLinkLocalUnicast()
}

func netOrAll(n *net.IPNet) string {
	if n == nil {
		return "all"
	}
	return n.String()
}

// routeLine prints a route: "route <table> <dst> [via <gw>] dev <dev> [onlink] [scope link]".
func routeLine(r netlink.Route, names map[int]string) string {
	dst := "default"
	if r.Dst != nil {
		if ones, _ := r.Dst.Mask.Size(); ones != 0 {
			dst = r.Dst.String()
		}
	}
	line := fmt.Sprintf("route %d %s", r.Table, dst)
	if r.Gw != nil {
		line += " via " + r.Gw.String()
	}
	line += " dev " + names[r.LinkIndex]
	if r.Flags&int(netlink.FLAG_ONLINK) != 0 {
		line += " onlink"
	}
	if r.Scope == netlink.SCOPE_LINK {
		line += " scope link"
	}
	return line
}

// requireLines fails unless every wanted line is in the dump.
func requireLines(t *testing.T, what string, have []string, want ...string) {
	t.Helper()
	set := map[string]bool{}
	for _, l := range have {
		set[l] = true
	}
	var missing []string
	for _, w := range want {
		if !set[w] {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s lacks:\n  %s\nhave:\n  %s", what, strings.Join(missing, "\n  "), strings.Join(have, "\n  "))
	}
}

// requireNoLine fails if any dump line contains one of the fragments.
func requireNoLine(t *testing.T, what string, have []string, fragments ...string) {
	t.Helper()
	for _, l := range have {
		for _, f := range fragments {
			if f != "" && strings.Contains(l+" ", f) {
				t.Errorf("%s still has %q (matching %q)", what, l, f)
			}
		}
	}
}

// diff returns the lines only in a and only in b.
func diff(a, b []string) (onlyA, onlyB []string) {
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range s {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	for _, l := range a {
		if !mb[l] {
			onlyA = append(onlyA, l)
		}
	}
	for _, l := range b {
		if !ma[l] {
			onlyB = append(onlyB, l)
		}
	}
	return onlyA, onlyB
}

// requireSame fails when two dumps differ.
func requireSame(t *testing.T, what string, before, after []string) {
	t.Helper()
	gone, added := diff(before, after)
	if len(gone)+len(added) > 0 {
		t.Fatalf("%s changed\n--- gone:\n  %s\n--- added:\n  %s", what, strings.Join(gone, "\n  "), strings.Join(added, "\n  "))
	}
}

// udpEcho serves UDP echo on addr inside n until the test ends.
func udpEcho(t *testing.T, n ns.NetNS, addr netip.AddrPort) {
	t.Helper()
	var conn *net.UDPConn
	err := n.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		return err
	})
	if err != nil {
		t.Fatalf("listen UDP %s: %v", addr, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			k, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = conn.WriteToUDPAddrPort(buf[:k], from)
		}
	}()
	t.Cleanup(func() {
		_ = conn.Close()
		<-done
	})
}

// reach sends UDP from `from` inside n to an echo server at to and waits
// for the answer, retrying for a while (neighbour resolution).
func reach(t *testing.T, n ns.NetNS, from netip.Addr, to netip.AddrPort) {
	t.Helper()
	var conn *net.UDPConn
	err := n.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), net.UDPAddrFromAddrPort(to))
		return err
	})
	if err != nil {
		t.Fatalf("dial UDP %s -> %s: %v", from, to, err)
	}
	defer func() { _ = conn.Close() }()
	msg := []byte("ping " + from.String())
	buf := make([]byte, 1500)
	testwait.For(t, 10*time.Second, fmt.Sprintf("%s to reach %s", from, to), func() error {
		if _, err := conn.Write(msg); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		k, err := conn.Read(buf)
		if err != nil {
			return err
		}
		if string(buf[:k]) != string(msg) {
			return fmt.Errorf("answer %q", buf[:k])
		}
		return nil
	})
}

// setUp is one pod of a new node after Setup, with what its namespaces
// held before.
type setUp struct {
	n                     *node
	s                     *Spec
	pod                   *testnetns.NS
	ph                    *nlsafe.Handle
	res                   *current.Result
	nodeBefore, podBefore []string
}

// newSetUp runs Setup for the first pod of kind, with options o, on a new
// node.
func newSetUp(t *testing.T, kind Kind, o podOpts) *setUp {
	t.Helper()
	u := &setUp{n: newNode(t)}
	u.nodeBefore = dump(t, u.n.nl)
	u.s = u.n.spec(kind, 0, o)
	u.pod = newPod(t, u.s)
	u.ph = testnetns.Handle(t, u.pod.Path())
	u.podBefore = dump(t, u.ph)
	res, err := Setup(u.s)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	u.res = res
	return u
}

// again runs Setup once more and requires it to change nothing in either
// namespace, which held nodeDump and podDump.
func (u *setUp) again(t *testing.T, nodeDump, podDump []string) {
	t.Helper()
	setup(t, u.s)
	requireSame(t, "node after a second Setup", nodeDump, dump(t, u.n.nl))
	requireSame(t, "pod after a second Setup", podDump, dump(t, u.ph))
}

// requireVeth checks what Setup built for a veth kind (PolicyRoute,
// VPCRoute): the result, the pod's end of the veth, the lines wantNode on
// the node, the sysctls of the host veth and of hostDevs, Check passing,
// and a second Setup changing nothing. It returns the node's dump.
func (u *setUp) requireVeth(t *testing.T, wantNode []string, hostDevs ...string) []string {
	t.Helper()
	n, s, ph := u.n, u.s, u.ph
	hostVeth := n.link(t, n.nl, s.HostVeth)
	requireResult(t, u.res, s, hostVeth, n.link(t, ph, "eth0"), linkGatewayV4, linkGatewayV6)
	nodeDump, podDump := dump(t, n.nl), dump(t, ph)
	requireLines(t, "pod", podDump, wantVethPod(s, hostVeth.Attrs().HardwareAddr.String())...)
	requireLines(t, "node", nodeDump, wantNode...)
	requireHostSysctls(t, n, s, append([]string{s.HostVeth}, hostDevs...)...)
	requirePodSysctls(t, u.pod, s, "eth0")
	if err := Check(s); err != nil {
		t.Fatalf("Check after Setup: %v", err)
	}
	u.again(t, nodeDump, podDump)
	return nodeDump
}

// setUpThenLosePod runs Setup for the first pod of kind on n and removes
// the pod's namespace, as a runtime that lost it. No handle into it is
// opened: one would keep the namespace alive.
func setUpThenLosePod(t *testing.T, n *node, kind Kind, o podOpts) *Spec {
	t.Helper()
	s := n.spec(kind, 0, o)
	pod := newPod(t, s)
	setup(t, s)
	if err := pod.Remove(); err != nil {
		t.Fatalf("delete pod netns: %v", err)
	}
	return s
}

// teardownTwice tears each pod down twice: the second must find nothing
// to do and succeed.
func teardownTwice(t *testing.T, specs ...*Spec) {
	t.Helper()
	for _, s := range specs {
		for range 2 {
			if err := Teardown(s); err != nil {
				t.Fatalf("Teardown %s: %v", s.IPv4, err)
			}
		}
	}
}
