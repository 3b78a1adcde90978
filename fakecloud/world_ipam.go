package fakecloud

import (
	"encoding/binary"
	"net/netip"
)

// pool4 hands out the IPv4 addresses of one vSwitch. A bitmap marks every
// address that is taken (reserved or assigned); allocation is next-fit
// from a rotating cursor so a just-released address is not the next one
// handed out, which is closer to ECS than lowest-free.
type pool4 struct {
	prefix netip.Prefix
	base   uint32
	size   uint32
	used   []uint64
	free   int
	cursor uint32
	// reserved counts addresses taken by the platform, never released.
	reserved map[uint32]bool
}

func newPool4(p netip.Prefix, extra []string) *pool4 {
	p = p.Masked()
	size := uint32(1) << (32 - p.Bits())
	b := p.Addr().As4()
	pl := &pool4{
		prefix:   p,
		base:     binary.BigEndian.Uint32(b[:]),
		size:     size,
		used:     make([]uint64, (size+63)/64),
		free:     int(size),
		reserved: map[uint32]bool{},
	}
	// ECS reserves the first and the last three addresses of a vSwitch.
	for _, off := range []uint32{0, size - 3, size - 2, size - 1} {
		pl.reserve(off)
	}
	for _, r := range extra {
		rp, err := parseAddrOrPrefix(r)
		if err != nil || !rp.Addr().Is4() {
			continue
		}
		for a := rp.Addr(); rp.Contains(a); a = a.Next() {
			if off, ok := pl.offset(a); ok {
				pl.reserve(off)
			}
		}
	}
	pl.cursor = 1
	return pl
}

// gateway is the vSwitch gateway: the first of the last three reserved
// addresses (.253 of a /24).
func (p *pool4) gateway() netip.Addr { return p.addr(p.size - 3) }

func (p *pool4) reserve(off uint32) {
	if !p.isUsed(off) {
		p.set(off)
	}
	p.reserved[off] = true
}

func (p *pool4) offset(a netip.Addr) (uint32, bool) {
	if !a.Is4() || !p.prefix.Contains(a) {
		return 0, false
	}
	b := a.As4()
	return binary.BigEndian.Uint32(b[:]) - p.base, true
}

func (p *pool4) addr(off uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], p.base+off)
	return netip.AddrFrom4(b)
}

func (p *pool4) isUsed(off uint32) bool { return p.used[off/64]&(1<<(off%64)) != 0 }
func (p *pool4) set(off uint32)         { p.used[off/64] |= 1 << (off % 64); p.free-- }
func (p *pool4) clear(off uint32)       { p.used[off/64] &^= 1 << (off % 64); p.free++ }

// available is the vSwitch's AvailableIpAddressCount.
func (p *pool4) available() int { return p.free }

// take allocates n addresses or none.
func (p *pool4) take(n int) ([]netip.Addr, bool) {
	if n > p.free {
		return nil, false
	}
	out := make([]netip.Addr, 0, n)
	off := p.cursor
	for len(out) < n {
		off %= p.size
		word := p.used[off/64]
		if off%64 == 0 && word == ^uint64(0) {
			off += 64
			continue
		}
		if word&(1<<(off%64)) == 0 {
			p.set(off)
			out = append(out, p.addr(off))
		}
		off++
	}
	p.cursor = off % p.size
	return out, true
}

// claim marks a specific address taken; it fails if the address is outside
// the vSwitch, reserved or already used.
func (p *pool4) claim(a netip.Addr) error {
	off, ok := p.offset(a)
	if !ok {
		return errNotInCIDR
	}
	if p.reserved[off] {
		return errReserved
	}
	if p.isUsed(off) {
		return errInUse
	}
	p.set(off)
	return nil
}

// release returns an address; releasing a reserved or free one is a no-op.
func (p *pool4) release(a netip.Addr) {
	off, ok := p.offset(a)
	if !ok || p.reserved[off] || !p.isUsed(off) {
		return
	}
	p.clear(off)
}

// pool6 hands out addresses of a vSwitch's IPv6 /64. The space is too
// large for a bitmap; a set of used addresses and a counter do.
type pool6 struct {
	prefix netip.Prefix
	used   map[netip.Addr]bool
	next   uint64
}

func newPool6(p netip.Prefix) *pool6 {
	return &pool6{prefix: p.Masked(), used: map[netip.Addr]bool{}, next: 0x1000}
}

func (p *pool6) addr(n uint64) netip.Addr {
	b := p.prefix.Addr().As16()
	binary.BigEndian.PutUint64(b[8:], n)
	return netip.AddrFrom16(b)
}

// gateway follows the IPv4 convention of ECS: the vSwitch router answers
// on a fixed low address of the /64.
func (p *pool6) gateway() netip.Addr { return p.addr(0xfffd) }

func (p *pool6) take(n int) []netip.Addr {
	out := make([]netip.Addr, 0, n)
	for len(out) < n {
		a := p.addr(p.next)
		p.next++
		if p.next == 0xfffd {
			p.next++
		}
		if !p.used[a] {
			p.used[a] = true
			out = append(out, a)
		}
	}
	return out
}

func (p *pool6) claim(a netip.Addr) error {
	if !a.Is6() || !p.prefix.Contains(a) {
		return errNotInCIDR
	}
	if a == p.gateway() || a == p.prefix.Addr() {
		return errReserved
	}
	if p.used[a] {
		return errInUse
	}
	p.used[a] = true
	return nil
}

func (p *pool6) release(a netip.Addr) { delete(p.used, a) }

type ipamError string

func (e ipamError) Error() string { return string(e) }

const (
	errNotInCIDR ipamError = "address is not in the vSwitch CIDR"
	errReserved  ipamError = "address is reserved"
	errInUse     ipamError = "address is already in use"
)
