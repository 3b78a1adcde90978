package ipam

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// PodCIDR hands out the addresses of the node's podCIDR (VPC mode): the
// VPC route table sends the CIDR to this node, the pod's traffic is
// routed, no cloud call is needed. The network and broadcast addresses
// (IPv4) are never handed out; allocation is next-fit so that a released
// address is not reused at once.
type PodCIDR struct {
	clock    clock.Clock
	prefix   netip.Prefix
	cooldown time.Duration

	mu   sync.Mutex
	held holdings[*cidrSlot]
	// byAddr has the addresses handed out since the start: held,
	// reserved, or free (cooling down after their release).
	byAddr map[netip.Addr]*cidrSlot
	cursor netip.Addr
}

type cidrSlot struct {
	addr netip.Addr
	claim
}

// LinkLocalGateway is the gateway pods of VPC mode route through: the
// host side of their veth answers for it.
var LinkLocalGateway = netip.MustParseAddr("169.254.1.1")

// NewPodCIDR returns an allocator over prefix (an IPv4 CIDR of at most /30).
func NewPodCIDR(prefix netip.Prefix, cooldown time.Duration, c clock.Clock) (*PodCIDR, error) {
	prefix = prefix.Masked()
	if !prefix.IsValid() || !prefix.Addr().Is4() || prefix.Bits() > 30 {
		return nil, fmt.Errorf("podCIDR %s must be an IPv4 CIDR of /30 or larger", prefix)
	}
	if c == nil {
		c = clock.RealClock{}
	}
	return &PodCIDR{clock: c, prefix: prefix, cooldown: cooldown, held: holdings[*cidrSlot]{},
		byAddr: map[netip.Addr]*cidrSlot{}, cursor: prefix.Addr()}, nil
}

func (p *PodCIDR) ip(s *cidrSlot) IP {
	return IP{IPv4: s.addr, Gateway4: LinkLocalGateway, CIDR4: p.prefix}
}

func (p *PodCIDR) usable(a netip.Addr) bool {
	if !p.prefix.Contains(a) || a == p.prefix.Addr() {
		return false
	}
	last := lastAddr(p.prefix)
	return a != last
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Allocate returns owner's address: held, reserved, or the next free one.
func (p *PodCIDR) Allocate(owner string) (IP, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if s, ok := p.held[owner]; ok {
		p.held.take(s, owner)
		return p.ip(s), nil
	}
	a := p.cursor
	size := 1 << (32 - p.prefix.Bits())
	for i := 0; i < size; i++ {
		a = a.Next()
		if !p.prefix.Contains(a) {
			a = p.prefix.Addr()
			continue
		}
		if !p.usable(a) {
			continue
		}
		s := p.byAddr[a]
		if s == nil {
			s = &cidrSlot{addr: a}
		} else if ok, _ := s.availableTo(owner, now, p.cooldown); !ok {
			continue
		}
		p.held.take(s, owner)
		p.byAddr[a] = s
		p.cursor = a
		return p.ip(s), nil
	}
	return IP{}, fmt.Errorf("%w: podCIDR %s is full", ErrNoCapacity, p.prefix)
}

// Release frees owner's address, or keeps it reserved until stickyUntil.
func (p *PodCIDR) Release(owner string, stickyUntil time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held.release(owner, stickyUntil, p.clock.Now())
}

// Holds reports owner's address.
func (p *PodCIDR) Holds(owner string) (IP, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.held[owner]
	if !ok {
		return IP{}, false
	}
	return p.ip(s), true
}

// Owners lists who holds or has reserved an address.
func (p *PodCIDR) Owners() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held.owners()
}

// Restore marks the addresses of holdings taken; holdings outside the
// podCIDR (it changed) are reported broken.
func (p *PodCIDR) Restore(holdings []Holding) []Holding {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	var broken []Holding
	for _, h := range holdings {
		if s := p.byAddr[h.IPv4]; !p.usable(h.IPv4) || (s != nil && s.owner != "") {
			if !h.Optional {
				broken = append(broken, h)
			}
			continue
		}
		s := &cidrSlot{addr: h.IPv4}
		p.held.restore(s, h.Owner, h.ReservedUntil, now)
		p.byAddr[h.IPv4] = s
	}
	return broken
}

// Contains reports whether a is an address of the podCIDR.
func (p *PodCIDR) Contains(a netip.Addr) bool { return p.prefix.Contains(a) }

// Size is how many pod addresses the podCIDR holds.
func (p *PodCIDR) Size() int { return 1<<(32-p.prefix.Bits()) - 2 }
