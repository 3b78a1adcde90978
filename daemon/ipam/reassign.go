package ipam

import "time"

// The pools' Reassign moves what one owner holds to another in place, in
// use, so that no allocation can take it in between: GC uses it when the
// pod a record names is gone but the address is still configured for
// another (a stale record restored from an older store).

// Reassign moves from's address to to, in use. It reports false when from
// holds nothing or to already holds an address.
func (p *MultiIP) Reassign(from, to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.owners[from]
	if s == nil || p.owners[to] != nil || s.state == ipReleasing {
		return false
	}
	delete(p.owners, from)
	s.owner, s.state, s.reservedUntil = to, ipInUse, time.Time{}
	p.owners[to] = s
	return true
}

// Reassign moves from's ENI to to, in use (see MultiIP.Reassign).
func (p *ENIPool) Reassign(from, to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.owners[from]
	if r == nil || p.owners[to] != nil || r.releasing {
		return false
	}
	delete(p.owners, from)
	r.owner, r.inUse, r.reservedUntil = to, true, time.Time{}
	p.owners[to] = r
	return true
}

// Reassign moves from's address to to, in use (see MultiIP.Reassign).
func (p *PodCIDR) Reassign(from, to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.byOwner[from]
	if s == nil || p.byOwner[to] != nil {
		return false
	}
	delete(p.byOwner, from)
	s.owner, s.inUse, s.reservedUntil = to, true, time.Time{}
	p.byOwner[to] = s
	return true
}
