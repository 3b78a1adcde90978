package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// object is one piece of a datapath. Setup ensures it (compare, then add
// or replace, so running twice changes nothing) and Check verifies it.
// Both return errors that name the object, e.g.
// `neighbour 169.254.1.1 on eth0: missing`.
type object interface {
	ensure() error
	check() error
}

// broken is Check's verdict on an object.
func broken(o fmt.Stringer, problem string, args ...any) error {
	return fmt.Errorf("%s: %s", o, fmt.Sprintf(problem, args...))
}

// failed wraps an error met while ensuring or reading an object.
func failed(o fmt.Stringer, verb string, err error) error {
	return fmt.Errorf("%s %s: %w", verb, o, err)
}

// linkObj is a link that must exist, be up and have an MTU (and, for an
// ExclusiveENI, the ENI's MAC).
type linkObj struct {
	h    *nlh
	link netlink.Link
	mtu  int
	mac  net.HardwareAddr
}

func (o linkObj) String() string {
	return fmt.Sprintf("link %s in %s", o.link.Attrs().Name, o.h.where)
}

// current re-reads the link by index: its attributes may have changed.
func (o linkObj) current() (netlink.Link, error) {
	l, err := o.h.LinkByIndex(o.link.Attrs().Index)
	if gone(err) {
		return nil, nil
	}
	return l, err
}

func (o linkObj) ensure() error {
	l, err := o.current()
	if err != nil {
		return failed(o, "read", err)
	}
	if l == nil {
		return broken(o, "missing")
	}
	if l.Attrs().MTU != o.mtu {
		if err := o.h.LinkSetMTU(l, o.mtu); err != nil {
			return failed(o, fmt.Sprintf("set MTU %d of", o.mtu), err)
		}
	}
	if !isUp(l) {
		if err := o.h.LinkSetUp(l); err != nil {
			return failed(o, "set up", err)
		}
	}
	return nil
}

func (o linkObj) check() error {
	l, err := o.current()
	switch {
	case err != nil:
		return failed(o, "read", err)
	case l == nil || l.Attrs().Name != o.link.Attrs().Name:
		return broken(o, "missing")
	case o.mac != nil && !bytes.Equal(l.Attrs().HardwareAddr, o.mac):
		return broken(o, "MAC %s, want %s", l.Attrs().HardwareAddr, o.mac)
	case !isUp(l):
		return broken(o, "down")
	case l.Attrs().MTU != o.mtu:
		return broken(o, "MTU %d, want %d", l.Attrs().MTU, o.mtu)
	}
	return nil
}

// addrObj is an address on a link. IPv6 addresses skip duplicate address
// detection: they are single-address prefixes nobody else may hold, and
// DAD would leave them tentative (unusable) for a second or more.
type addrObj struct {
	h      *nlh
	link   netlink.Link
	prefix netip.Prefix
	// noPrefixRoute keeps the kernel from routing the prefix through the
	// link (IPv6 adds a route even for a /128).
	noPrefixRoute bool
	// scope is the address's scope; 0 is global (universe).
	scope netlink.Scope
}

func (o addrObj) String() string {
	return fmt.Sprintf("address %s on %s in %s", o.prefix, o.link.Attrs().Name, o.h.where)
}

// find returns the link's address of the prefix, if any.
func (o addrObj) find() (*netlink.Addr, error) {
	fam := netlinkFamilyV4
	if o.prefix.Addr().Is6() {
		fam = netlinkFamilyV6
	}
	addrs, err := o.h.AddrList(o.link, fam)
	if err != nil {
		return nil, failed(o, "list addresses for", err)
	}
	for i, a := range addrs {
		if nlsafe.Prefix(a.IPNet) == o.prefix {
			return &addrs[i], nil
		}
	}
	return nil, nil
}

func (o addrObj) ensure() error {
	have, err := o.find()
	if err != nil {
		return err
	}
	if have != nil && have.Scope == int(o.scope) {
		return nil
	}
	if have != nil {
		if err := o.h.AddrDel(o.link, have); err != nil && !gone(err) {
			return failed(o, fmt.Sprintf("replace scope %d of", have.Scope), err)
		}
	}
	a := &netlink.Addr{IPNet: nlsafe.IPNet(o.prefix), Scope: int(o.scope)}
	if o.prefix.Addr().Is6() {
		a.Flags |= unix.IFA_F_NODAD
	}
	if o.noPrefixRoute {
		a.Flags |= unix.IFA_F_NOPREFIXROUTE
	}
	if err := o.h.AddrAdd(o.link, a); err != nil && !errors.Is(err, unix.EEXIST) {
		return failed(o, "add", err)
	}
	return nil
}

func (o addrObj) check() error {
	have, err := o.find()
	switch {
	case err != nil:
		return err
	case have == nil:
		return broken(o, "missing")
	case have.Scope != int(o.scope):
		return broken(o, "scope %s, want %s", netlink.Scope(have.Scope), o.scope)
	}
	return nil
}

// routeObj is one route. Routes match on table, destination, gateway and
// device (and, for IPv4, scope and onlink); metrics are left to the kernel.
type routeObj struct {
	h *nlh
	r netlink.Route
	// dev names r.LinkIndex for messages.
	dev string
}

// newRoute builds a route to dst in table via gw (if valid) on link dev.
func newRoute(h *nlh, dst netip.Prefix, gw netip.Addr, dev netlink.Link, table int) routeObj {
	r := netlink.Route{
		Family:    netlinkFamilyV4,
		Dst:       nlsafe.IPNet(dst),
		LinkIndex: dev.Attrs().Index,
		Table:     table,
		Scope:     netlink.SCOPE_UNIVERSE,
	}
	if dst.Addr().Is6() {
		r.Family = netlinkFamilyV6
	}
	if gw.IsValid() {
		// onlink: the gateway is not inside any prefix of the link (the
		// pod's address is a /32, the gateway link-local or the vSwitch's).
		r.Gw = gw.AsSlice()
		r.Flags = int(netlink.FLAG_ONLINK)
	} else {
		r.Scope = netlink.SCOPE_LINK
	}
	return routeObj{h: h, r: r, dev: dev.Attrs().Name}
}

func (o routeObj) String() string {
	var b strings.Builder
	b.WriteString("route ")
	if isDefault(o.r.Dst) {
		b.WriteString("default")
	} else {
		b.WriteString(nlsafe.Prefix(o.r.Dst).String())
	}
	if o.r.Gw != nil {
		fmt.Fprintf(&b, " via %s", addrOf(o.r.Gw))
	} else {
		fmt.Fprintf(&b, " dev %s", o.dev)
	}
	if o.r.Table != unix.RT_TABLE_MAIN {
		fmt.Fprintf(&b, " table %d", o.r.Table)
	}
	if o.h.where == "pod" {
		b.WriteString(" in pod")
	}
	return b.String()
}

// matches compares a listed route with the wanted one.
func (o routeObj) matches(a netlink.Route) bool {
	if a.Table != o.r.Table || !sameDst(a.Dst, o.r.Dst) || a.LinkIndex != o.r.LinkIndex ||
		addrOf(a.Gw) != addrOf(o.r.Gw) {
		return false
	}
	if o.r.Family == netlinkFamilyV4 {
		return a.Scope == o.r.Scope && a.Flags&int(netlink.FLAG_ONLINK) == o.r.Flags&int(netlink.FLAG_ONLINK)
	}
	return true
}

// find returns the matching route, or else any route of the table to the
// same destination (to describe what is wrong).
func (o routeObj) find() (match, other *netlink.Route, err error) {
	routes, err := o.h.tableRoutes(o.r.Family, o.r.Table)
	if err != nil {
		return nil, nil, failed(o, "list routes for", err)
	}
	for i, a := range routes {
		if o.matches(a) {
			return &routes[i], nil, nil
		}
		if sameDst(a.Dst, o.r.Dst) && other == nil {
			other = &routes[i]
		}
	}
	return nil, other, nil
}

func (o routeObj) ensure() error {
	match, _, err := o.find()
	if err != nil || match != nil {
		return err
	}
	r := o.r
	if err := o.h.RouteReplace(&r); err != nil {
		return failed(o, "add", err)
	}
	return nil
}

func (o routeObj) check() error {
	match, other, err := o.find()
	switch {
	case err != nil:
		return err
	case match != nil:
		return nil
	case other != nil:
		return broken(o, "differs: %s", other)
	}
	return broken(o, "missing")
}

// neighObj is a permanent neighbour entry.
type neighObj struct {
	h    *nlh
	link netlink.Link
	ip   netip.Addr
	mac  net.HardwareAddr
}

func (o neighObj) String() string {
	return fmt.Sprintf("neighbour %s on %s", o.ip, o.link.Attrs().Name)
}

func (o neighObj) family() int {
	if o.ip.Is6() {
		return netlinkFamilyV6
	}
	return netlinkFamilyV4
}

// find returns the link's entry for the address, if any.
func (o neighObj) find() (*netlink.Neigh, error) {
	neighs, err := o.h.NeighList(o.link.Attrs().Index, o.family())
	if err != nil {
		return nil, failed(o, "list neighbours for", err)
	}
	for i, n := range neighs {
		if addrOf(n.IP) == o.ip {
			return &neighs[i], nil
		}
	}
	return nil, nil
}

func (o neighObj) ok(n *netlink.Neigh) bool {
	return n != nil && n.State&netlink.NUD_PERMANENT != 0 && bytes.Equal(n.HardwareAddr, o.mac)
}

func (o neighObj) ensure() error {
	n, err := o.find()
	if err != nil || o.ok(n) {
		return err
	}
	err = o.h.NeighSet(&netlink.Neigh{
		LinkIndex:    o.link.Attrs().Index,
		Family:       o.family(),
		State:        netlink.NUD_PERMANENT,
		IP:           o.ip.AsSlice(),
		HardwareAddr: o.mac,
	})
	if err != nil {
		return failed(o, "set", err)
	}
	return nil
}

func (o neighObj) check() error {
	n, err := o.find()
	switch {
	case err != nil:
		return err
	case n == nil:
		return broken(o, "missing")
	case !bytes.Equal(n.HardwareAddr, o.mac):
		return broken(o, "lladdr %s, want %s", n.HardwareAddr, o.mac)
	case n.State&netlink.NUD_PERMANENT == 0:
		return broken(o, "not permanent (state %#x)", n.State)
	}
	return nil
}

// ruleObj is a policy rule for one pod address. Rules at the same
// priority for the same address that differ (an older ENI table, a
// different iif) are replaced: there is one per pod address.
type ruleObj struct {
	h    *nlh
	want netlink.Rule
	// created, when set, records a rule this Setup added for rollback.
	created func(what string, fn func() error)
}

// newRule builds `<prio>: from src | to dst [iif iif] lookup table`.
func newRule(h *nlh, prio int, src, dst netip.Prefix, iif string, table int) ruleObj {
	r := netlink.NewRule()
	r.Priority, r.Table, r.IifName = prio, table, iif
	r.Family = netlinkFamilyV4
	if src.Addr().Is6() || dst.Addr().Is6() {
		r.Family = netlinkFamilyV6
	}
	if src.IsValid() {
		r.Src = nlsafe.IPNet(src)
	}
	if dst.IsValid() {
		r.Dst = nlsafe.IPNet(dst)
	}
	return ruleObj{h: h, want: *r}
}

func (o ruleObj) String() string { return fmt.Sprintf("rule %d %q", o.want.Priority, ruleText(o.want)) }

// ruleText prints a rule's selector and action as `ip rule` does.
func ruleText(r netlink.Rule) string {
	var parts []string
	if p := nlsafe.Prefix(r.Src); p.IsValid() {
		parts = append(parts, "from "+shortPrefix(p))
	}
	if p := nlsafe.Prefix(r.Dst); p.IsValid() {
		parts = append(parts, "to "+shortPrefix(p))
	}
	if r.IifName != "" {
		parts = append(parts, "iif "+r.IifName)
	}
	if r.Table == unix.RT_TABLE_MAIN {
		parts = append(parts, "lookup main")
	} else {
		parts = append(parts, fmt.Sprintf("lookup %d", r.Table))
	}
	return strings.Join(parts, " ")
}

// shortPrefix drops the length of single-address prefixes, as ip does.
func shortPrefix(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// sameSelector reports whether a is a rule for the same pod address at
// the same priority.
func (o ruleObj) sameSelector(a netlink.Rule) bool {
	return a.Priority == o.want.Priority && nlsafe.Prefix(a.Src) == nlsafe.Prefix(o.want.Src) &&
		nlsafe.Prefix(a.Dst) == nlsafe.Prefix(o.want.Dst)
}

func (o ruleObj) exact(a netlink.Rule) bool {
	return o.sameSelector(a) && a.Table == o.want.Table && a.IifName == o.want.IifName &&
		a.OifName == "" && a.Mark == 0 && !a.Invert
}

func (o ruleObj) list() ([]netlink.Rule, error) {
	rules, err := o.h.RuleList(o.want.Family)
	if err != nil {
		return nil, failed(o, "list rules for", err)
	}
	return rules, nil
}

func (o ruleObj) ensure() error {
	rules, err := o.list()
	if err != nil {
		return err
	}
	found := false
	for _, a := range rules {
		switch {
		case o.exact(a):
			found = true
		case o.sameSelector(a):
			if err := o.h.RuleDel(&a); err != nil && !gone(err) {
				return failed(o, fmt.Sprintf("replace stale %q by", ruleText(a)), err)
			}
		}
	}
	if found {
		return nil
	}
	r := o.want
	err = o.h.RuleAdd(&r)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return failed(o, "add", err)
	}
	if o.created != nil {
		o.created(o.String(), func() error {
			if err := o.h.RuleDel(&r); err != nil && !gone(err) {
				return err
			}
			return nil
		})
	}
	return nil
}

func (o ruleObj) check() error {
	rules, err := o.list()
	if err != nil {
		return err
	}
	var other *netlink.Rule
	for i, a := range rules {
		if o.exact(a) {
			return nil
		}
		if o.sameSelector(a) && other == nil {
			other = &rules[i]
		}
	}
	if other != nil {
		return broken(o, "differs: %q", ruleText(*other))
	}
	return broken(o, "missing")
}
