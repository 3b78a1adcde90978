package ipam

// The pools' Reassign moves what one owner holds to another in place, in
// use, so that no allocation can take it in between: GC uses it when the
// pod a record names is gone but the address is still configured for
// another (a stale record restored from an older store).

// Reassign moves from's resource to to, in use. It reports false when
// from holds nothing (or what it held is being given back) or to already
// holds something.
func (c *poolCore[E, R]) Reassign(from, to string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.owners[from]; ok && r.isReleasing() {
		return false
	}
	return c.owners.reassign(from, to)
}

// Reassign moves from's address to to, in use (see poolCore.Reassign).
func (p *PodCIDR) Reassign(from, to string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held.reassign(from, to)
}
