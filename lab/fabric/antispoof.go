package fabric

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Anti-spoofing as a VPC does it: a frame entering the fabric from an ENI
// port is forwarded (bridged to another port, or delivered to the bridge
// to be routed) only if its IP source is an address the cloud assigned to
// that ENI or lies inside a route entry whose next hop is that ENI (for an
// instance next hop: its primary ENI). IPv6 link-local and unspecified
// sources pass, for neighbour discovery and DAD. ARP is not checked.
//
// It is one nftables table in the fabric namespace, family bridge:
//
//	table bridge lab {
//	  set <port>_v4 { type ipv4_addr; flags interval; elements = {...} }
//	  set <port>_v6 { type ipv6_addr; flags interval; elements = {...} }
//	  chain antispoof {
//	    iifname "<port>" meta protocol ip  ip  saddr != @<port>_v4 counter drop
//	    iifname "<port>" meta protocol ip6 ip6 saddr != @<port>_v6 counter drop
//	  }
//	  chain forward { type filter hook forward priority 0; jump antispoof }
//	  chain input   { type filter hook input priority 0; jump antispoof }
//	  chain output  { type filter hook output priority 0; icmpv6 type nd-redirect drop }
//	}
//
// The output chain keeps the fabric from sending IPv6 redirects (IPv4's
// are off by sysctl): a VPC router never tells a node to bypass it.
//
// The table is rebuilt whole in one netlink transaction on every change
// (add, delete, add again), so it is always exactly the recorded state and
// a packet never sees a half-updated rule set.

// nftTable is the table's name inside the fabric namespace.
const nftTable = "lab"

// syncAntiSpoof rebuilds the anti-spoofing table. Callers hold f.mu.
func (f *Fabric) syncAntiSpoof() error {
	c := f.nft
	t := &nftables.Table{Family: nftables.TableFamilyBridge, Name: nftTable}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	check := c.AddChain(&nftables.Chain{Name: "antispoof", Table: t})
	accept := nftables.ChainPolicyAccept
	for _, h := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"forward", nftables.ChainHookForward}, {"input", nftables.ChainHookInput}} {
		ch := c.AddChain(&nftables.Chain{Name: h.name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: h.hook, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
			&expr.Verdict{Kind: expr.VerdictJump, Chain: check.Name}}})
	}
	out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: noRedirectExprs()})

	ports := make([]*port, 0, len(f.ports))
	for _, p := range f.ports {
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].name < ports[j].name })
	// Set IDs are assigned here rather than by the library, whose counter
	// is a package variable shared by every connection.
	id := uint32(1)
	for _, p := range ports {
		v4, v6 := f.allowedSources(p)
		for _, fam := range []struct {
			suffix string
			key    nftables.SetDatatype
			allow  []netip.Prefix
			proto  uint16
			offset uint32
		}{
			{"_v4", nftables.TypeIPAddr, v4, unix.ETH_P_IP, 12},
			{"_v6", nftables.TypeIP6Addr, v6, unix.ETH_P_IPV6, 8},
		} {
			s := &nftables.Set{Table: t, Name: p.name + fam.suffix, ID: id, KeyType: fam.key, Interval: true}
			id++
			if err := c.AddSet(s, intervalElements(fam.allow)); err != nil {
				return fmt.Errorf("anti-spoofing set %s: %w", s.Name, err)
			}
			c.AddRule(&nftables.Rule{Table: t, Chain: check, Exprs: spoofExprs(p.name, fam.proto, fam.offset, fam.key.Bytes, s)})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("apply anti-spoofing rules in the fabric: %w", err)
	}
	return nil
}

// allowedSources are the sources port p may send from, per family.
func (f *Fabric) allowedSources(p *port) (v4, v6 []netip.Prefix) {
	v6 = []netip.Prefix{netip.MustParsePrefix("fe80::/10"), hostPrefix(netip.IPv6Unspecified())}
	add := func(pf netip.Prefix) {
		if pf.Addr().Is4() {
			v4 = append(v4, pf)
		} else {
			v6 = append(v6, pf)
		}
	}
	for _, a := range p.addrs() {
		if a.IsValid() {
			add(hostPrefix(a))
		}
	}
	for _, pf := range f.routedTo(p) {
		add(pf)
	}
	return v4, v6
}

// spoofExprs: iifname == port && meta protocol == proto && saddr not in
// set → count, drop.
func spoofExprs(portName string, proto uint16, offset, length uint32, s *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(portName)},
		&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(proto >> 8), byte(proto)}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: length},
		&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, Invert: true},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

// noRedirectExprs: meta protocol ip6, meta l4proto icmpv6, type 137 → drop.
func noRedirectExprs() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x86, 0xdd}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{137}},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

// ifname is an interface name as the kernel compares it: NUL-padded to
// IFNAMSIZ.
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

// intervalElements turns prefixes into the elements of an interval set:
// merged, sorted ranges as start and (exclusive) end elements; a range
// reaching the family's last address has no end element.
func intervalElements(ps []netip.Prefix) []nftables.SetElement {
	type span struct{ lo, hi netip.Addr }
	spans := make([]span, 0, len(ps))
	for _, p := range ps {
		p = p.Masked()
		spans = append(spans, span{p.Addr(), lastAddr(p)})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.lo.Compare(b.lo) })
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			if next := last.hi.Next(); !next.IsValid() || s.lo.Compare(next) <= 0 {
				if s.hi.Compare(last.hi) > 0 {
					last.hi = s.hi
				}
				continue
			}
		}
		merged = append(merged, s)
	}
	var els []nftables.SetElement
	for _, s := range merged {
		els = append(els, nftables.SetElement{Key: s.lo.AsSlice()})
		if end := s.hi.Next(); end.IsValid() {
			els = append(els, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return els
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
