package hostcheck

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// describeLinks keeps what the lab could change about a link and leaves
// out what moves on its own (operational state, carrier, counters).
func describeLinks(links []netlink.Link, names map[int]string) map[string]string {
	out := make(map[string]string, len(links))
	for _, l := range links {
		a := l.Attrs()
		state := "down"
		if a.Flags&net.FlagUp != 0 {
			state = "up"
		}
		out[a.Name] = words(
			"type "+l.Type(), state, fmt.Sprintf("mtu %d", a.MTU),
			opt("master", linkName(names, a.MasterIndex), a.MasterIndex != 0),
			opt("mac", a.HardwareAddr, len(a.HardwareAddr) > 0),
		)
	}
	return out
}

// takeAddresses records IPv4 and IPv6 addresses by device and prefix.
// Flags and lifetimes change on their own (DAD, renewals); temporary
// (privacy) addresses are replaced by the kernel and are left out.
func (n *Network) takeAddresses(h *nlsafe.Handle, names map[int]string) error {
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	g := grouped{}
	for _, a := range addrs {
		if a.Flags&unix.IFA_F_TEMPORARY != 0 {
			continue
		}
		g.add(linkName(names, a.LinkIndex)+" "+a.IPNet.String(), words(
			"scope "+netlink.Scope(a.Scope).String(),
			opt("peer", a.Peer, a.Peer != nil),
			opt("label", a.Label, a.Label != "" && a.Label != linkName(names, a.LinkIndex)),
		))
	}
	n.Addresses = g.joined()
	return nil
}
