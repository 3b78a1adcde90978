package datapath

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestVPCRoute(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			u := newSetUp(t, VPCRoute, v.o)
			n, s, pod, ph := u.n, u.s, u.pod, u.ph
			nodeDump := u.requireVeth(t, wantVethHost(s))
			requireNoLine(t, "node", nodeDump, "rule 512 ", "rule 2048 ", fmt.Sprintf("link %s veth up", eniName))

			// Two pods of the node's podCIDR reach each other through it.
			s2 := n.spec(VPCRoute, 1, v.o)
			pod2 := newPod(t, s2)
			setup(t, s2)
			udpEcho(t, pod2, netip.AddrPortFrom(s2.IPv4, 9))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(s2.IPv4, 9))
			if s.IPv6.IsValid() {
				udpEcho(t, pod2, netip.AddrPortFrom(s2.IPv6, 9))
				reach(t, pod, s.IPv6, netip.AddrPortFrom(s2.IPv6, 9))
			}

			teardownTwice(t, s, s2)
			// VPCRoute shares nothing: the node is as before.
			requireSame(t, "node after Teardown", u.nodeBefore, dump(t, n.nl))
			requireSame(t, "pod after Teardown", u.podBefore, dump(t, ph))
		})
	}
}
