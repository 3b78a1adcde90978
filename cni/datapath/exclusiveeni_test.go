package datapath

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/terway-sim/terway/internal/testnetns"
)

// wantExclusivePod is the pod side of ExclusiveENI with host peer.
func wantExclusivePod(s *Spec, hostMAC string) []string {
	m := s.mtu()
	want := []string{
		fmt.Sprintf("link eth0 veth up mtu %d", m),
		fmt.Sprintf("addr eth0 %s/32", s.IPv4),
		fmt.Sprintf("route 254 default via %s dev eth0 onlink", eniGW4),
		fmt.Sprintf("link veth1 veth up mtu %d", m),
		fmt.Sprintf("addr veth1 %s/32", s.IPv4),
		"route 254 169.254.1.1/32 dev veth1 scope link",
		fmt.Sprintf("route 254 %s via 169.254.1.1 dev veth1 onlink", svcCIDR4),
		"neigh veth1 169.254.1.1 lladdr " + hostMAC + " permanent",
	}
	if s.IPv6.IsValid() {
		want = append(want,
			fmt.Sprintf("addr eth0 %s/128", s.IPv6),
			fmt.Sprintf("route 254 default via %s dev eth0 onlink", eniGW6),
			fmt.Sprintf("addr veth1 %s/128", s.IPv6),
			"route 254 fd00:96::/108 via fe80::1 dev veth1 onlink",
			"neigh veth1 fe80::1 lladdr "+hostMAC+" permanent")
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

func TestExclusiveENI(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			u := newSetUp(t, ExclusiveENI, v.o)
			n, s, pod, ph := u.n, u.s, u.pod, u.ph
			if s.ENIName != eniName {
				t.Errorf("Spec.ENIName = %q, want %q", s.ENIName, eniName)
			}
			if l := n.eni(t); l != nil {
				t.Fatalf("ENI still in node as %s", l.Attrs().Name)
			}
			hostVeth := n.link(t, n.nl, s.HostVeth)
			podENI := n.link(t, ph, "eth0")
			if podENI.Attrs().HardwareAddr.String() != n.eniMAC.String() || podENI.Attrs().Alias != ENIAliasPrefix+eniName {
				t.Errorf("pod eth0 has MAC %s alias %q, want the ENI's %s and alias %q",
					podENI.Attrs().HardwareAddr, podENI.Attrs().Alias, n.eniMAC, ENIAliasPrefix+eniName)
			}
			requireResult(t, u.res, s, hostVeth, podENI, eniGW4, eniGW6)
			nodeDump, podDump := dump(t, n.nl), dump(t, ph)
			requireLines(t, "pod", podDump, wantExclusivePod(s, hostVeth.Attrs().HardwareAddr.String())...)
			wantNode := []string{
				fmt.Sprintf("link %s veth up mtu %d", s.HostVeth, s.mtu()),
				fmt.Sprintf("addr %s 169.254.1.1/32", s.HostVeth),
				fmt.Sprintf("route 254 %s/32 dev %s scope link", s.IPv4, s.HostVeth),
			}
			if s.IPv6.IsValid() {
				wantNode = append(wantNode, fmt.Sprintf("route 254 %s/128 dev %s", s.IPv6, s.HostVeth))
			}
			requireLines(t, "node", nodeDump, wantNode...)
			requireHostSysctls(t, n, s, s.HostVeth)
			requirePodSysctls(t, pod, s, "eth0", "veth1")
			if err := Check(s); err != nil {
				t.Fatalf("Check after Setup: %v", err)
			}
			u.again(t, nodeDump, podDump)

			// Straight out of the ENI to the vSwitch gateway, and from the
			// node to the pod through the host peer.
			udpEcho(t, n.fabric, netip.AddrPortFrom(eniGW4, 7))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(eniGW4, 7))
			if s.IPv6.IsValid() {
				udpEcho(t, n.fabric, netip.AddrPortFrom(eniGW6, 7))
				reach(t, pod, s.IPv6, netip.AddrPortFrom(eniGW6, 7))
			}
			udpEcho(t, pod, netip.AddrPortFrom(s.IPv4, 9))
			reach(t, n.ns, linkGatewayV4, netip.AddrPortFrom(s.IPv4, 9))

			teardownTwice(t, s)
			// The ENI is back under its name, down, without addresses;
			// only its MTU stays the pod's.
			want := replaceLine(u.nodeBefore, fmt.Sprintf("link %s veth down mtu 1500", eniName),
				fmt.Sprintf("link %s veth down mtu %d", eniName, s.mtu()))
			requireSame(t, "node after Teardown", withoutIndex(want, eniName), withoutIndex(dump(t, n.nl), eniName))
			requireSame(t, "pod after Teardown", u.podBefore, dump(t, ph))
		})
	}
}

// replaceLine returns lines with old replaced by new.
func replaceLine(lines []string, old, new string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if l == old {
			l = new
		}
		out[i] = l
	}
	return out
}

// TestExclusiveENIRollback: Setup fails after the ENI moved in, because
// the pod has a foreign link named like the host peer (veth1), or like
// the pod interface itself (eth0: the kernel moves the ENI, then refuses
// the rename). Setup must return the ENI to the node, unchanged.
func TestExclusiveENIRollback(t *testing.T) {
	for _, foreign := range []string{"veth1", "eth0"} {
		t.Run(foreign, func(t *testing.T) {
			n := newNode(t)
			s := n.spec(ExclusiveENI, 0, podOpts{dual: true, ingressBPS: 1_000_000})
			pod := newPod(t, s)
			ph := testnetns.Handle(t, pod.Path())
			if err := ph.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: foreign}, PeerName: "other"}); err != nil {
				t.Fatalf("fixture %s: %v", foreign, err)
			}
			nodeBefore, podBefore := dump(t, n.nl), dump(t, ph)
			_, err := Setup(s)
			if err == nil || !strings.Contains(err.Error(), foreign) {
				t.Fatalf("Setup with a foreign %s in the pod: err %v, want one naming it", foreign, err)
			}
			requireSame(t, "node after failed Setup", withoutIndex(nodeBefore, eniName), withoutIndex(dump(t, n.nl), eniName))
			requireSame(t, "pod after failed Setup", podBefore, dump(t, ph))
		})
	}
}

// withoutIndex drops from a dump what a trip through a pod namespace
// changes in link name by the kernel's choice: its ifindex (a moved link
// gets a new one when its old one is taken in the target, as the ENI's is
// in a pod with more links) and its default qdisc (attached only when a
// link is first set up, and the ENI comes back down).
func withoutIndex(lines []string, name string) []string {
	var out []string
	for _, l := range lines {
		if l == "qdisc "+name+" noqueue none parent root" {
			continue
		}
		if strings.HasPrefix(l, "link "+name+" mac ") {
			l = l[:strings.LastIndex(l, " index ")]
		}
		out = append(out, l)
	}
	return out
}

// TestExclusiveENIWithoutHostPeer: DisableHostPeer leaves the node alone.
func TestExclusiveENIWithoutHostPeer(t *testing.T) {
	n := newNode(t)
	s := n.spec(ExclusiveENI, 0, podOpts{})
	s.DisableHostPeer = true
	s.HostVeth = ""
	pod := newPod(t, s)
	ph := testnetns.Handle(t, pod.Path())
	res, err := Setup(s)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	requireResult(t, res, s, nil, n.link(t, ph, "eth0"), eniGW4, eniGW6)
	requireNoLine(t, "pod", dump(t, ph), "veth1")
	requireNoLine(t, "node", dump(t, n.nl), "169.254.1.1", s.IPv4.String())
	if err := Check(s); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := Teardown(s); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	if l := n.eni(t); l == nil || l.Attrs().Name != eniName {
		t.Fatalf("ENI not back in node as %s: %v", eniName, l)
	}
}

// TestExclusiveENIPodNSGone: the pod's namespace is destroyed before
// Teardown. A physical ENI would return to the node by itself; the lab's
// veth stand-in is destroyed with the namespace instead (the lab's
// hypervisor re-plugs it). Teardown must still succeed and clean the
// node, and must not fail later when the ENI is found nowhere.
func TestExclusiveENIPodNSGone(t *testing.T) {
	n := newNode(t)
	nodeBefore := dump(t, n.nl)
	s := setUpThenLosePod(t, n, ExclusiveENI, podOpts{dual: true})
	teardownTwice(t, s)
	after := dump(t, n.nl)
	requireNoLine(t, "node after Teardown", after, s.HostVeth, " "+s.IPv4.String()+"/", ipFrag(s.IPv6), "169.254.1.1")
	// Everything else is as before, except the ENI stand-in, which may
	// still be dying with the namespace.
	gone, added := diff(nodeBefore, after)
	for _, l := range append(gone, added...) {
		if !strings.HasPrefix(l, "link "+eniName+" ") && !strings.HasPrefix(l, "qdisc "+eniName+" ") {
			t.Errorf("node after Teardown differs in %q", l)
		}
	}
}

// TestExclusiveENIReturnedByKernel: a physical ENI whose pod namespace was
// destroyed comes back to the node under whatever name is free (here
// "dev7"), up and with addresses; Teardown recognises it by MAC and alias
// and restores it: named as before, down, no addresses, no alias. Without
// Spec.ENIName the alias alone names it.
func TestExclusiveENIReturnedByKernel(t *testing.T) {
	for _, recorded := range []string{eniName, ""} {
		t.Run(fmt.Sprintf("ENIName=%q", recorded), func(t *testing.T) {
			n := newNode(t)
			eni := n.eni(t)
			if err := n.nl.LinkSetName(eni, "dev7"); err != nil {
				t.Fatalf("fixture rename: %v", err)
			}
			if err := n.nl.LinkSetAlias(eni, ENIAliasPrefix+eniName); err != nil {
				t.Fatalf("fixture alias: %v", err)
			}
			if err := n.nl.LinkSetUp(eni); err != nil {
				t.Fatalf("fixture up: %v", err)
			}
			n.addAddr(t, n.nl, eni, netip.MustParsePrefix("192.168.1.10/32"))
			s := n.spec(ExclusiveENI, 0, podOpts{})
			s.ENIName = recorded
			s.PodNetNS = "/proc/self/task/999999999/ns/net" // vanished
			if err := Teardown(s); err != nil {
				t.Fatalf("Teardown: %v", err)
			}
			d := dump(t, n.nl)
			requireLines(t, "node", d,
				fmt.Sprintf("link %s veth down mtu 1500", eniName),
				fmt.Sprintf("link %s mac %s alias \"\" index %d", eniName, n.eniMAC, eni.Attrs().Index))
			requireNoLine(t, "node", d, "addr "+eniName+" ", "dev7")
		})
	}
}
