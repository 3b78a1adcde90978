package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// families are listed one at a time: a FAMILY_ALL rule dump has been seen to
// come back incomplete (Terway PR #119), which leaked 512/2048 rules.
var families = []int{netlink.FAMILY_V4, netlink.FAMILY_V6}

// listRules dumps the policy rules of one address family. Dumps retry
// while interrupted (NLM_F_DUMP_INTR: the table changed mid-dump, e.g.
// while a CNI ADD ran), see nlsafe.
func listRules(nl *nlsafe.Handle, family int) ([]netlink.Rule, error) {
	rules, err := nl.RuleList(family)
	if err != nil {
		return nil, fmt.Errorf("list %s rules: %w", familyName(family), err)
	}
	return rules, nil
}

// listRoutes dumps the routes of one address family in every table; without
// the table filter netlink would silently return the main table only.
func listRoutes(nl *nlsafe.Handle, family int) ([]netlink.Route, error) {
	routes, err := nl.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list %s routes: %w", familyName(family), err)
	}
	return routes, nil
}

// familyName labels a family in error messages.
func familyName(family int) string {
	if family == netlink.FAMILY_V6 {
		return "ipv6"
	}
	return "ipv4"
}

// hostPrefix converts a pod address into the single-address prefix the
// datapaths install, refusing values that would match nothing meaningful.
func hostPrefix(ip netip.Addr) (netip.Prefix, int, error) {
	if !ip.IsValid() {
		return netip.Prefix{}, 0, errors.New("invalid (zero) IP address")
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32), netlink.FAMILY_V4, nil
	}
	return netip.PrefixFrom(ip, 128), netlink.FAMILY_V6, nil
}

// toPrefix converts a netlink prefix; ok is false for nil (meaning "all").
func toPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil || n.IP == nil {
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if bits == 0 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr.Unmap(), ones), true
}

// singleAddr returns the address of a /32 or /128 prefix.
func singleAddr(n *net.IPNet) (netip.Addr, bool) {
	p, ok := toPrefix(n)
	if !ok || !p.IsSingleIP() {
		return netip.Addr{}, false
	}
	return p.Addr(), true
}

// defaultRule reports the kernel's built-in rules (local, main, default).
// They carry no selector today, but GC must never remove them even if a
// future change widened the match, so they are excluded by priority too.
func defaultRule(r *netlink.Rule) bool {
	switch r.Priority {
	case 0, 32766, 32767:
		return true
	}
	return false
}

// podRoute reports whether a route can belong to a pod datapath. Routes in
// the local table and kernel-protocol routes exist because an address is
// configured on a host interface; they disappear with the address, and
// deleting them would break the host, so they are neither reported nor
// released.
func podRoute(r *netlink.Route) bool {
	return r.Table != unix.RT_TABLE_LOCAL && r.Protocol != unix.RTPROT_KERNEL
}
