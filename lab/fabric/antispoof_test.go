package fabric

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
)

// nodeA2 is a second instance on vSwitch 1, beside node1.
const nodeA2 = "i-bp1lab00000000000a2"

func withSecondNodeOnVSwitch1(s *fakecloud.Spec) {
	s.Instances = append(s.Instances, fakecloud.InstanceSpec{ID: nodeA2, Name: "node-a2", InstanceType: "ecs.g7.xlarge",
		VSwitchID: vsw1, SecurityGroupIDs: []string{sg}})
}

// freeAddr returns an address of prefix p (from the top, below the
// reserved ones) that no ENI holds.
func (l *lab) freeAddr(p netip.Prefix, skip int) netip.Addr {
	l.t.Helper()
	held := map[netip.Addr]bool{}
	for _, e := range l.cloud.ENIs() {
		held[e.PrimaryIP] = true
		for _, a := range append(slices.Clone(e.IPv4), e.IPv6...) {
			held[a] = true
		}
	}
	a := lastAddr(p)
	for i := 0; i < 3+skip; i++ { // the last three are reserved
		a = a.Prev()
	}
	for held[a] {
		a = a.Prev()
	}
	return a
}

// IPv4 anti-spoofing: a secondary address assigned to node1's primary ENI
// passes to a node on the same vSwitch (bridged, hook forward) and on
// another (routed, hook input), with the source intact; an unassigned
// source is dropped both ways, and so is the secondary once unassigned.
func TestAntiSpoofIPv4(t *testing.T) {
	t.Parallel()
	l := newLab(t, withSecondNodeOnVSwitch1)
	ctx := testCtx(t)
	a, a2, b := l.node(node1), l.node(nodeA2), l.node(node2)
	pe := l.primaryENI(node1)
	got, err := l.api.AssignIPv4(ctx, "assign-"+randomName(t), pe.ID, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("AssignIPv4: %v %v", got, err)
	}
	l.settle()
	sec := got[0]
	spoof := l.freeAddr(pe.CIDR, 0)
	addAddr(t, a, "eth0", hostPrefix(sec))
	addAddr(t, a, "eth0", hostPrefix(spoof))
	sa2 := listen(t, a2, "tcp4", ":8080")
	sb := listen(t, b, "tcp4", ":8080")
	toA2 := netip.AddrPortFrom(a2.PrimaryIP(), 8080)
	toB := netip.AddrPortFrom(b.PrimaryIP(), 8080)

	mustReach(t, a, a.PrimaryIP(), sa2, toA2)
	mustReach(t, a, sec, sa2, toA2)
	mustReach(t, a, sec, sb, toB)
	port := portName(t, l.f, pe.ID)
	mustBeSpoofDropped(t, l.f, port, a, spoof, toA2)
	mustBeSpoofDropped(t, l.f, port, a, spoof, toB)
	if sa2.sawPeer(spoof) || sb.sawPeer(spoof) {
		t.Fatal("a spoofed connection was accepted")
	}

	if err := l.api.UnassignIPv4(ctx, pe.ID, []netip.Addr{sec}); err != nil {
		t.Fatalf("UnassignIPv4: %v", err)
	}
	l.settle()
	mustBeSpoofDropped(t, l.f, port, a, sec, toA2)
	mustBeSpoofDropped(t, l.f, port, a, sec, toB)
	mustReach(t, a, a.PrimaryIP(), sb, toB)
}

// mustBeSpoofDropped is mustNotReach that also requires the port's
// anti-spoofing counter to rise: the drop was anti-spoofing's, not an
// accident. (Counters restart whenever the table is rebuilt, so they are
// read right before.)
func mustBeSpoofDropped(t *testing.T, f *Fabric, port string, n *Node, src netip.Addr, dst netip.AddrPort) {
	t.Helper()
	before := spoofDrops(t, f, port)
	mustNotReach(t, n, src, dst)
	if now := spoofDrops(t, f, port); now <= before {
		t.Fatalf("anti-spoofing counter of %s did not rise (%d → %d)", port, before, now)
	}
}

// setupIPv6 gives a node an IPv6 address on eth0 and a route to the VPC's
// IPv6 CIDR via the vSwitch's IPv6 gateway.
func setupIPv6(t *testing.T, n *Node, addr, gw netip.Addr) {
	t.Helper()
	addAddr(t, n, "eth0", hostPrefix(addr))
	h := testnetns.Handle(t, n.NetNSPath())
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	vpc6 := netip.MustParsePrefix("fd00:192:168::/56")
	for _, r := range []*netlink.Route{
		{LinkIndex: eth0.Attrs().Index, Dst: nlsafe.IPNet(hostPrefix(gw)), Scope: netlink.SCOPE_LINK},
		{LinkIndex: eth0.Attrs().Index, Dst: nlsafe.IPNet(vpc6), Gw: gw.AsSlice()},
	} {
		if err := h.RouteAdd(r); err != nil {
			t.Fatalf("%s: route %s: %v", n.InstanceID(), r.Dst, err)
		}
	}
}

// IPv6 anti-spoofing: an assigned IPv6 address passes between vSwitches,
// an unassigned one is dropped.
func TestAntiSpoofIPv6(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	ctx := testCtx(t)
	a, b := l.node(node1), l.node(node2)
	pa, pb := l.primaryENI(node1), l.primaryENI(node2)
	var v6 [2]netip.Addr
	for i, e := range []fakecloud.ENIView{pa, pb} {
		got, err := l.api.AssignIPv6(ctx, "assign6-"+randomName(t), e.ID, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("AssignIPv6 on %s: %v %v", e.ID, got, err)
		}
		v6[i] = got[0]
	}
	l.settle()
	spoof := l.freeAddr(pa.IPv6CIDR, 10)
	setupIPv6(t, a, v6[0], pa.IPv6Gateway)
	addAddr(t, a, "eth0", hostPrefix(spoof))
	setupIPv6(t, b, v6[1], pb.IPv6Gateway)
	sb := listen(t, b, "tcp6", "[::]:8082")
	toB := netip.AddrPortFrom(v6[1], 8082)

	mustReach(t, a, v6[0], sb, toB)
	mustBeSpoofDropped(t, l.f, portName(t, l.f, pa.ID), a, spoof, toB)
	if sb.sawPeer(spoof) {
		t.Fatal("a spoofed IPv6 connection was accepted")
	}
	els := nftElements(t, l.f, portName(t, l.f, pa.ID)+"_v6")
	if !setHas(els, v6[0]) || !setHas(els, netip.MustParseAddr("fe80::1")) || setHas(els, spoof) {
		t.Fatalf("IPv6 set of node1's eth0: %v", els)
	}
}

// Routed traffic to a secondary address of a secondary ENI reaches that
// ENI (a permanent neighbour, no ARP), and the ENI may answer from it;
// node1 wires eth<N> as a CNI would (policy routing).
func TestSecondaryENIRouting(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	a, b := l.node(node1), l.node(node2)
	e := l.attachENI(node1, vsw1, 1, 0)
	pod := e.IPv4[0]
	h := testnetns.Handle(t, a.NetNSPath())
	wireENI(t, a, e.eth, pod, e.view.Gateway)
	before := rxPackets(t, h, e.eth)

	sa := listen(t, a, "tcp4", ":8081")
	sb := listen(t, b, "tcp4", ":8081")
	mustReach(t, b, b.PrimaryIP(), sa, netip.AddrPortFrom(pod, 8081))
	mustReach(t, a, pod, sb, netip.AddrPortFrom(b.PrimaryIP(), 8081))
	if after := rxPackets(t, h, e.eth); after <= before {
		t.Fatalf("%s received nothing (%d → %d): traffic to %s went elsewhere", e.eth, before, after, pod)
	}
	// The reply leaving through eth0 instead would be dropped: eth0's
	// port may not send from the ENI's address.
	if els := nftElements(t, l.f, portName(t, l.f, l.primaryENI(node1).ID)+"_v4"); setHas(els, pod) {
		t.Fatalf("primary ENI's set holds the secondary ENI's address %s", pod)
	}
}

// wireENI uses a secondary ENI as a CNI would: up, the address on it, and
// traffic from the address leaves through it (policy routing).
func wireENI(t *testing.T, n *Node, eth string, addr, gw netip.Addr) {
	t.Helper()
	h := testnetns.Handle(t, n.NetNSPath())
	link, err := h.LinkByName(eth)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	addAddr(t, n, eth, hostPrefix(addr))
	const table = 1001
	if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: nlsafe.IPNet(netip.MustParsePrefix("0.0.0.0/0")),
		Gw: gw.AsSlice(), Table: table, Flags: int(netlink.FLAG_ONLINK)}); err != nil {
		t.Fatalf("ENI table route: %v", err)
	}
	rule := netlink.NewRule()
	rule.Src, rule.Table, rule.Priority = nlsafe.IPNet(hostPrefix(addr)), table, 2048
	if err := h.RuleAdd(rule); err != nil {
		t.Fatalf("rule from %s: %v", addr, err)
	}
}

func rxPackets(t *testing.T, h *nlsafe.Handle, name string) uint64 {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Statistics.RxPackets
}

// VPC mode: a route entry 172.20.1.0/24 → node1 makes an address inside
// node1 reachable from node2 and lets node1 send from it; without the
// entry both are dropped, and deleting it removes the fabric route.
func TestVPCRouteEntry(t *testing.T) {
	// Not parallel: constructs Aliyun SDK clients.
	l := newLab(t)
	a, b := l.node(node1), l.node(node2)
	podAddr := netip.MustParseAddr("172.20.1.5")
	addAddr(t, a, "lo", hostPrefix(podAddr))
	sa := listen(t, a, "tcp4", ":8083")
	sb := listen(t, b, "tcp4", ":8083")
	toPod := netip.AddrPortFrom(podAddr, 8083)
	toB := netip.AddrPortFrom(b.PrimaryIP(), 8083)
	dst := netip.MustParsePrefix("172.20.1.0/24")

	port := portName(t, l.f, l.primaryENI(node1).ID)
	mustNotReach(t, b, netip.Addr{}, toPod)
	mustBeSpoofDropped(t, l.f, port, a, podAddr, toB)

	c := &vpc.Client{}
	initClientIn(t, &c.Client, a, l.f)
	req := vpc.CreateCreateRouteEntryRequest()
	req.RouteTableId, req.DestinationCidrBlock = fakecloud.DefaultRouteTableID, dst.String()
	req.NextHopType, req.NextHopId = "Instance", node1
	resp, err := c.CreateRouteEntry(req)
	if err != nil {
		t.Fatalf("CreateRouteEntry: %v", err)
	}
	fab := testnetns.Handle(t, l.f.NetNSPath())
	testwait.For(t, settleWithin, "fabric route for the entry", func() error { return fabricRoute(fab, dst, a.PrimaryIP(), true) })
	mustReach(t, b, b.PrimaryIP(), sa, toPod)
	mustReach(t, a, podAddr, sb, toB)

	del := vpc.CreateDeleteRouteEntryRequest()
	del.RouteEntryId, del.RouteTableId = resp.RouteEntryId, fakecloud.DefaultRouteTableID
	if _, err := c.DeleteRouteEntry(del); err != nil {
		t.Fatalf("DeleteRouteEntry: %v", err)
	}
	testwait.For(t, settleWithin, "fabric route removed", func() error { return fabricRoute(fab, dst, a.PrimaryIP(), false) })
	mustNotReach(t, b, netip.Addr{}, toPod)
	mustBeSpoofDropped(t, l.f, port, a, podAddr, toB)
}

// fabricRoute checks whether the fabric routes dst via gw.
func fabricRoute(h *nlsafe.Handle, dst netip.Prefix, gw netip.Addr, want bool) error {
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: nlsafe.IPNet(dst)}, netlink.RT_FILTER_DST)
	if err != nil {
		return err
	}
	found := false
	for _, r := range routes {
		if r.Gw.String() == gw.String() && r.Protocol == unix.RTPROT_STATIC {
			found = true
		}
	}
	if found != want {
		return fmt.Errorf("route %s via %s present=%v, want %v (routes %v)", dst, gw, found, want, routes)
	}
	return nil
}
