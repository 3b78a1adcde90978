package datapath

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Priorities of the ENI's egress filters that send Service and host-stack
// traffic of IPVlan pods to the node: Terway's 40000 for IPv4, and the
// next for IPv6 (tc keeps one protocol per priority).
const (
	RedirectPriorityV4 = 40000
	RedirectPriorityV6 = 40001
)

// hostRedirect is the ENI's clsact qdisc and one egress u32 filter per
// CIDR: `tunnel_key unset` (pipe), `skbedit ptype host` (pipe), `mirred
// ingress redirect dev <to>` (stolen). Filters at its priorities for other
// CIDRs or another target are stale (a changed Service CIDR, an old
// node-side slave) and removed.
type hostRedirect struct {
	h       *nlh
	eni, to netlink.Link
	cidrs   []netip.Prefix
}

func (o hostRedirect) String() string {
	return fmt.Sprintf("Service redirect on %s to %s", o.eni.Attrs().Name, o.to.Attrs().Name)
}

// clsactHandle is the clsact qdisc's handle, ffff:.
var clsactHandle = netlink.MakeHandle(0xffff, 0)

// hasClsact reports whether the ENI has its clsact qdisc.
func (o hostRedirect) hasClsact() (bool, error) {
	qs, err := o.h.QdiscList(o.eni)
	if err != nil {
		return false, failed(o, "list qdiscs for", err)
	}
	for _, q := range qs {
		if _, ok := q.(*netlink.Clsact); ok {
			return true, nil
		}
	}
	return false, nil
}

// redirectFilter is one wanted filter.
type redirectFilter struct {
	dst netip.Prefix
	to  int
}

// ours lists the ENI's egress filters at the redirect priorities, decoded;
// a filter that does not decode has the zero redirectFilter.
func (o hostRedirect) ours() ([]netlink.Filter, []redirectFilter, error) {
	fs, err := o.h.FilterList(o.eni, netlink.HANDLE_MIN_EGRESS)
	if err != nil {
		return nil, nil, failed(o, "list egress filters for", err)
	}
	var filters []netlink.Filter
	var decoded []redirectFilter
	for _, f := range fs {
		if p := f.Attrs().Priority; p != RedirectPriorityV4 && p != RedirectPriorityV6 {
			continue
		}
		filters = append(filters, f)
		decoded = append(decoded, decodeRedirect(f))
	}
	return filters, decoded, nil
}

func (o hostRedirect) want() []redirectFilter {
	var w []redirectFilter
	for _, c := range o.cidrs {
		w = append(w, redirectFilter{dst: c.Masked(), to: o.to.Attrs().Index})
	}
	return w
}

func (o hostRedirect) ensure() error {
	ok, err := o.hasClsact()
	if err != nil {
		return err
	}
	if !ok {
		err := o.h.QdiscAdd(&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{
			LinkIndex: o.eni.Attrs().Index, Handle: clsactHandle, Parent: netlink.HANDLE_CLSACT}})
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return failed(o, "add clsact qdisc for", err)
		}
	}
	filters, have, err := o.ours()
	if err != nil {
		return err
	}
	want := o.want()
	for i, f := range filters {
		if slices.Contains(want, have[i]) {
			continue
		}
		if err := o.h.FilterDel(f); err != nil && !gone(err) {
			return failed(o, "remove a stale filter of", err)
		}
	}
	for _, w := range want {
		if slices.Contains(have, w) {
			continue
		}
		if err := o.h.FilterAdd(o.filter(w.dst)); err != nil {
			return failed(o, fmt.Sprintf("add the filter for %s to", w.dst), err)
		}
	}
	return nil
}

func (o hostRedirect) check() error {
	ok, err := o.hasClsact()
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("qdisc clsact on %s: missing", o.eni.Attrs().Name)
	}
	_, have, err := o.ours()
	if err != nil {
		return err
	}
	for _, w := range o.want() {
		if !slices.Contains(have, w) {
			return fmt.Errorf("filter redirecting %s on %s to %s: missing", w.dst, o.eni.Attrs().Name, o.to.Attrs().Name)
		}
	}
	return nil
}

// filter builds the u32 filter for dst: the destination address at its
// offset in the IPv4 (16) or IPv6 (24) header, one 32-bit key per word
// the prefix covers.
func (o hostRedirect) filter(dst netip.Prefix) *netlink.U32 {
	prio, proto, off := uint16(RedirectPriorityV4), uint16(unix.ETH_P_IP), int32(16)
	if dst.Addr().Is6() {
		prio, proto, off = RedirectPriorityV6, unix.ETH_P_IPV6, 24
	}
	sel := &netlink.TcU32Sel{Flags: nl.TC_U32_TERMINAL}
	addr := dst.Addr().AsSlice()
	for i := 0; i*32 < max(dst.Bits(), 1); i++ {
		ones := min(max(dst.Bits()-32*i, 0), 32)
		mask := uint32(0)
		if ones > 0 {
			mask = ^uint32(0) << (32 - ones)
		}
		word := uint32(addr[4*i])<<24 | uint32(addr[4*i+1])<<16 | uint32(addr[4*i+2])<<8 | uint32(addr[4*i+3])
		sel.Keys = append(sel.Keys, netlink.TcU32Key{Mask: mask, Val: word & mask, Off: off + int32(4*i)})
	}
	ptype := uint16(unix.PACKET_HOST)
	skbedit := netlink.NewSkbEditAction()
	skbedit.PType = &ptype
	unset := netlink.NewTunnelKeyAction()
	unset.Action = netlink.TCA_TUNNEL_KEY_UNSET
	mirred := netlink.NewMirredAction(o.to.Attrs().Index)
	mirred.MirredAction = netlink.TCA_INGRESS_REDIR
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: o.eni.Attrs().Index, Parent: netlink.HANDLE_MIN_EGRESS,
			Priority: prio, Protocol: proto},
		Sel:     sel,
		Actions: []netlink.Action{unset, skbedit, mirred},
	}
}

// decodeRedirect reads a filter back into the CIDR it matches and the
// link it redirects to; anything else than hostRedirect's shape decodes
// as the zero value.
func decodeRedirect(f netlink.Filter) redirectFilter {
	u, ok := f.(*netlink.U32)
	if !ok || u.Sel == nil || len(u.Sel.Keys) == 0 {
		return redirectFilter{}
	}
	to, host := 0, false
	for _, a := range u.Actions {
		switch a := a.(type) {
		case *netlink.MirredAction:
			if a.MirredAction == netlink.TCA_INGRESS_REDIR {
				to = a.Ifindex
			}
		case *netlink.SkbEditAction:
			host = a.PType != nil && *a.PType == unix.PACKET_HOST
		}
	}
	if to == 0 || !host {
		return redirectFilter{}
	}
	base, size := int32(16), 4
	if u.Protocol == unix.ETH_P_IPV6 {
		base, size = 24, 16
	}
	addr := make([]byte, size)
	ones := 0
	for _, k := range u.Sel.Keys {
		i := int(k.Off-base) / 4
		if k.Off < base || (k.Off-base)%4 != 0 || 4*i+4 > size {
			return redirectFilter{}
		}
		v := k.Val & k.Mask
		addr[4*i], addr[4*i+1], addr[4*i+2], addr[4*i+3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		ones += bits.OnesCount32(k.Mask)
	}
	a, _ := netip.AddrFromSlice(addr)
	return redirectFilter{dst: netip.PrefixFrom(a, ones).Masked(), to: to}
}
