package datapath

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
)

// tamper breaks one object of a working datapath; Check must then fail
// with exactly want, and Setup must repair it.
type tamper struct {
	name string
	do   func() error
	want string
}

// runTampers applies each tamper in turn on the datapath of s.
func runTampers(t *testing.T, s *Spec, cases []tamper) {
	t.Helper()
	if err := Check(s); err != nil {
		t.Fatalf("Check after Setup: %v", err)
	}
	for _, tc := range cases {
		if err := tc.do(); err != nil {
			t.Fatalf("%s: tamper: %v", tc.name, err)
		}
		err := Check(s)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: Check = %v, want %q", tc.name, err, tc.want)
		}
		if _, err := Setup(s); err != nil {
			t.Fatalf("%s: Setup to repair: %v", tc.name, err)
		}
		if err := Check(s); err != nil {
			t.Fatalf("%s: Check after repair: %v", tc.name, err)
		}
	}
}

// linkIn finds a link by name at tamper time (repairs may recreate it).
func linkIn(h *nlsafe.Handle, name string) (netlink.Link, error) {
	return h.LinkByName(name)
}

func delAddr(h *nlsafe.Handle, dev string, p netip.Prefix) func() error {
	return func() error {
		l, err := linkIn(h, dev)
		if err != nil {
			return err
		}
		return h.AddrDel(l, &netlink.Addr{IPNet: nlsafe.IPNet(p)})
	}
}

// delRoute deletes the route to dst in table (any gateway) on dev.
func delRoute(h *nlsafe.Handle, dev string, dst netip.Prefix, table int) func() error {
	return func() error {
		l, err := linkIn(h, dev)
		if err != nil {
			return err
		}
		fam := netlink.FAMILY_V4
		if dst.Addr().Is6() {
			fam = netlink.FAMILY_V6
		}
		routes, err := h.RouteListFiltered(fam, &netlink.Route{Table: table, LinkIndex: l.Attrs().Index},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if sameDst(r.Dst, nlsafe.IPNet(dst)) {
				return h.RouteDel(&r)
			}
		}
		return fmt.Errorf("no route %s on %s table %d", dst, dev, table)
	}
}

// delRule deletes the rules at prio for address a.
func delRule(h *nlsafe.Handle, prio int, a netip.Addr) func() error {
	return func() error {
		fam := netlink.FAMILY_V4
		if a.Is6() {
			fam = netlink.FAMILY_V6
		}
		rules, err := h.RuleList(fam)
		if err != nil {
			return err
		}
		host := netip.PrefixFrom(a, a.BitLen())
		for _, r := range rules {
			if r.Priority == prio && (nlsafe.Prefix(r.Src) == host || nlsafe.Prefix(r.Dst) == host) {
				return h.RuleDel(&r)
			}
		}
		return fmt.Errorf("no rule %d for %s", prio, a)
	}
}

func delNeigh(h *nlsafe.Handle, dev string, ip netip.Addr) func() error {
	return func() error {
		l, err := linkIn(h, dev)
		if err != nil {
			return err
		}
		fam := netlink.FAMILY_V4
		if ip.Is6() {
			fam = netlink.FAMILY_V6
		}
		return h.NeighDel(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: fam, IP: ip.AsSlice()})
	}
}

func setMTU(h *nlsafe.Handle, dev string, mtu int) func() error {
	return func() error {
		l, err := linkIn(h, dev)
		if err != nil {
			return err
		}
		return h.LinkSetMTU(l, mtu)
	}
}

func setDown(h *nlsafe.Handle, dev string) func() error {
	return func() error {
		l, err := linkIn(h, dev)
		if err != nil {
			return err
		}
		return h.LinkSetDown(l)
	}
}

// delQdisc deletes dev's qdisc of type kind.
func delQdisc(h *nlsafe.Handle, dev, kind string) func() error {
	return func() error {
		l, err := linkIn(h, dev)
		if err != nil {
			return err
		}
		qs, err := h.QdiscList(l)
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Type() == kind {
				return h.QdiscDel(q)
			}
		}
		return fmt.Errorf("no %s qdisc on %s", kind, dev)
	}
}

// setTbfRate replaces dev's root tbf by one at rate.
func setTbfRate(h *nlsafe.Handle, dev string, rate uint64) func() error {
	return func() error {
		l, err := linkIn(h, dev)
		if err != nil {
			return err
		}
		return h.QdiscReplace(tbfFor(l, rate, 1500))
	}
}

func writeSysctl(t *testing.T, n *testnetns.NS, key, val string) func() error {
	return func() error {
		setSysctls(t, n, map[string]string{key: val})
		return nil
	}
}

func TestCheckPolicyRoute(t *testing.T) {
	u := newSetUp(t, PolicyRoute, podOpts{dual: true, ingressBPS: 1_000_000, egressBPS: 500_000})
	n, s, pod, ph := u.n, u.s, u.pod, u.ph
	table := n.eniTable(t)
	hv, ip4, ip6 := s.HostVeth, s.IPv4, s.IPv6
	host4, host6 := netip.PrefixFrom(ip4, 32), netip.PrefixFrom(ip6, 128)
	runTampers(t, s, []tamper{
		{"pod address", delAddr(ph, "eth0", host4), fmt.Sprintf("address %s on eth0 in pod: missing", host4)},
		{"pod IPv6 address", delAddr(ph, "eth0", host6), fmt.Sprintf("address %s on eth0 in pod: missing", host6)},
		{"pod default route", delRoute(ph, "eth0", defaultRoute(family{}), unix.RT_TABLE_MAIN), "route default via 169.254.1.1 in pod: missing"},
		{"host route", delRoute(n.nl, hv, host4, unix.RT_TABLE_MAIN), fmt.Sprintf("route %s dev %s: missing", host4, hv)},
		{"host IPv6 route", delRoute(n.nl, hv, host6, unix.RT_TABLE_MAIN), fmt.Sprintf("route %s dev %s: missing", host6, hv)},
		{"rule 512", delRule(n.nl, ToPodPriority, ip4), fmt.Sprintf(`rule 512 "to %s lookup main": missing`, ip4)},
		{"rule 2048", delRule(n.nl, FromPodPriority, ip4), fmt.Sprintf(`rule 2048 "from %s iif %s lookup %d": missing`, ip4, hv, table)},
		{"IPv6 rule 512", delRule(n.nl, ToPodPriority, ip6), fmt.Sprintf(`rule 512 "to %s lookup main": missing`, ip6)},
		{"IPv6 rule 2048", delRule(n.nl, FromPodPriority, ip6), fmt.Sprintf(`rule 2048 "from %s iif %s lookup %d": missing`, ip6, hv, table)},
		{"ENI table route", delRoute(n.nl, eniName, defaultRoute(family{}), table), fmt.Sprintf("route default via %s table %d: missing", eniGW4, table)},
		{"ENI table IPv6 route", delRoute(n.nl, eniName, defaultRoute(family{v6: true}), table), fmt.Sprintf("route default via %s table %d: missing", eniGW6, table)},
		{"node IP on ENI", delAddr(n.nl, eniName, netip.PrefixFrom(nodeIP4, 32)), fmt.Sprintf("address %s/32 on %s in host: missing", nodeIP4, eniName)},
		{"neighbour", delNeigh(ph, "eth0", linkGatewayV4), "neighbour 169.254.1.1 on eth0: missing"},
		{"IPv6 neighbour", delNeigh(ph, "eth0", linkGatewayV6), "neighbour fe80::1 on eth0: missing"},
		{"pod MTU", setMTU(ph, "eth0", 1400), "link eth0 in pod: MTU 1400, want 1500"},
		{"ENI MTU", setMTU(n.nl, eniName, 1400), fmt.Sprintf("link %s in host: MTU 1400, want 1500", eniName)},
		{"pod link down", setDown(ph, "eth0"), "link eth0 in pod: down"},
		{"host veth down", setDown(n.nl, hv), fmt.Sprintf("link %s in host: down", hv)},
		{"ENI down", setDown(n.nl, eniName), fmt.Sprintf("link %s in host: down", eniName)},
		{"ingress qdisc", delQdisc(n.nl, hv, "tbf"), fmt.Sprintf("qdisc tbf on %s: missing", hv)},
		{"egress qdisc", delQdisc(ph, "eth0", "tbf"), "qdisc tbf on eth0: missing"},
		{"ingress rate", setTbfRate(n.nl, hv, 12345), fmt.Sprintf("qdisc tbf on %s: rate 12345 B/s, want 1000000", hv)},
		{"rp_filter", writeSysctl(t, n.ns, "net/ipv4/conf/"+hv+"/rp_filter", "1"), fmt.Sprintf("sysctl net.ipv4.conf.%s.rp_filter in host: 1, want 0", hv)},
		{"forwarding", writeSysctl(t, n.ns, "net/ipv4/conf/all/forwarding", "0"), "sysctl net.ipv4.conf.all.forwarding in host: 0, want 1"},
		{"IPv6 forwarding", writeSysctl(t, n.ns, "net/ipv6/conf/all/forwarding", "0"), "sysctl net.ipv6.conf.all.forwarding in host: 0, want 1"},
		{"pod IPv6 off", writeSysctl(t, pod, "net/ipv6/conf/eth0/disable_ipv6", "1"), "sysctl net.ipv6.conf.eth0.disable_ipv6 in pod: 1, want 0"},
		{"veth deleted", func() error {
			l, err := linkIn(n.nl, hv)
			if err != nil {
				return err
			}
			return n.nl.LinkDel(l)
		}, "link eth0 in pod: missing"},
	})
}

func TestCheckVPCRoute(t *testing.T) {
	u := newSetUp(t, VPCRoute, podOpts{ingressBPS: 1_000_000})
	n, s, ph := u.n, u.s, u.ph
	host4 := netip.PrefixFrom(s.IPv4, 32)
	runTampers(t, s, []tamper{
		{"host route", delRoute(n.nl, s.HostVeth, host4, unix.RT_TABLE_MAIN), fmt.Sprintf("route %s dev %s: missing", host4, s.HostVeth)},
		{"pod address", delAddr(ph, "eth0", host4), fmt.Sprintf("address %s on eth0 in pod: missing", host4)},
		{"neighbour", delNeigh(ph, "eth0", linkGatewayV4), "neighbour 169.254.1.1 on eth0: missing"},
		{"ingress qdisc", delQdisc(n.nl, s.HostVeth, "tbf"), fmt.Sprintf("qdisc tbf on %s: missing", s.HostVeth)},
	})
}

func TestCheckExclusiveENI(t *testing.T) {
	u := newSetUp(t, ExclusiveENI, podOpts{dual: true, ingressBPS: 1_000_000, egressBPS: 500_000})
	n, s, ph := u.n, u.s, u.ph
	hv := s.HostVeth
	host4 := netip.PrefixFrom(s.IPv4, 32)
	runTampers(t, s, []tamper{
		{"ENI down", setDown(ph, "eth0"), "link eth0 in pod: down"},
		{"ENI MTU", setMTU(ph, "eth0", 1400), "link eth0 in pod: MTU 1400, want 1500"},
		{"pod address", delAddr(ph, "eth0", host4), fmt.Sprintf("address %s on eth0 in pod: missing", host4)},
		{"default route", delRoute(ph, "eth0", defaultRoute(family{}), unix.RT_TABLE_MAIN), fmt.Sprintf("route default via %s in pod: missing", eniGW4)},
		{"IPv6 default route", delRoute(ph, "eth0", defaultRoute(family{v6: true}), unix.RT_TABLE_MAIN), fmt.Sprintf("route default via %s in pod: missing", eniGW6)},
		{"host peer down", setDown(ph, "veth1"), "link veth1 in pod: down"},
		{"host peer neighbour", delNeigh(ph, "veth1", linkGatewayV4), "neighbour 169.254.1.1 on veth1: missing"},
		{"service route", delRoute(ph, "veth1", svcCIDR4, unix.RT_TABLE_MAIN), fmt.Sprintf("route %s via 169.254.1.1 in pod: missing", svcCIDR4)},
		{"host peer address", delAddr(n.nl, hv, netip.MustParsePrefix("169.254.1.1/32")), fmt.Sprintf("address 169.254.1.1/32 on %s in host: missing", hv)},
		{"host route", delRoute(n.nl, hv, host4, unix.RT_TABLE_MAIN), fmt.Sprintf("route %s dev %s: missing", host4, hv)},
		{"egress qdisc", delQdisc(ph, "eth0", "tbf"), "qdisc tbf on eth0: missing"},
		{"ingress qdisc", delQdisc(ph, "ifbeth0", "tbf"), "qdisc tbf on ifbeth0: missing"},
		{"ingress redirect", delQdisc(ph, "eth0", "ingress"), "qdisc ingress on eth0: missing"},
		{"ifb down", setDown(ph, "ifbeth0"), "link ifbeth0 in pod: down"},
	})
}
