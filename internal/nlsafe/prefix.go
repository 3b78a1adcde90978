package nlsafe

import (
	"net"
	"net/netip"
)

// IPNet converts a prefix for netlink, keeping the address bits (an
// interface address such as 192.168.0.253/24 stays one).
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Prefix converts a netlink prefix back; nil, or an address of no
// family, is the invalid prefix. IPv4-mapped addresses come back as IPv4.
func Prefix(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.Prefix{}
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones)
}
