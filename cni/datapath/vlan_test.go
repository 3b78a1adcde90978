package datapath

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
)

// carryVLAN makes the fabric carry VLAN vid of the trunk port fabricPort:
// a sub-interface with the member vSwitch's gateways, as the VPC ends a
// member ENI's tagged traffic.
func carryVLAN(t *testing.T, fnl *nlsafe.Handle, fabricPort netlink.Link, vid int, gws ...netip.Prefix) {
	t.Helper()
	name := fmt.Sprintf("%s.%d", fabricPort.Attrs().Name, vid)
	err := fnl.LinkAdd(&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: fabricPort.Attrs().Index}, VlanId: vid})
	if err != nil {
		t.Fatalf("fabric VLAN %s: %v", name, err)
	}
	l, err := fnl.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, gw := range gws {
		if err := fnl.AddrAdd(l, &netlink.Addr{IPNet: nlsafe.IPNet(gw)}); err != nil {
			t.Fatalf("fabric VLAN address %s: %v", gw, err)
		}
	}
	if err := fnl.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
}

// wantVLANPod is the pod side of VLAN with host peer.
func wantVLANPod(s *Spec, hostMAC string) []string {
	m := s.mtu()
	want := []string{
		fmt.Sprintf("link eth0 vlan up mtu %d", m),
		fmt.Sprintf("addr eth0 %s/24", s.IPv4),
		fmt.Sprintf("route 254 default via %s dev eth0 onlink", memberGW4),
		fmt.Sprintf("link veth1 veth up mtu %d", m),
		fmt.Sprintf("addr veth1 %s/32", s.IPv4),
		fmt.Sprintf("route 254 %s via 169.254.1.1 dev veth1 onlink", svcCIDR4),
		"neigh veth1 169.254.1.1 lladdr " + hostMAC + " permanent",
	}
	if s.IPv6.IsValid() {
		want = append(want,
			fmt.Sprintf("addr eth0 %s/64", s.IPv6),
			fmt.Sprintf("route 254 default via %s dev eth0 onlink", memberGW6),
			fmt.Sprintf("route 254 %s via fe80::1 dev veth1 onlink", svcCIDR6))
	}
	if s.EgressBPS > 0 {
		want = append(want, fmt.Sprintf("qdisc eth0 tbf 1:0 parent root rate %d", s.EgressBPS))
	}
	if s.IngressBPS > 0 {
		want = append(want, fmt.Sprintf("qdisc ifbeth0 tbf 1:0 parent root rate %d", s.IngressBPS), "qdisc eth0 ingress ffff:0 parent ingress")
	}
	return want
}

// newTrunkNode is a second node on n's fabric: its trunk eth1 (MAC mac)
// plugged into the fabric as port fabricPort, untagged traffic unused.
func newTrunkNode(t *testing.T, n *node, fabricPort string, mac net.HardwareAddr) (*testnetns.NS, *nlsafe.Handle) {
	t.Helper()
	ns2 := nsWithoutDAD(t)
	h2 := testnetns.Handle(t, ns2.Path())
	err := h2.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: eniName, HardwareAddr: mac},
		PeerName: fabricPort, PeerNamespace: netlink.NsFd(int(n.fabric.Fd()))})
	if err != nil {
		t.Fatalf("second node's trunk: %v", err)
	}
	if err := n.fnl.LinkSetUp(n.link(t, n.fnl, fabricPort)); err != nil {
		t.Fatal(err)
	}
	return ns2, h2
}

func TestVLAN(t *testing.T) {
	needLinkKind(t, "vlan")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			n := newNode(t)
			carryVLAN(t, n.fnl, n.fabricENI, memberVID, netip.PrefixFrom(memberGW4, 24), netip.PrefixFrom(memberGW6, 64))
			nodeBefore := dump(t, n.nl)
			s := n.spec(VLAN, 0, v.o)
			pod := newPod(t, s)
			ph := testnetns.Handle(t, pod.Path())
			podBefore := dump(t, ph)
			res, err := Setup(s)
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			hostVeth, sub := n.link(t, n.nl, s.HostVeth), n.link(t, ph, "eth0")
			if vl, ok := sub.(*netlink.Vlan); !ok || vl.VlanId != memberVID || sub.Attrs().HardwareAddr.String() != n.eniMAC.String() {
				t.Fatalf("pod eth0 is %s %+v, want VLAN %d with the trunk's MAC", sub.Type(), sub.Attrs(), memberVID)
			}
			requireResult(t, res, s, hostVeth, sub, memberGW4, memberGW6)
			nodeDump, podDump := dump(t, n.nl), dump(t, ph)
			requireLines(t, "pod", podDump, wantVLANPod(s, hostVeth.Attrs().HardwareAddr.String())...)
			requireLines(t, "node", nodeDump,
				fmt.Sprintf("link %s veth up mtu %d", eniName, s.mtu()),
				fmt.Sprintf("addr %s 169.254.1.1/32", s.HostVeth),
				fmt.Sprintf("route 254 %s/32 dev %s scope link", s.IPv4, s.HostVeth))
			requirePodSysctls(t, pod, s, "eth0", "veth1")
			if err := Check(s); err != nil {
				t.Fatalf("Check after Setup: %v", err)
			}
			setup(t, s)
			requireSame(t, "node after a second Setup", nodeDump, dump(t, n.nl))
			requireSame(t, "pod after a second Setup", podDump, dump(t, ph))

			// Tagged to the member vSwitch's gateway, which only the
			// fabric's VLAN sub-interface holds.
			udpEcho(t, n.fabric, netip.AddrPortFrom(memberGW4, 7))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(memberGW4, 7))
			if s.IPv6.IsValid() {
				udpEcho(t, n.fabric, netip.AddrPortFrom(memberGW6, 7))
				reach(t, pod, s.IPv6, netip.AddrPortFrom(memberGW6, 7))
			}
			// Services through the host peer.
			svc4 := addN(svcCIDR4.Addr(), 10)
			n.addAddr(t, n.nl, n.link(t, n.nl, "lo"), netip.PrefixFrom(svc4, 32))
			udpEcho(t, n.ns, netip.AddrPortFrom(svc4, 53))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(svc4, 53))

			// A pod on another node's trunk, VLAN 200 in vSwitch
			// 192.168.6.0/24: the fabric routes between the two VLANs.
			mac2 := randomMAC(t)
			ns2, h2 := newTrunkNode(t, n, "e2", mac2)
			carryVLAN(t, n.fnl, n.link(t, n.fnl, "e2"), 200, netip.MustParsePrefix("192.168.6.253/24"))
			s2 := &Spec{Kind: VLAN, HostNetNS: ns2.Path(), IfName: "eth0", HostVeth: VethName(linkPrefix, "default", "remote", "eth0"),
				IPv4: netip.MustParseAddr("192.168.6.10"), CIDRv4: netip.MustParsePrefix("192.168.6.0/24"),
				Gatewayv4: netip.MustParseAddr("192.168.6.253"), ENIMAC: mac2.String(), VLANID: 200}
			pod2 := newPod(t, s2)
			setup(t, s2)
			udpEcho(t, pod2, netip.AddrPortFrom(s2.IPv4, 9))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(s2.IPv4, 9))
			udpEcho(t, pod, netip.AddrPortFrom(s.IPv4, 9))
			reach(t, pod2, s2.IPv4, netip.AddrPortFrom(s.IPv4, 9))

			teardownTwice(t, s, s2)
			requireSame(t, "pod after Teardown", podBefore, dump(t, ph))
			gone, added := diff(nodeBefore, dump(t, n.nl))
			for _, l := range append(gone, added...) {
				if !strings.Contains(l+" ", " "+eniName+" ") && !strings.HasPrefix(l, "addr lo ") {
					t.Errorf("node after Teardown differs in %q, which is not trunk state", l)
				}
			}
			requireNoLine(t, "second node after Teardown", dump(t, h2), s2.HostVeth, ipFrag(s2.IPv4))
			if err := Check(s); err == nil {
				t.Error("Check passes after Teardown")
			}
		})
	}
}

func TestCheckVLAN(t *testing.T) {
	needLinkKind(t, "vlan")
	n := newNode(t)
	s := n.spec(VLAN, 0, podOpts{dual: true, ingressBPS: 1_000_000, egressBPS: 500_000})
	pod := newPod(t, s)
	ph := testnetns.Handle(t, pod.Path())
	setup(t, s)
	onLink4 := netip.PrefixFrom(s.IPv4, 24)
	runTampers(t, s, []tamper{
		{"pod address", delAddr(ph, "eth0", onLink4), fmt.Sprintf("address %s on eth0 in pod: missing", onLink4)},
		{"default route", delRoute(ph, "eth0", defaultRoute(family{}), unix.RT_TABLE_MAIN), fmt.Sprintf("route default via %s in pod: missing", memberGW4)},
		{"sub-interface down", setDown(ph, "eth0"), "link eth0 in pod: down"},
		{"trunk down", setDown(n.nl, eniName), fmt.Sprintf("link %s in host: down", eniName)},
		{"host peer route", delRoute(ph, "veth1", svcCIDR4, unix.RT_TABLE_MAIN), fmt.Sprintf("route %s via 169.254.1.1 in pod: missing", svcCIDR4)},
		{"egress qdisc", delQdisc(ph, "eth0", "tbf"), "qdisc tbf on eth0: missing"},
		{"sub-interface deleted", func() error { return ph.LinkDel(n.link(t, ph, "eth0")) },
			fmt.Sprintf("link eth0 in pod: missing or not VLAN %d of trunk %s", memberVID, eniName)},
	})
}

// A VLAN sub-interface of another ID in the pod is not the pod's.
func TestVLANRefusesAnotherID(t *testing.T) {
	needLinkKind(t, "vlan")
	n := newNode(t)
	s := n.spec(VLAN, 0, podOpts{})
	pod := newPod(t, s)
	setup(t, s)
	s.VLANID = memberVID + 1
	if _, err := Setup(s); err == nil || !strings.Contains(err.Error(), "not VLAN 101") {
		t.Errorf("Setup over VLAN %d with ID %d: %v, want a refusal naming VLAN 101", memberVID, s.VLANID, err)
	}
	s.VLANID = memberVID
	teardownTwice(t, s)
	requireNoLine(t, "pod after Teardown", dump(t, testnetns.Handle(t, pod.Path())), "link eth0 ")
}
