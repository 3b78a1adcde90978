package ipam

// The pools' Reassign moves what one owner holds to another in place, in
// use, so that no allocation can take it in between: GC uses it when the
// pod a record names is gone but the address is still configured for
// another (a stale record restored from an older store).

// Reassign moves from's address to to, in use. It reports false when from
// holds nothing or to already holds an address.
func (p *MultiIP) Reassign(from, to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.owners[from]; ok && s.releasing {
		return false
	}
	return p.owners.reassign(from, to)
}

// Reassign moves from's ENI to to, in use (see MultiIP.Reassign).
func (p *ENIPool) Reassign(from, to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.owners[from]; ok && r.releasing {
		return false
	}
	return p.owners.reassign(from, to)
}

// Reassign moves from's address to to, in use (see MultiIP.Reassign).
func (p *PodCIDR) Reassign(from, to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held.reassign(from, to)
}
