package fabric

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/nlsafe"
)

// The internet is one more namespace, "<name>.internet", standing for the
// public network: a veth joins it to the fabric, <name>i in the fabric
// with natGatewayAddr, eth0 in the internet with InternetAddr and a
// default route back. The fabric is the VPC's NAT gateway for EIPs: one
// nftables table of family ip, rebuilt whole on every EIPsChanged,
//
//	table ip labnat {
//	  map eip2priv { type ipv4_addr : ipv4_addr; elements = { <eip> : <private>, ... } }
//	  map priv2eip { type ipv4_addr : ipv4_addr; elements = { <private> : <eip>, ... } }
//	  set natted   { type ipv4_addr; elements = { <private>, ... } }
//	  chain pre  { type nat hook prerouting priority dstnat;  iifname "<name>i" dnat to ip daddr map @eip2priv }
//	  chain post { type nat hook postrouting priority srcnat; oifname "<name>i" snat to ip saddr map @priv2eip }
//	  chain fwd  { type filter hook forward priority filter;
//	               oifname "<name>i" ip saddr != @natted counter drop
//	               iifname "<name>i" ip daddr != @natted counter drop }
//	}
//
// so a private address with an EIP is reached at the EIP and leaves with
// it as source (1:1 NAT), and an address without one has no path to the
// internet and from it: a VPC without a NAT gateway's SNAT entries gives
// a pod none either, and the lab models no SNAT gateway so that a test
// seeing the internet at all proves the EIP. Connections of an EIP that
// stopped forwarding are dropped from conntrack, as the real binding
// ends them.

const (
	internetSuffix = ".internet"
	natTable       = "labnat"
)

var (
	// internetPrefix is TEST-NET-3 (RFC 5737): it exists only inside the
	// lab's namespaces.
	internetPrefix = netip.MustParsePrefix("203.0.113.0/24")
	natGatewayAddr = netip.MustParseAddr("203.0.113.1")
	// InternetAddr is the internet namespace's address: a test's public
	// client or server listens or dials from it.
	InternetAddr = netip.MustParseAddr("203.0.113.2")
)

func internetNSPath(dir, name string) string { return filepath.Join(dir, name+internetSuffix) }

// InternetNetNSPath is the internet namespace's file.
func (f *Fabric) InternetNetNSPath() string { return internetNSPath(f.dir, f.name) }

// internetLink is the fabric's end of the veth to the internet.
func (f *Fabric) internetLink() string { return f.name + "i" }

// setupInternet creates the internet namespace and its veth, and the
// empty NAT table.
func (f *Fabric) setupInternet() error {
	path := f.InternetNetNSPath()
	if err := createNetNS(path); err != nil {
		return err
	}
	inet, err := nlsafe.Open(path)
	if err != nil {
		return fmt.Errorf("internet: %w", err)
	}
	defer inet.Close()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open internet netns: %w", err)
	}
	defer unix.Close(fd)
	err = f.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: f.internetLink()}, PeerName: "eth0",
		PeerNamespace: netlink.NsFd(fd)})
	if err != nil {
		return fmt.Errorf("veth fabric-internet: %w", err)
	}
	ends := []struct {
		h    *nlsafe.Handle
		name string
		addr netip.Addr
	}{{f.nl, f.internetLink(), natGatewayAddr}, {inet, "eth0", InternetAddr}, {inet, "lo", netip.Addr{}}}
	for _, e := range ends {
		l, err := e.h.LinkByName(e.name)
		if err != nil {
			return fmt.Errorf("internet link %s: %w", e.name, err)
		}
		if e.addr.IsValid() {
			if err := e.h.AddrAdd(l, &netlink.Addr{IPNet: nlsafe.IPNet(netip.PrefixFrom(e.addr, internetPrefix.Bits()))}); err != nil {
				return fmt.Errorf("address %s on %s: %w", e.addr, e.name, err)
			}
		}
		if err := e.h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", e.name, err)
		}
	}
	eth0, err := inet.LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := inet.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: natGatewayAddr.AsSlice()}); err != nil {
		return fmt.Errorf("internet default route: %w", err)
	}
	return f.syncNAT()
}

// EIPsChanged implements fakecloud.Hypervisor: the NAT gateway's mappings
// become exactly the forwarding EIPs.
func (f *Fabric) EIPsChanged(_ context.Context, eips []fakecloud.EIPInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errClosed
	}
	gone := slices.DeleteFunc(slices.Clone(f.eips), func(e fakecloud.EIPInfo) bool { return slices.Contains(eips, e) })
	f.eips = slices.Clone(eips)
	return errors.Join(f.syncNAT(), f.forgetConnections(gone))
}

// syncNAT rebuilds the NAT table from f.eips. Callers hold f.mu.
func (f *Fabric) syncNAT() error {
	c := f.nft
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: natTable}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	var toPriv, toEIP, natted []nftables.SetElement
	for _, e := range f.eips {
		if !e.Address.Is4() || !e.PrivateIP.Is4() {
			continue
		}
		toPriv = append(toPriv, nftables.SetElement{Key: e.Address.AsSlice(), Val: e.PrivateIP.AsSlice()})
		toEIP = append(toEIP, nftables.SetElement{Key: e.PrivateIP.AsSlice(), Val: e.Address.AsSlice()})
		natted = append(natted, nftables.SetElement{Key: e.PrivateIP.AsSlice()})
	}
	sets := []*nftables.Set{
		{Table: t, Name: "eip2priv", ID: 1, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeIPAddr},
		{Table: t, Name: "priv2eip", ID: 2, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeIPAddr},
		{Table: t, Name: "natted", ID: 3, KeyType: nftables.TypeIPAddr},
	}
	for i, els := range [][]nftables.SetElement{toPriv, toEIP, natted} {
		if err := c.AddSet(sets[i], els); err != nil {
			return fmt.Errorf("NAT set %s: %w", sets[i].Name, err)
		}
	}
	accept := nftables.ChainPolicyAccept
	chain := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		return c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio, Policy: &accept})
	}
	link := f.internetLink()
	pre := chain("pre", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest)
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: natExprs(expr.MetaKeyIIFNAME, link, 16, sets[0], expr.NATTypeDestNAT)})
	post := chain("post", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource)
	c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: natExprs(expr.MetaKeyOIFNAME, link, 12, sets[1], expr.NATTypeSourceNAT)})
	fwd := chain("fwd", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter)
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: notNattedExprs(expr.MetaKeyOIFNAME, link, 12, sets[2])})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: notNattedExprs(expr.MetaKeyIIFNAME, link, 16, sets[2])})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("apply the NAT gateway's rules in the fabric: %w", err)
	}
	return nil
}

// natExprs: <dir>ifname == link → the address at offset (16 daddr, 12
// saddr) looked up in map m → NAT of type typ to the result.
func natExprs(dir expr.MetaKey, link string, offset uint32, m *nftables.Set, typ expr.NATType) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: dir, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(link)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: m.Name, SetID: m.ID, DestRegister: 1, IsDestRegSet: true},
		&expr.NAT{Type: typ, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
	}
}

// notNattedExprs: <dir>ifname == link && the address at offset not in s
// → count, drop.
func notNattedExprs(dir expr.MetaKey, link string, offset uint32, s *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: dir, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(link)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, Invert: true},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

// forgetConnections drops the fabric's conntrack entries of EIPs that
// stopped forwarding: without it a flow NATed before would go on. A
// kernel without conntrack over netlink keeps them (logged).
func (f *Fabric) forgetConnections(gone []fakecloud.EIPInfo) error {
	for _, e := range gone {
		for _, m := range []struct {
			field netlink.ConntrackFilterType
			addr  netip.Addr
		}{{netlink.ConntrackOrigDstIP, e.Address}, {netlink.ConntrackOrigSrcIP, e.PrivateIP}} {
			flt := &netlink.ConntrackFilter{}
			if err := flt.AddIP(m.field, m.addr.AsSlice()); err != nil {
				return err
			}
			if _, err := f.nl.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, flt); err != nil {
				f.log.Warn("conntrack entries of a removed EIP stay", "eip", e.Address, "err", err)
				return nil
			}
		}
	}
	return nil
}
