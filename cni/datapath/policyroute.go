package datapath

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// PolicyRoute (ENIMultiIP over veth). The pod's /32 sits on the pod end of
// a veth; the node routes the pod's traffic with two rules per address:
//
//	512:  to podIP lookup main                           (into the pod)
//	2048: from podIP iif <hostVeth> lookup <1000+ENI ifindex>
//
// The ENI table holds `default via <vSwitch gw> dev <ENI> onlink`, so
// what the pod sends leaves through the ENI that owns its address (the
// VPC drops it on any other ENI). Rule 2048 keeps Terway v1.2.5's iif
// match: only traffic the pod itself sends is steered, never node-local
// traffic that happens to carry the pod's source; Teardown removes the
// iif-less variant Terway main writes too.
//
// Rule 512 sits before 2048 so that traffic between two pods of the node
// stays on the node instead of hairpinning through the VPC.
//
// The ENI table route and the node IP on the ENI are shared by every pod
// on the ENI: Setup ensures them (concurrent Setups converge on the same
// objects) and Teardown leaves them, because other pods may still use
// them and an idle ENI's table is harmless; the daemon owns ENI lifetime.

// eniState is what PolicyRoute uses of the node's ENI.
type eniState struct {
	link netlink.Link
	// nodeIPs are the node's addresses (one per family at most) to add
	// as single addresses on the ENI.
	nodeIPs []netip.Addr
}

// table is the ENI's route table.
func (s eniState) table() int { return ENITable(s.link.Attrs().Index) }

// findENI looks the ENI up by MAC among the node's links.
func (e *env) findENI() (eniState, error) {
	mac, err := e.s.eniMAC()
	if err != nil {
		return eniState{}, err
	}
	l, err := e.host.linkByMAC(mac)
	if err != nil {
		return eniState{}, err
	}
	if l == nil {
		return eniState{}, fmt.Errorf("ENI %s: no link with this MAC in host", mac)
	}
	st := eniState{link: l}
	for _, f := range e.s.families() {
		ip, err := e.nodeIP(f, l)
		if err != nil {
			return st, err
		}
		if ip.IsValid() {
			st.nodeIPs = append(st.nodeIPs, ip)
		}
	}
	return st, nil
}

// nodeIP is the node's address of family f: the preferred source of the
// main table's default route, or else the first global address of the
// link holding it. It is invalid when there is no default route, or when
// the ENI itself holds it (then the address is on the ENI already).
func (e *env) nodeIP(f family, eni netlink.Link) (netip.Addr, error) {
	routes, err := e.host.tableRoutes(f.nl(), unix.RT_TABLE_MAIN)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list host routes for the node IP: %w", err)
	}
	var def *netlink.Route
	for i, r := range routes {
		if isDefault(r.Dst) && r.LinkIndex > 0 && (def == nil || r.Priority < def.Priority) {
			def = &routes[i]
		}
	}
	if def == nil || def.LinkIndex == eni.Attrs().Index {
		return netip.Addr{}, nil
	}
	if src := addrOf(def.Src); src.IsValid() {
		return src, nil
	}
	link, err := e.host.LinkByIndex(def.LinkIndex)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("link of the host default route: %w", err)
	}
	addrs, err := e.host.AddrList(link, f.nl())
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %s for the node IP: %w", link.Attrs().Name, err)
	}
	for _, a := range addrs {
		ip := addrOf(a.IP)
		if a.Scope == int(netlink.SCOPE_UNIVERSE) && !ip.IsLinkLocalUnicast() {
			return ip, nil
		}
	}
	return netip.Addr{}, nil
}

// eniObjects is the ENI's shared state: up with the pod MTU, the node IPs
// as single addresses (the node's own traffic out of the ENI, e.g. ARP
// and replies steered by the ENI table, gets a valid source), and the
// table's default route.
func (e *env) eniObjects(st eniState) []object {
	objs := []object{linkObj{h: e.host, link: st.link, mtu: e.s.mtu()}}
	for _, ip := range st.nodeIPs {
		objs = append(objs, addrObj{h: e.host, link: st.link, prefix: netip.PrefixFrom(ip, ip.BitLen()), noPrefixRoute: true})
	}
	for _, f := range e.s.families() {
		objs = append(objs, newRoute(e.host, defaultRoute(f), f.gw, st.link, st.table()))
	}
	return objs
}

// podRules are the two rules per pod address.
func (e *env) podRules(hostVeth string, table int) []object {
	var objs []object
	for _, f := range e.s.families() {
		to := newRule(e.host, ToPodPriority, netip.Prefix{}, f.host(), "", unix.RT_TABLE_MAIN)
		from := newRule(e.host, FromPodPriority, f.host(), netip.Prefix{}, hostVeth, table)
		to.created, from.created = e.created, e.created
		objs = append(objs, to, from)
	}
	return objs
}

// policyRouteObjects is the whole PolicyRoute datapath, in the order Setup
// builds it and Check reports it: pod side, node side of the veth, ENI,
// rules, bandwidth.
func (e *env) policyRouteObjects(v vethPair, st eniState) []object {
	objs := e.podVethObjects(v)
	objs = append(objs, e.hostVethObjects(v, st.link.Attrs().Name)...)
	objs = append(objs, e.eniObjects(st)...)
	objs = append(objs, e.podRules(v.hostEnd.Attrs().Name, st.table())...)
	return append(objs, e.bandwidthObjects(v)...)
}

// setupPolicyRoute creates the veth, then finds the ENI: a missing ENI
// fails after the veth exists, which rollback then removes.
func (e *env) setupPolicyRoute() (*built, error) { return e.policyRoute(e.ensureVeth) }

// checkPolicyRoute looks up what Setup built.
func (e *env) checkPolicyRoute() (*built, error) { return e.policyRoute(e.requireVeth) }

// policyRoute gets the veth through veth (made or only found), then the
// ENI, and lists the objects of both.
func (e *env) policyRoute(veth func(hostName, podName string) (vethPair, error)) (*built, error) {
	v, err := veth(e.s.HostVeth, e.s.IfName)
	if err != nil {
		return nil, err
	}
	st, err := e.findENI()
	if err != nil {
		return nil, err
	}
	return &built{veth: v, objects: e.policyRouteObjects(v, st)}, nil
}
