package ipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/terway-sim/terway/daemon/cloud"
)

// poolCore is what the two pools of ENIs share: MultiIP hands out the
// addresses of shared ENIs, ENIPool whole ENIs. Each embeds a poolCore
// over its record of an attached ENI (E) and the resource it hands to a
// pod (R; for ENIPool the ENI itself). The core keeps the owners and the
// waiters (Allocate's fast path, Release, Holds, Reassign, serving the
// queue), the stray sync and the restore of what the cloud shows. How a
// pool picks an idle resource, grows and shrinks stays with it; the core
// asks it through eniPolicy.
type poolCore[E eniRecord[R], R resource] struct {
	// pol is the pool that embeds the core.
	pol    eniPolicy[R]
	cloud  Cloud
	vsw    VSwitches
	clock  clock.WithTicker
	log    *slog.Logger
	events Events
	kickc  chan struct{}
	ops    *ops

	// mu guards the fields below and those of the embedding pool.
	mu      sync.Mutex
	enis    map[string]E
	owners  holdings[R] // owner → the resource it holds or has reserved
	waiters []*waiter
	// creating counts ENIs being created.
	creating int
	// No ENI is created before createPause. createPauseHard: the pause is
	// the instance's ENI limit, which waiting a backoff does not cure
	// (slotsChangedLocked lifts it).
	createPause     time.Time
	createPauseHard bool
	// failures counts consecutive failures to grow, for the backoff.
	failures int
	// starved is set while the cloud answers that the vSwitch is dry.
	starved    bool
	lastChange time.Time
	// unplanned is when the first demand or release arrived that no plan
	// has looked at yet (zero: none): the batch window runs from it.
	unplanned time.Time
	seq       uint64
	// pendingENIs are ENIs this pool's creations made and have not
	// finished with; strays the unknown ENIs of ours being adopted or
	// released (strays.go).
	pendingENIs map[string]bool
	strays      map[string]bool
	// syncs counts the completed sync rounds (Stats.Syncs).
	syncs int
}

// resource is what a pool hands to a pod.
type resource interface {
	claimer
	// podIP is the address the pod gets.
	podIP() IP
	// isReleasing reports whether the resource is being given back to the
	// cloud (unassigned, or its ENI released): it is no longer anyone's.
	isReleasing() bool
}

// eniRecord is a pool's record of an attached ENI.
type eniRecord[R any] interface {
	// resources lists what the pool hands out of the ENI.
	resources() []R
}

// eniPolicy is what each pool decides for itself where the core asks.
type eniPolicy[R any] interface {
	// takeIdleLocked gives owner an idle resource, or returns nil.
	takeIdleLocked(owner string) R
	// idleLocked counts the idle, unreserved resources at now;
	// inflightLocked those that the calls in flight will add.
	idleLocked(now time.Time) int
	inflightLocked() int
	// plan serves waiters and starts the calls that grow or shrink the
	// pool; sync reconciles it with the cloud (the periodic round).
	plan()
	sync(ctx context.Context)
	// addrsOf lists the IPv4 addresses of e, an ENI found in the cloud,
	// that the pool hands out: metadata must show them before the pool
	// takes e in.
	addrsOf(e cloud.ENI) []netip.Addr
	// adoptLocked takes e in as metadata shows it (m). holdings, when a
	// restore gives them, say which IPv6 address each IPv4 one had.
	adoptLocked(e cloud.ENI, m cloud.ENIMeta, holdings []Holding)
	// strayWantedLocked reports whether the pool has room and use for a
	// stray ENI with n addresses.
	strayWantedLocked(n int) bool
}

// newPoolCore returns the core of pol, which embeds it.
func newPoolCore[E eniRecord[R], R resource](pol eniPolicy[R], cl Cloud, vsw VSwitches, c clock.WithTicker, log *slog.Logger, ev Events) poolCore[E, R] {
	if c == nil {
		c = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ev == nil {
		ev = nopEvents{}
	}
	return poolCore[E, R]{pol: pol, cloud: cl, vsw: vsw, clock: c, log: log, events: ev, kickc: make(chan struct{}, 1), ops: newOps(),
		enis: map[string]E{}, owners: holdings[R]{}, lastChange: c.Now()}
}

// allocate is the pools' Allocate: the resource owner already holds (a
// retried ADD) or has reserved (sticky), an idle one the pool gives it,
// or a new one the loop makes. A caller that gives up does not lose the
// resource: it lands in the pool. what names the resource in errors.
func (c *poolCore[E, R]) allocate(ctx context.Context, owner, what string) (IP, error) {
	var none R
	c.mu.Lock()
	if r, ok := c.owners[owner]; ok && !r.isReleasing() {
		c.owners.take(r, owner)
		ip := r.podIP()
		c.mu.Unlock()
		return ip, nil
	}
	if r := c.pol.takeIdleLocked(owner); r != none {
		ip := r.podIP()
		c.noteUnplannedLocked()
		c.mu.Unlock()
		c.kick()
		return ip, nil
	}
	w := &waiter{owner: owner, ch: make(chan result, 1)}
	c.waiters = append(c.waiters, w)
	c.noteUnplannedLocked()
	c.mu.Unlock()
	c.kick()
	select {
	case r := <-w.ch:
		return r.ip, r.err
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case r := <-w.ch: // delivered meanwhile: give it back
			if r.err == nil {
				c.releaseLocked(owner, time.Time{})
			}
		default:
			w.done = true
		}
		return IP{}, fmt.Errorf("allocate %s for %s: %w", what, owner, ctx.Err())
	}
}

// takeLocked gives best, when a pool's search found one, to owner in use:
// a change of the pool. It returns best.
func (c *poolCore[E, R]) takeLocked(best R, owner string, now time.Time) R {
	var none R
	if best != none {
		c.owners.take(best, owner)
		c.lastChange = now
	}
	return best
}

// demandLocked serves the waiters it can from idle resources, then
// returns the idle, unreserved resources left and the deficit: the
// waiters still waiting and what the warm pool of minIdle misses, less
// what the calls in flight will add.
func (c *poolCore[E, R]) demandLocked(now time.Time, minIdle int) (idle, deficit int) {
	c.serveLocked()
	idle = c.pol.idleLocked(now)
	return idle, len(c.waiters) + max(0, minIdle-idle) - c.pol.inflightLocked()
}

// serveLocked hands idle resources to waiters in arrival order.
func (c *poolCore[E, R]) serveLocked() {
	var none R
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.done {
			continue
		}
		r := c.pol.takeIdleLocked(w.owner)
		if r == none {
			kept = append(kept, w)
			continue
		}
		w.ch <- result{ip: r.podIP()}
	}
	for i := len(kept); i < len(c.waiters); i++ {
		c.waiters[i] = nil
	}
	c.waiters = kept
}

// waitingLocked counts the waiters that still wait.
func (c *poolCore[E, R]) waitingLocked() int {
	n := 0
	for _, w := range c.waiters {
		if !w.done {
			n++
		}
	}
	return n
}

// failAll fails every waiter with err (the pool stops).
func (c *poolCore[E, R]) failAll(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if !w.done {
			w.ch <- result{err: err}
		}
	}
	c.waiters = nil
}

// Release gives owner's address (for ENIPool its ENI, which stays
// attached) back to the pool. With stickyUntil in the future it stays
// reserved for owner until then (StatefulSet pods get their address
// back). Releasing an owner that holds nothing is a no-op.
func (c *poolCore[E, R]) Release(owner string, stickyUntil time.Time) {
	c.mu.Lock()
	c.releaseLocked(owner, stickyUntil)
	c.mu.Unlock()
	c.kick()
}

func (c *poolCore[E, R]) releaseLocked(owner string, stickyUntil time.Time) {
	r, ok := c.owners[owner]
	if !ok || r.isReleasing() {
		return
	}
	now := c.clock.Now()
	c.owners.release(owner, stickyUntil, now)
	c.lastChange = now
	c.noteUnplannedLocked()
}

// noteUnplannedLocked records a demand or a release that the next plan
// must look at: the batch window starts with the first of them.
func (c *poolCore[E, R]) noteUnplannedLocked() {
	if c.unplanned.IsZero() {
		c.unplanned = c.clock.Now()
	}
}

// Holds reports the address (the ENI) owner holds or has reserved.
func (c *poolCore[E, R]) Holds(owner string) (IP, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.owners[owner]
	if !ok {
		return IP{}, false
	}
	return r.podIP(), true
}

// Owners lists who holds or has reserved an address (an ENI).
func (c *poolCore[E, R]) Owners() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owners.owners()
}

// Starved reports whether the pool's last growth failed because the cloud
// had no addresses (cleared by the next successful growth).
func (c *poolCore[E, R]) Starved() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starved
}

// The states of a pool's resource that Addresses shows.
const (
	stateIdle      = "idle"
	stateInUse     = "inuse"
	stateReserved  = "reserved"
	stateReleasing = "releasing"
)

// stateOf is r's state at now.
func stateOf[R resource](r R, now time.Time) string {
	c := r.claimOf()
	switch {
	case c.inUse:
		return stateInUse
	case r.isReleasing():
		return stateReleasing
	case c.reserved(now):
		return stateReserved
	}
	return stateIdle
}

// Stats returns the pool's counts (for ENIPool addresses are ENIs).
func (c *poolCore[E, R]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{ENIs: len(c.enis), Inflight: c.pol.inflightLocked(), Waiting: len(c.waiters), Starved: c.starved, Syncs: c.syncs,
		Pending: !c.unplanned.IsZero()}
	now := c.clock.Now()
	for _, e := range c.enis {
		for _, r := range e.resources() {
			st.Total++
			switch stateOf(r, now) {
			case stateInUse:
				st.InUse++
			case stateReserved:
				st.Reserved++
			case stateIdle:
				st.Idle++
			}
		}
	}
	return st
}

// Addresses lists every address the pool holds (for ENIPool the ENIs)
// with its state and owner, ordered by ENI and address.
func (c *poolCore[E, R]) Addresses() []Address {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var out []Address
	for _, e := range c.enis {
		for _, r := range e.resources() {
			out = append(out, Address{IP: r.podIP(), State: stateOf(r, now), Owner: r.claimOf().owner})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].IP.ENIID != out[j].IP.ENIID {
			return out[i].IP.ENIID < out[j].IP.ENIID
		}
		return out[i].IP.IPv4.Less(out[j].IP.IPv4)
	})
	return out
}

// restoreHoldingsLocked marks the resources of holdings taken as the
// store says, find locating each, and returns the holdings it could not:
// their resource is gone or another holding has it. Optional holdings are
// never broken.
func (c *poolCore[E, R]) restoreHoldingsLocked(holdings []Holding, now time.Time, find func(Holding) R) []Holding {
	var none R
	var broken []Holding
	for _, h := range holdings {
		r := find(h)
		if r == none || r.claimOf().owner != "" {
			if !h.Optional {
				broken = append(broken, h)
			}
			continue
		}
		c.owners.restore(r, h.Owner, h.ReservedUntil, now)
	}
	return broken
}

// kick asks the loop to plan now (coalesced).
func (c *poolCore[E, R]) kick() {
	select {
	case c.kickc <- struct{}{}:
	default:
	}
}

// syncRound is the periodic round of Run: a sync, the plan after it, and
// the count of rounds completed (Stats.Syncs).
func (c *poolCore[E, R]) syncRound(ctx context.Context) {
	c.pol.sync(ctx)
	c.pol.plan()
	c.mu.Lock()
	c.syncs++
	c.mu.Unlock()
}

// Close cancels the pool's cloud calls in flight and waits until they
// have returned; the pool starts no new ones. The pool's state stays
// readable. Run closes the pool when it returns; Close is for a pool
// that never ran. It may be called more than once.
func (c *poolCore[E, R]) Close() { c.ops.stop() }

// nextKey is a new intent key for a cloud call of kind.
func (c *poolCore[E, R]) nextKey(kind string) string {
	c.seq++
	return fmt.Sprintf("%s/%d/%d", kind, c.clock.Now().UnixNano(), c.seq)
}

// slotsChangedLocked lifts a pause for the instance's ENI limit: the ENIs
// attached to the instance changed (one released, or an unknown one
// adopted), so the limit the cloud answered may no longer hold. Unknown
// ENIs of ours are what makes the pool's count fall short of the cloud's:
// after the sync released them, waiting out the rest of ENILimitInhibit
// refused pods on a node with free slots.
func (c *poolCore[E, R]) slotsChangedLocked() {
	if c.createPauseHard {
		c.createPause, c.createPauseHard = time.Time{}, false
	}
}
