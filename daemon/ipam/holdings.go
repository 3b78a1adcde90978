package ipam

import (
	"sort"
	"time"
)

// The owner bookkeeping of the pools, kept once: each resource a pool
// hands out (a shared-ENI address, a whole ENI, a podCIDR address)
// embeds a claim, and the pool indexes its claimed resources by owner in
// holdings. A released resource may stay reserved for its owner (sticky
// pods get it back) and waits a cooldown before anyone else gets it. What
// else a resource goes through (an ENI or address being given back to
// the cloud) stays with its pool, which checks it before calling here.

// claim says who holds or has reserved one resource, and when it was
// last given back.
type claim struct {
	owner string
	inUse bool
	// reservedUntil keeps a released resource for owner until then.
	reservedUntil time.Time
	releasedAt    time.Time
}

func (c *claim) claimOf() *claim { return c }

// reserved reports whether the resource is released but still kept for
// its owner at now.
func (c *claim) reserved(now time.Time) bool {
	return !c.inUse && c.owner != "" && now.Before(c.reservedUntil)
}

// availableTo reports whether owner may take the resource at now: it is
// not in use, not reserved for another owner, and has cooled down since
// its release, unless it is owner's own (own: a reservation, maybe
// expired, that owner should get back before anything else).
func (c *claim) availableTo(owner string, now time.Time, cooldown time.Duration) (ok, own bool) {
	if c.inUse || (c.owner != "" && c.owner != owner && now.Before(c.reservedUntil)) {
		return false, false
	}
	if c.owner == owner {
		return true, true
	}
	return cooldown <= 0 || !now.Before(c.releasedAt.Add(cooldown)), false
}

// claimer is a pool resource that embeds its claim.
type claimer interface {
	comparable
	claimOf() *claim
}

// holdings indexes a pool's resources by the owner that holds or has
// reserved them. The pool's mutex guards it and the claims.
type holdings[R claimer] map[string]R

// owners lists who holds or has reserved a resource, sorted.
func (h holdings[R]) owners() []string {
	out := make([]string, 0, len(h))
	for o := range h {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// take gives r to owner, in use. Another owner's claim on r can only be
// an expired reservation (availableTo): that owner holds nothing now.
func (h holdings[R]) take(r R, owner string) {
	c := r.claimOf()
	if c.owner != "" && c.owner != owner {
		delete(h, c.owner)
	}
	c.owner, c.inUse, c.reservedUntil = owner, true, time.Time{}
	h[owner] = r
}

// release gives owner's resource back at now: reserved for owner until
// stickyUntil when that is in the future, else free (and cooling down).
// Releasing an owner that holds nothing is a no-op.
func (h holdings[R]) release(owner string, stickyUntil, now time.Time) {
	r, ok := h[owner]
	if !ok {
		return
	}
	c := r.claimOf()
	c.inUse, c.releasedAt = false, now
	if stickyUntil.After(now) {
		c.reservedUntil = stickyUntil
		return
	}
	c.owner, c.reservedUntil = "", time.Time{}
	delete(h, owner)
}

// reassign moves from's resource to to, in use. It reports false when
// from holds nothing or to already holds something.
func (h holdings[R]) reassign(from, to string) bool {
	r, ok := h[from]
	if !ok {
		return false
	}
	if _, taken := h[to]; taken {
		return false
	}
	delete(h, from)
	c := r.claimOf()
	c.owner, c.inUse, c.reservedUntil = to, true, time.Time{}
	h[to] = r
	return true
}

// restore marks r held by owner as a store holding says: reserved until
// reservedUntil when that is after now, else in use.
func (h holdings[R]) restore(r R, owner string, reservedUntil, now time.Time) {
	c := r.claimOf()
	c.owner = owner
	if reservedUntil.After(now) {
		c.inUse, c.reservedUntil = false, reservedUntil
	} else {
		c.inUse = true
	}
	h[owner] = r
}

// forget unindexes r, which is gone or going: its owner holds nothing
// any more. The claim keeps the owner's name for display.
func (h holdings[R]) forget(r R) {
	if o := r.claimOf().owner; o != "" && h[o] == r {
		delete(h, o)
	}
}
