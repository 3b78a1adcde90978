package hostnet

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/internal/nlsafe"
)

// Direction says which side of a policy rule names the pod address, because
// the two pod rules do different jobs: "to" steers replies into the main
// table towards the pod's host route, "from" sends the pod's traffic out of
// its ENI's table.
type Direction string

// The two rule directions of a pod datapath.
const (
	DirTo   Direction = "to"
	DirFrom Direction = "from"
)

// RouteInfo describes one host route to a pod address, with the device so a
// report can tell a live pod link from a route left on a vanished one.
type RouteInfo struct {
	Table     int
	LinkIndex int
	// LinkName is empty when the index no longer resolves to a link.
	LinkName string
}

// RuleInfo describes one per-pod policy rule, enough to print it the way
// `ip rule` does when reporting a leftover.
type RuleInfo struct {
	Priority  int
	Table     int
	Direction Direction
	// IifName is the rule's input interface, empty when the rule has none.
	IifName string
}

// Entry is what the host holds for one address. The daemon compares these
// with its own records and the cloud's: an address here that the daemon
// does not hold is a leftover to release, and a held address without Routes
// has a broken datapath. Non-pod single-address routes (for instance an
// IPv6 gateway /128 in a per-ENI table) also appear; callers that know their
// gateways filter them.
type Entry struct {
	Routes []RouteInfo
	Rules  []RuleInfo
}

// PodAddresses lists every address for which the namespace holds a /32
// (/128) route in a non-local table or a priority 512/2048 rule selecting it
// exactly, keyed by address. Kernel routes of host addresses are left out
// (see podRoute), since they are no pod's.
func (h *Host) PodAddresses() (map[netip.Addr]Entry, error) {
	nl, err := h.lock()
	defer h.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("list pod addresses: %w", err)
	}
	names, err := linkNames(nl)
	if err != nil {
		return nil, fmt.Errorf("list pod addresses in %s: %w", h.nsPath, err)
	}
	out := map[netip.Addr]Entry{}
	for _, family := range families {
		if err := collect(nl, family, names, out); err != nil {
			return nil, fmt.Errorf("list pod addresses in %s: %w", h.nsPath, err)
		}
	}
	return out, nil
}

// collect adds one family's rules and routes to out.
func collect(nl *nlsafe.Handle, family int, names map[int]string, out map[netip.Addr]Entry) error {
	rules, err := listRules(nl, family)
	if err != nil {
		return err
	}
	routes, err := listRoutes(nl, family)
	if err != nil {
		return err
	}
	addRules(rules, out)
	addRoutes(routes, names, out)
	return nil
}

// linkNames maps ifindex to name for labelling routes.
func linkNames(nl *nlsafe.Handle) (map[int]string, error) {
	links, err := nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	names := make(map[int]string, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	return names, nil
}

// addRules records the 512/2048 rules whose source or destination is a
// single address.
func addRules(rules []netlink.Rule, out map[netip.Addr]Entry) {
	for i := range rules {
		r := &rules[i]
		if r.Priority != datapath.ToPodPriority && r.Priority != datapath.FromPodPriority {
			continue
		}
		if ip, ok := singleAddr(r.Dst); ok {
			addRule(out, ip, r, DirTo)
		}
		if ip, ok := singleAddr(r.Src); ok {
			addRule(out, ip, r, DirFrom)
		}
	}
}

// addRule appends one rule to the entry of ip.
func addRule(out map[netip.Addr]Entry, ip netip.Addr, r *netlink.Rule, dir Direction) {
	e := out[ip]
	e.Rules = append(e.Rules, RuleInfo{
		Priority:  r.Priority,
		Table:     r.Table,
		Direction: dir,
		IifName:   r.IifName,
	})
	out[ip] = e
}

// addRoutes records single-address routes that may belong to a pod.
func addRoutes(routes []netlink.Route, names map[int]string, out map[netip.Addr]Entry) {
	for i := range routes {
		r := &routes[i]
		ip, ok := singleAddr(r.Dst)
		if !ok || !podRoute(r) {
			continue
		}
		e := out[ip]
		e.Routes = append(e.Routes, RouteInfo{
			Table:     r.Table,
			LinkIndex: r.LinkIndex,
			LinkName:  names[r.LinkIndex],
		})
		out[ip] = e
	}
}
