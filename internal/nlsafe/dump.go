package nlsafe

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// attempts bounds the retries of one listing. Concurrent pod setups on a
// node interrupt dumps often; ten in a row is a table that never holds
// still, and the caller had better fail than act on it.
const attempts = 10

// dump runs list until the kernel does not flag it as interrupted, at
// most attempts times.
func dump[T any](list func() ([]T, error)) ([]T, error) {
	for i := 1; ; i++ {
		out, err := list()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
		if i == attempts {
			return nil, fmt.Errorf("%d attempts: %w", attempts, err)
		}
	}
}

// LinkList lists the links.
func (h *Handle) LinkList() ([]netlink.Link, error) {
	return dump(h.Handle.LinkList)
}

// AddrList lists the addresses of one link (nil: of all) and family.
func (h *Handle) AddrList(link netlink.Link, family int) ([]netlink.Addr, error) {
	return dump(func() ([]netlink.Addr, error) { return h.Handle.AddrList(link, family) })
}

// RouteList lists the main table's routes of one link (nil: of all) and
// family.
func (h *Handle) RouteList(link netlink.Link, family int) ([]netlink.Route, error) {
	return dump(func() ([]netlink.Route, error) { return h.Handle.RouteList(link, family) })
}

// RouteListFiltered lists the routes of family that match filter in the
// fields filterMask names.
func (h *Handle) RouteListFiltered(family int, filter *netlink.Route, filterMask uint64) ([]netlink.Route, error) {
	return dump(func() ([]netlink.Route, error) { return h.Handle.RouteListFiltered(family, filter, filterMask) })
}

// RuleList lists the policy rules of family.
func (h *Handle) RuleList(family int) ([]netlink.Rule, error) {
	return dump(func() ([]netlink.Rule, error) { return h.Handle.RuleList(family) })
}

// RuleListFiltered lists the policy rules of family that match filter in
// the fields filterMask names.
func (h *Handle) RuleListFiltered(family int, filter *netlink.Rule, filterMask uint64) ([]netlink.Rule, error) {
	return dump(func() ([]netlink.Rule, error) { return h.Handle.RuleListFiltered(family, filter, filterMask) })
}

// NeighList lists the neighbours of one link (0: of all) and family.
func (h *Handle) NeighList(linkIndex, family int) ([]netlink.Neigh, error) {
	return dump(func() ([]netlink.Neigh, error) { return h.Handle.NeighList(linkIndex, family) })
}

// QdiscList lists the qdiscs of one link (nil: of all).
func (h *Handle) QdiscList(link netlink.Link) ([]netlink.Qdisc, error) {
	return dump(func() ([]netlink.Qdisc, error) { return h.Handle.QdiscList(link) })
}

// FilterList lists the tc filters of one link under parent.
func (h *Handle) FilterList(link netlink.Link, parent uint32) ([]netlink.Filter, error) {
	return dump(func() ([]netlink.Filter, error) { return h.Handle.FilterList(link, parent) })
}
