package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

const (
	netlinkFamilyV4 = netlink.FAMILY_V4
	netlinkFamilyV6 = netlink.FAMILY_V6
)

// nlh is a netlink handle bound to one namespace, whose dumps retry
// while interrupted (NLM_F_DUMP_INTR): concurrent Setups of pods on one
// node change links, routes and rules while others list them.
type nlh struct {
	*nlsafe.Handle
	// where is "host" or "pod", for messages.
	where string
}

// newNLH opens a netlink socket inside n.
func newNLH(n ns.NetNS, where string) (*nlh, error) {
	h, err := nlsafe.OpenNS(n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &nlh{Handle: h, where: where}, nil
}

// tableRoutes lists the routes of one table.
func (h *nlh) tableRoutes(fam, table int) ([]netlink.Route, error) {
	return h.RouteListFiltered(fam, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
}

// linkByName returns the link or nil when there is none.
func (h *nlh) linkByName(name string) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find link %s in %s: %w", name, h.where, err)
	}
	return l, nil
}

// linkByMAC finds the link with hardware address mac, whatever its type
// (ENIs are physical NICs in production and veths in the lab), or nil.
func (h *nlh) linkByMAC(mac net.HardwareAddr) (netlink.Link, error) {
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links in %s: %w", h.where, err)
	}
	for _, l := range links {
		if bytes.Equal(l.Attrs().HardwareAddr, mac) {
			return l, nil
		}
	}
	return nil, nil
}

// deleteLink deletes l; a link already gone is not an error.
func (h *nlh) deleteLink(l netlink.Link) error {
	err := h.LinkDel(l)
	if err == nil || gone(err) {
		return nil
	}
	return fmt.Errorf("delete link %s in %s: %w", l.Attrs().Name, h.where, err)
}

// gone reports errors meaning the object to remove is already absent.
func gone(err error) bool {
	var notFound netlink.LinkNotFoundError
	return errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) ||
		errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EADDRNOTAVAIL) || errors.As(err, &notFound)
}

// addrOf converts a netlink address; nil is the invalid address.
func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

// isDefault reports whether a route destination is the default route,
// which netlink reports as nil or as 0.0.0.0/0 (::/0).
func isDefault(dst *net.IPNet) bool {
	p := nlsafe.Prefix(dst)
	return dst == nil || (p.IsValid() && p.Bits() == 0)
}

// sameDst compares route destinations, treating nil as the default route.
func sameDst(a, b *net.IPNet) bool {
	if isDefault(a) || isDefault(b) {
		return isDefault(a) && isDefault(b)
	}
	return nlsafe.Prefix(a) == nlsafe.Prefix(b)
}

// isUp reports the administrative state.
func isUp(l netlink.Link) bool { return l.Attrs().Flags&net.FlagUp != 0 }
