package hostcheck

import (
	"fmt"
	"net"
	"strconv"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

var families = []struct {
	name string
	nl   int
}{{"inet", netlink.FAMILY_V4}, {"inet6", netlink.FAMILY_V6}}

// takeRules records the IPv4 and IPv6 policy rules by priority (several
// rules may share one). netlink does not return a rule's action type, so
// a blackhole rule reads as a lookup of table 0.
func (n *Network) takeRules(h *nlsafe.Handle, names map[int]string) error {
	g := grouped{}
	for _, fam := range families {
		rules, err := h.RuleListFiltered(fam.nl, nil, 0)
		if err != nil {
			return fmt.Errorf("list %s rules: %w", fam.name, err)
		}
		for _, r := range rules {
			g.add(fmt.Sprintf("%s prio %d", fam.name, max(r.Priority, 0)), describeRule(r))
		}
	}
	n.Rules = g.joined()
	return nil
}

func describeRule(r netlink.Rule) string {
	mask := "-"
	if r.Mask != nil {
		mask = fmt.Sprintf("0x%x", *r.Mask)
	}
	portRange := func(p *netlink.RulePortRange) string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%d-%d", p.Start, p.End)
	}
	uids := ""
	if r.UIDRange != nil {
		uids = fmt.Sprintf("%d-%d", r.UIDRange.Start, r.UIDRange.End)
	}
	return words(
		opt("not", "", r.Invert),
		"from "+prefixOrAll(r.Src), "to "+prefixOrAll(r.Dst),
		opt("tos", r.Tos, r.Tos != 0),
		opt("fwmark", fmt.Sprintf("0x%x/%s", r.Mark, mask), r.Mark != 0 || r.Mask != nil),
		opt("iif", r.IifName, r.IifName != ""), opt("oif", r.OifName, r.OifName != ""),
		opt("ipproto", r.IPProto, r.IPProto != 0),
		opt("sport", portRange(r.Sport), r.Sport != nil), opt("dport", portRange(r.Dport), r.Dport != nil),
		opt("uidrange", uids, uids != ""), opt("tun_id", r.TunID, r.TunID != 0),
		opt("flow", r.Flow, r.Flow > 0),
		opt("suppress_prefixlength", r.SuppressPrefixlen, r.SuppressPrefixlen >= 0),
		opt("suppress_ifgroup", r.SuppressIfgroup, r.SuppressIfgroup >= 0),
		opt("goto", r.Goto, r.Goto >= 0),
		"lookup "+tableName(r.Table),
		opt("proto", netlink.RouteProtocol(r.Protocol), r.Protocol != 0),
	)
}

// takeRoutes records the routes of every table of both families.
// Expiry times are not kept; the kernel's cached (cloned) routes are
// dropped by the netlink library.
func (n *Network) takeRoutes(h *nlsafe.Handle, names map[int]string) error {
	g := grouped{}
	all := &netlink.Route{Table: unix.RT_TABLE_UNSPEC}
	for _, fam := range families {
		routes, err := h.RouteListFiltered(fam.nl, all, netlink.RT_FILTER_TABLE)
		if err != nil {
			return fmt.Errorf("list %s routes: %w", fam.name, err)
		}
		for _, r := range routes {
			key := words(fam.name, "table "+tableName(r.Table), routeType(r.Type), prefixOrDefault(r.Dst),
				opt("tos", r.Tos, r.Tos != 0), opt("dev", linkName(names, r.LinkIndex), r.LinkIndex != 0),
				fmt.Sprintf("metric %d", r.Priority))
			g.add(key, describeRoute(r, names))
		}
	}
	n.Routes = g.joined()
	return nil
}

func describeRoute(r netlink.Route, names map[int]string) string {
	parts := []string{
		opt("via", r.Gw, r.Gw != nil), opt("via", r.Via, r.Via != nil),
		opt("src", r.Src, r.Src != nil), "proto " + r.Protocol.String(), "scope " + r.Scope.String(),
		opt("mtu", r.MTU, r.MTU != 0), opt("advmss", r.AdvMSS, r.AdvMSS != 0),
		opt("encap", r.Encap, r.Encap != nil),
	}
	for _, nh := range r.MultiPath {
		parts = append(parts, words("nexthop", opt("via", nh.Gw, nh.Gw != nil),
			"dev "+linkName(names, nh.LinkIndex), fmt.Sprintf("weight %d", nh.Hops+1)))
	}
	return words(parts...)
}

func prefixOrAll(p *net.IPNet) string {
	if p == nil {
		return "all"
	}
	return p.String()
}

func prefixOrDefault(p *net.IPNet) string {
	if p == nil {
		return "default"
	}
	return p.String()
}

func tableName(t int) string {
	switch t {
	case unix.RT_TABLE_DEFAULT:
		return "default"
	case unix.RT_TABLE_MAIN:
		return "main"
	case unix.RT_TABLE_LOCAL:
		return "local"
	}
	return strconv.Itoa(t)
}

func routeType(t int) string {
	names := map[int]string{
		unix.RTN_UNICAST: "unicast", unix.RTN_LOCAL: "local", unix.RTN_BROADCAST: "broadcast",
		unix.RTN_ANYCAST: "anycast", unix.RTN_MULTICAST: "multicast", unix.RTN_BLACKHOLE: "blackhole",
		unix.RTN_UNREACHABLE: "unreachable", unix.RTN_PROHIBIT: "prohibit", unix.RTN_THROW: "throw",
		unix.RTN_NAT: "nat",
	}
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("type%d", t)
}
