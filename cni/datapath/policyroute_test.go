package datapath

import (
	"fmt"

	"net/netip"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/vishvananda/netlink"

	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
)

// Variants every datapath is tested in: IPv4 only, and dual stack with a
// non-default MTU and bandwidth limits.
var variants = []struct {
	name string
	o    podOpts
}{
	{"ipv4", podOpts{}},
	{"dual", podOpts{dual: true, mtu: 1450, ingressBPS: 1_000_000, egressBPS: 500_000}},
}

// wantVethPod is the pod side of a veth datapath for s.
func wantVethPod(s *Spec, hostMAC string) []string {
	want := []string{
		fmt.Sprintf("link eth0 veth up mtu %d", s.mtu()),
		fmt.Sprintf("addr eth0 %s/32", s.IPv4),
		"route 254 default via 169.254.1.1 dev eth0 onlink",
		"neigh eth0 169.254.1.1 lladdr " + hostMAC + " permanent",
	}
	if s.IPv6.IsValid() {
		want = append(want,
			fmt.Sprintf("addr eth0 %s/128", s.IPv6),
			"route 254 default via fe80::1 dev eth0 onlink",
			"neigh eth0 fe80::1 lladdr "+hostMAC+" permanent")
	}
	if s.EgressBPS > 0 {
		want = append(want, fmt.Sprintf("qdisc eth0 tbf 1:0 parent root rate %d", s.EgressBPS))
	}
	return want
}

// wantVethHost is the node side of a veth datapath for s, without ENI.
func wantVethHost(s *Spec) []string {
	want := []string{
		fmt.Sprintf("link %s veth up mtu %d", s.HostVeth, s.mtu()),
		fmt.Sprintf("route 254 %s/32 dev %s scope link", s.IPv4, s.HostVeth),
	}
	if s.IPv6.IsValid() {
		want = append(want, fmt.Sprintf("route 254 %s/128 dev %s", s.IPv6, s.HostVeth))
	}
	if s.IngressBPS > 0 {
		want = append(want, fmt.Sprintf("qdisc %s tbf 1:0 parent root rate %d", s.HostVeth, s.IngressBPS))
	}
	return want
}

// wantPolicyRouteHost adds the ENI and the rules.
func wantPolicyRouteHost(s *Spec, table int) []string {
	want := append(wantVethHost(s),
		fmt.Sprintf("link %s veth up mtu %d", eniName, s.mtu()),
		fmt.Sprintf("addr %s %s/32", eniName, nodeIP4),
		fmt.Sprintf("route %d default via %s dev %s onlink", table, eniGW4, eniName),
		fmt.Sprintf("rule 512 from all to %s/32 iif  lookup 254", s.IPv4),
		fmt.Sprintf("rule 2048 from %s/32 to all iif %s lookup %d", s.IPv4, s.HostVeth, table))
	if s.IPv6.IsValid() {
		want = append(want,
			fmt.Sprintf("addr %s %s/128", eniName, nodeIP6),
			fmt.Sprintf("route %d default via %s dev %s onlink", table, eniGW6, eniName),
			fmt.Sprintf("rule 512 from all to %s/128 iif  lookup 254", s.IPv6),
			fmt.Sprintf("rule 2048 from %s/128 to all iif %s lookup %d", s.IPv6, s.HostVeth, table))
	}
	return want
}

// requireHostSysctls checks the node sysctls Setup owes for links devs.
func requireHostSysctls(t *testing.T, n *node, s *Spec, devs ...string) {
	t.Helper()
	want := map[string]string{}
	for _, d := range append([]string{"all", "default"}, devs...) {
		want["net/ipv4/conf/"+d+"/forwarding"] = "1"
		want["net/ipv4/conf/"+d+"/rp_filter"] = "0"
		if s.IPv6.IsValid() {
			want["net/ipv6/conf/"+d+"/forwarding"] = "1"
		}
	}
	for k, v := range want {
		if got := readSysctl(t, n.ns, k); got != v {
			t.Errorf("node sysctl %s = %s, want %s", k, got, v)
		}
	}
}

// requirePodSysctls checks the pod's IPv6 switches for devs.
func requirePodSysctls(t *testing.T, pod *testnetns.NS, s *Spec, devs ...string) {
	t.Helper()
	if !s.IPv6.IsValid() {
		return
	}
	for _, d := range devs {
		if got := readSysctl(t, pod, "net/ipv6/conf/"+d+"/disable_ipv6"); got != "0" {
			t.Errorf("pod sysctl disable_ipv6 of %s = %s, want 0", d, got)
		}
		if got := readSysctl(t, pod, "net/ipv6/conf/"+d+"/accept_ra"); got != "0" {
			t.Errorf("pod sysctl accept_ra of %s = %s, want 0", d, got)
		}
	}
}

// requireResult checks the CNI result: the interfaces (host end first if
// any, then the pod's in its sandbox), an IP per family on the pod
// interface with its gateway, and the default routes.
func requireResult(t *testing.T, res *current.Result, s *Spec, host, pod netlink.Link, gw4, gw6 netip.Addr) {
	t.Helper()
	var ifs []string
	for _, i := range res.Interfaces {
		ifs = append(ifs, fmt.Sprintf("%s %s %q", i.Name, i.Mac, i.Sandbox))
	}
	podIndex := 0
	var want []string
	if host != nil {
		want = append(want, fmt.Sprintf("%s %s %q", host.Attrs().Name, host.Attrs().HardwareAddr, ""))
		podIndex = 1
	}
	want = append(want, fmt.Sprintf("%s %s %q", pod.Attrs().Name, pod.Attrs().HardwareAddr, s.PodNetNS))
	if len(ifs) < len(want) || strings.Join(ifs[:len(want)], "; ") != strings.Join(want, "; ") {
		t.Errorf("result interfaces %q, want %q first", ifs, want)
	}
	var ips, routes []string
	for _, ip := range res.IPs {
		ips = append(ips, fmt.Sprintf("%d %s %s", *ip.Interface, ip.Address.String(), ip.Gateway))
	}
	for _, r := range res.Routes {
		routes = append(routes, fmt.Sprintf("%s %s", r.Dst.String(), r.GW))
	}
	wantIPs := []string{fmt.Sprintf("%d %s %s", podIndex, s.podPrefix(s.families()[0]), gw4)}
	wantRoutes := []string{"0.0.0.0/0 " + gw4.String()}
	if s.IPv6.IsValid() {
		wantIPs = append(wantIPs, fmt.Sprintf("%d %s %s", podIndex, s.podPrefix(s.families()[1]), gw6))
		wantRoutes = append(wantRoutes, "::/0 "+gw6.String())
	}
	if strings.Join(ips, "; ") != strings.Join(wantIPs, "; ") {
		t.Errorf("result IPs %q, want %q", ips, wantIPs)
	}
	if strings.Join(routes, "; ") != strings.Join(wantRoutes, "; ") {
		t.Errorf("result routes %q, want %q", routes, wantRoutes)
	}
}

func TestPolicyRoute(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			u := newSetUp(t, PolicyRoute, v.o)
			n, s, pod, ph := u.n, u.s, u.pod, u.ph
			table := n.eniTable(t)
			u.requireVeth(t, wantPolicyRouteHost(s, table), eniName)

			// Through the node and its ENI to the vSwitch gateway.
			n.routePod(t, s.IPv4, s.IPv6)
			udpEcho(t, n.fabric, netip.AddrPortFrom(eniGW4, 7))
			reach(t, pod, s.IPv4, netip.AddrPortFrom(eniGW4, 7))
			if s.IPv6.IsValid() {
				udpEcho(t, n.fabric, netip.AddrPortFrom(eniGW6, 7))
				reach(t, pod, s.IPv6, netip.AddrPortFrom(eniGW6, 7))
			}

			// A second pod on the same ENI: the pods reach each other on
			// the node (rule 512), and both still reach the gateway.
			s2 := n.spec(PolicyRoute, 1, v.o)
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
			// Only the shared ENI state (all on the ENI) may differ.
			for _, l := range append(gone, added...) {
				if !strings.Contains(l+" ", " "+eniName+" ") && !strings.HasPrefix(l, fmt.Sprintf("route %d ", table)) {
					t.Errorf("node after Teardown differs in %q, which is not ENI state", l)
				}
			}
			requireNoLine(t, "node after Teardown", nodeAfter, s.HostVeth, s2.HostVeth,
				" "+s.IPv4.String()+"/", " "+s2.IPv4.String()+"/", ipFrag(s.IPv6), ipFrag(s2.IPv6))
			if err := Check(s); err == nil {
				t.Error("Check passes after Teardown")
			}
		})
	}
}

// ipFrag is a dump fragment naming an address, or "" for none.
func ipFrag(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return " " + a.String() + "/"
}

// TestPolicyRouteMissingENIRollsBack: the ENI is looked up after the veth
// exists, so a wrong MAC fails midway and Setup must remove the veth.
func TestPolicyRouteMissingENIRollsBack(t *testing.T) {
	n := newNode(t)
	s := n.spec(PolicyRoute, 0, podOpts{dual: true})
	s.ENIMAC = "02:00:00:00:00:99"
	pod := newPod(t, s)
	ph := testnetns.Handle(t, pod.Path())
	nodeBefore, podBefore := dump(t, n.nl), dump(t, ph)
	_, err := Setup(s)
	if err == nil || !strings.Contains(err.Error(), "02:00:00:00:00:99") {
		t.Fatalf("Setup with an unknown ENI MAC: err %v, want one naming the MAC", err)
	}
	requireSame(t, "node after failed Setup", nodeBefore, dump(t, n.nl))
	requireSame(t, "pod after failed Setup", podBefore, dump(t, ph))
}

// TestPolicyRouteReplacesStaleRule: a rule 2048 for the pod address
// pointing at another table (the address moved ENIs) is replaced.
func TestPolicyRouteReplacesStaleRule(t *testing.T) {
	n := newNode(t)
	s := n.spec(PolicyRoute, 0, podOpts{})
	newPod(t, s)
	stale := netlink.NewRule()
	stale.Priority, stale.Src, stale.IifName, stale.Table = FromPodPriority, nlsafe.IPNet(netip.PrefixFrom(s.IPv4, 32)), s.HostVeth, 1999
	if err := n.nl.RuleAdd(stale); err != nil {
		t.Fatalf("fixture rule: %v", err)
	}
	setup(t, s)
	d := dump(t, n.nl)
	requireLines(t, "node", d, fmt.Sprintf("rule 2048 from %s/32 to all iif %s lookup %d", s.IPv4, s.HostVeth, n.eniTable(t)))
	requireNoLine(t, "node", d, "lookup 1999")
}

// TestPolicyRouteFailedRepairRollsBack: a repairing Setup that fails after
// re-adding the rules (the host veth's root qdisc is a foreign htb with
// the handle tbf wants, which the kernel refuses to replace by another
// kind) removes the rules it added and keeps the veth it did not create.
func TestPolicyRouteFailedRepairRollsBack(t *testing.T) {
	n := newNode(t)
	s := n.spec(PolicyRoute, 0, podOpts{dual: true})
	newPod(t, s)
	setup(t, s)
	for _, a := range []netip.Addr{s.IPv4, s.IPv6} {
		for _, prio := range []int{ToPodPriority, FromPodPriority} {
			if err := delRule(n.nl, prio, a)(); err != nil {
				t.Fatalf("fixture: %v", err)
			}
		}
	}
	hv := n.link(t, n.nl, s.HostVeth)
	htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: hv.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	if err := n.nl.QdiscAdd(htb); err != nil {
		t.Fatalf("fixture htb: %v", err)
	}
	before := dump(t, n.nl)
	s.IngressBPS = 1_000_000
	_, err := Setup(s)
	if err == nil || !strings.Contains(err.Error(), "qdisc tbf on "+s.HostVeth) {
		t.Fatalf("Setup over a foreign htb: err %v, want one naming the tbf", err)
	}
	requireSame(t, "node after failed repair", before, dump(t, n.nl))
}
