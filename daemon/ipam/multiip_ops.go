package ipam

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/terway-sim/terway/daemon/cloud"
)

// startAssignsLocked asks ENIs with room for up to deficit addresses and
// returns what is still missing.
func (p *MultiIP) startAssignsLocked(now time.Time, deficit int) int {
	for _, e := range p.sortedENIsLocked() {
		if deficit <= 0 {
			break
		}
		if e.busy || e.deleting || now.Before(e.inhibit) {
			continue
		}
		room := p.cfg.IPsPerENI - len(e.ips) - e.pending
		k := min(deficit, room, maxPerCall)
		if k <= 0 {
			continue
		}
		e.busy, e.pending = true, k
		e.gen++
		p.inflight += k
		deficit -= k
		key4, key6 := p.nextKey("assign4"), p.nextKey("assign6")
		p.ops.start(func(ctx context.Context) { p.assign(ctx, e, k, key4, key6) })
	}
	return deficit
}

func (p *MultiIP) assign(ctx context.Context, e *eniSlot, k int, key4, key6 string) {
	v4, err := p.cloud.AssignIPv4(ctx, key4, e.ENIMeta, k)
	if cloud.IsExhausted(err) && k > 1 {
		// The vSwitch cannot give k: take what it has left.
		if v, derr := p.cloud.DescribeVSwitch(ctx, e.VSwitchID); derr == nil && v.Available > 0 && v.Available < k {
			p.mu.Lock()
			p.inflight -= k - v.Available
			e.pending = v.Available
			k = v.Available
			p.mu.Unlock()
			v4, err = p.cloud.AssignIPv4(ctx, key4+"/rest", e.ENIMeta, k)
		}
	}
	var v6 []netip.Addr
	if err == nil && p.cfg.DualStack {
		v6, err = p.cloud.AssignIPv6(ctx, key6, e.ENIMeta, k)
		if err != nil && len(v4) > 0 {
			// Without IPv6 the addresses cannot be paired: give them back.
			if uerr := p.cloud.UnassignIPv4(ctx, e.ID, v4); uerr != nil {
				p.events.Warn("DisposeResourceFailed", fmt.Sprintf("unassign %v from %s after an IPv6 failure: %v", v4, e.ID, uerr))
			}
			v4 = nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e.busy, e.pending = false, 0
	p.inflight -= k
	now := p.clock.Now()
	if err != nil {
		p.noteFailureLocked(now, err)
		switch {
		case cloud.IsExhausted(err):
			p.starved = true
			e.inhibit = now.Add(p.cfg.ExhaustedInhibit)
			p.vsw.Block(e.VSwitchID)
			p.log.Warn("vSwitch has no addresses left; ENI inhibited", "eni", e.ID, "vswitch", e.VSwitchID, "until", e.inhibit)
		default:
			e.inhibit = now.Add(p.retryAfterLocked(err))
		}
		p.events.Warn("AllocResourceFailed", fmt.Sprintf("assign %d addresses to %s: %v", k, e.ID, err))
	} else {
		p.failures, p.starved = 0, false
	}
	for i, a := range v4 {
		s := &ipSlot{eni: e, v4: a}
		if p.cfg.DualStack && i < len(v6) {
			s.v6 = v6[i]
		}
		e.ips = append(e.ips, s)
	}
	p.lastChange = now
	p.kick()
}

// roomInFlightLocked is what the ENIs that are busy with a call, or
// being created, can take once their call ends (inhibited ENIs aside).
func (p *MultiIP) roomInFlightLocked(now time.Time) int {
	n := p.createRoom
	for _, e := range p.enis {
		if e.busy && !e.deleting && !now.Before(e.inhibit) {
			n += max(0, p.cfg.IPsPerENI-len(e.ips)-e.pending)
		}
	}
	return n
}

// startCreatesLocked creates ENIs for what the existing ones cannot hold,
// each with the addresses it will carry (up to a whole ENI).
func (p *MultiIP) startCreatesLocked(now time.Time, deficit int) {
	for deficit > 0 && len(p.enis)+p.creating < p.cfg.MaxENI && p.creating < p.cfg.MaxConcurrentCreates &&
		!now.Before(p.createPause) {
		k := min(deficit, p.cfg.IPsPerENI, maxPerCreate)
		if p.cfg.DualStack {
			k = min(k, maxPerCall)
		}
		p.creating++
		p.createGen++
		p.inflight += k
		p.createRoom += p.cfg.IPsPerENI - k
		deficit -= p.cfg.IPsPerENI
		key := p.nextKey("create")
		p.ops.start(func(ctx context.Context) { p.create(ctx, k, key) })
	}
}

func (p *MultiIP) create(ctx context.Context, k int, key string) {
	var ids []string // the ENIs this creation made, while it is in flight
	r, err := p.allocateENI(ctx, k, key, func(id string) { p.mu.Lock(); notePending(&p.pendingENIs, &ids, id); p.mu.Unlock() })
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creating--
	forgetPending(p.pendingENIs, ids)
	p.inflight -= k
	p.createRoom -= p.cfg.IPsPerENI - k
	now := p.clock.Now()
	if err != nil {
		p.noteFailureLocked(now, err)
		p.createPauseHard = false
		switch {
		case cloud.IsExhausted(err) || errors.Is(err, cloud.ErrNoVSwitch):
			p.starved = true
			p.createPause = now.Add(p.failureBackoffLocked())
		case cloud.ErrorCode(err) == cloud.CodeENIPerInstanceLimit:
			p.createPause = now.Add(p.cfg.ENILimitInhibit)
			p.createPauseHard = true
		default:
			p.createPause = now.Add(p.retryAfterLocked(err))
		}
		p.events.Warn("AllocResourceFailed", fmt.Sprintf("create an ENI: %v", err))
		p.kick()
		return
	}
	p.failures, p.starved = 0, false
	p.addENILocked(r.Meta, r.IPv6)
	p.lastChange = now
	p.kick()
}

// allocateENI picks a vSwitch and creates, attaches and waits for an ENI
// with k addresses; a dry vSwitch is blocked and the next one tried.
// created is told the ID of every ENI made (cloud.CreateENIRequest.OnCreated).
func (p *MultiIP) allocateENI(ctx context.Context, k int, key string, created func(string)) (cloud.ReadyENI, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		v, err := p.vsw.Pick(ctx)
		if err != nil {
			if lastErr != nil {
				return cloud.ReadyENI{}, fmt.Errorf("%w (after %w)", err, lastErr)
			}
			return cloud.ReadyENI{}, err
		}
		req := cloud.CreateENIRequest{IntentKey: fmt.Sprintf("%s/%d", key, attempt), VSwitchID: v.ID,
			SecurityGroups: p.cfg.SecurityGroups, SecondaryIPv4: k - 1, Tags: p.cfg.Tags,
			Description: "interface create by terway", ResourceGroupID: p.cfg.ResourceGroupID, OnCreated: created}
		if p.cfg.DualStack {
			req.IPv6 = k
		}
		r, err := p.cloud.AllocateENI(ctx, req)
		if err == nil {
			return r, nil
		}
		if !cloud.IsExhausted(err) {
			return cloud.ReadyENI{}, err
		}
		lastErr = err
		// Take what the vSwitch has left, if anything; else try another.
		if fresh, derr := p.cloud.DescribeVSwitch(ctx, v.ID); derr == nil && fresh.Available > 0 && fresh.Available < k {
			req.IntentKey += "/rest"
			req.SecondaryIPv4 = fresh.Available - 1
			if p.cfg.DualStack {
				req.IPv6 = fresh.Available
			}
			if r, err := p.cloud.AllocateENI(ctx, req); err == nil {
				return r, nil
			}
		}
		p.vsw.Block(v.ID)
	}
	return cloud.ReadyENI{}, lastErr
}

// addENILocked adds an attached ENI and its addresses (idle) to the pool.
func (p *MultiIP) addENILocked(m cloud.ENIMeta, v6 []netip.Addr) *eniSlot {
	e := &eniSlot{ENIMeta: m}
	p.enis[m.ID] = e
	for i, a := range m.IPv4 {
		s := &ipSlot{eni: e, v4: a}
		if p.cfg.DualStack && i < len(v6) {
			s.v6 = v6[i]
		}
		e.ips = append(e.ips, s)
	}
	return e
}

// noteFailureLocked counts consecutive failures for the backoff.
func (p *MultiIP) noteFailureLocked(_ time.Time, err error) {
	p.failures++
	p.lastErr = err
	p.log.Warn("pool growth failed", "err", err, "consecutive", p.failures)
}

// failureBackoffLocked doubles with consecutive failures, up to a minute.
// A failed release can come with no growth failure counted (failures 0):
// it waits the base interval.
func (p *MultiIP) failureBackoffLocked() time.Duration {
	d := p.cfg.FailureBackoff << min(max(p.failures-1, 0), 6)
	return min(d, p.cfg.FailureBackoffCap)
}

// retryAfterLocked is the pause after a call that failed with err: the
// failure backoff, but for throttling, which says that the budget of the
// API's window is spent, not that the cloud fails: then until the next
// window opens (cloud.ThrottleWait, jittered over its first second), or,
// for a throttle that names no window, the base interval stretched by up
// to half at random. Doubling put the retries of a fleet that started
// together a window late.
func (p *MultiIP) retryAfterLocked(err error) time.Duration {
	if d, ok := cloud.ThrottleWait(err, p.clock.Now()); ok {
		return d
	}
	if cloud.IsThrottling(err) {
		return wait.Jitter(p.cfg.FailureBackoff, 0.5)
	}
	return p.failureBackoffLocked()
}

// failHopelessLocked fails the waiters that nothing in flight will serve
// when nothing more can be started: the node is full, or the cloud cannot
// give addresses now. Waiters still covered by calls in flight wait.
func (p *MultiIP) failHopelessLocked(now time.Time) {
	if len(p.waiters) <= p.inflight {
		return
	}
	canGrow := false
	if p.heldLocked()+p.inflight < p.cfg.Capacity {
		for _, e := range p.enis {
			if !e.busy && !e.deleting && !now.Before(e.inhibit) && len(e.ips)+e.pending < p.cfg.IPsPerENI {
				canGrow = true
			}
		}
		if len(p.enis)+p.creating < p.cfg.MaxENI && p.creating < p.cfg.MaxConcurrentCreates && !now.Before(p.createPause) {
			canGrow = true
		}
		if p.creating > 0 || p.busyCountLocked() > 0 {
			return // a call in flight may open room (an ENI, a kick)
		}
	}
	if canGrow {
		return
	}
	if at, ok := p.transientRetryLocked(now); ok {
		p.retryAt = at // a backoff, not a dead end: wait for it
		return
	}
	err := ErrInsufficientIPs
	if p.failures > 0 && p.lastErr != nil && !p.starved {
		err = fmt.Errorf("%w: %d consecutive cloud failures, last: %v", ErrInsufficientIPs, p.failures, p.lastErr)
	}
	if p.heldLocked()+p.inflight >= p.cfg.Capacity {
		err = fmt.Errorf("%w: %d addresses (%d ENIs × %d) are in use", ErrNoCapacity, p.heldLocked(), p.cfg.MaxENI, p.cfg.IPsPerENI)
	}
	keep := p.inflight
	for i, w := range p.waiters {
		if i < keep || w.done {
			continue
		}
		w.ch <- result{err: err}
		w.done = true
	}
	p.waiters = slices.DeleteFunc(p.waiters, func(w *waiter) bool { return w.done })
}

// maxTransientFailures is how many consecutive failures waiters sit out
// before they are failed with the last error: a blip (an InternalError,
// a timeout) delays pods, a persistent error (credentials, permissions)
// fails them quickly instead of at the plugin's deadline.
const maxTransientFailures = 3

// transientRetryLocked reports when growth blocked only by a failure
// backoff can be tried again. A dry vSwitch (starved), a full node or
// too many failures in a row are not transient.
func (p *MultiIP) transientRetryLocked(now time.Time) (time.Time, bool) {
	if p.starved || p.failures == 0 || p.failures >= maxTransientFailures || p.heldLocked()+p.inflight >= p.cfg.Capacity {
		return time.Time{}, false
	}
	var at time.Time
	earliest := func(t time.Time) {
		if t.After(now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	for _, e := range p.enis {
		if !e.deleting && len(e.ips)+e.pending < p.cfg.IPsPerENI {
			earliest(e.inhibit)
		}
	}
	if len(p.enis)+p.creating < p.cfg.MaxENI && !p.createPauseHard {
		earliest(p.createPause)
	}
	return at, !at.IsZero()
}

func (p *MultiIP) busyCountLocked() int {
	n := 0
	for _, e := range p.enis {
		if e.busy {
			n++
		}
	}
	return n
}

// reclaimInterval is the wait until the next idle-reclaim round: the
// interval stretched by up to IdleReclaimJitter × itself at random.
// wait.Jitter reads a factor <= 0 as 1, so 0 is kept apart: no jitter.
func (p *MultiIP) reclaimInterval() time.Duration {
	iv := p.cfg.IdleReclaimInterval
	if p.cfg.IdleReclaimJitter <= 0 {
		return iv
	}
	d := wait.Jitter(iv, p.cfg.IdleReclaimJitter)
	if d < iv {
		// A factor so large that the stretch overflowed int64: the
		// longest wait there is, not a negative one.
		d = math.MaxInt64
	}
	return d
}

// reclaimDue is when shrinkLocked will next run an idle-reclaim round
// (Run wakes up then): once the pool has been quiet for
// IdleReclaimAfter, and not before the time the last round drew. Zero:
// idle reclaim is off.
func (p *MultiIP) reclaimDue() time.Time {
	if p.cfg.IdleReclaimAfter <= 0 {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	quiet := p.lastChange.Add(p.cfg.IdleReclaimAfter)
	if p.nextReclaim.After(quiet) {
		return p.nextReclaim
	}
	return quiet
}

// shrinkLocked gives back idle addresses above MaxIdle (and, with idle
// reclaim, above MinIdle after a quiet period): whole ENIs when all their
// addresses are idle and the pool keeps MinIdle without them, else up to
// ten secondary addresses (one call) of each ENI, emptiest first.
func (p *MultiIP) shrinkLocked(now time.Time, idle int) {
	excess := idle - p.cfg.MaxIdle
	if p.cfg.IdleReclaimAfter > 0 {
		if now.Sub(p.lastChange) < p.cfg.IdleReclaimAfter {
			p.nextReclaim = time.Time{}
		} else if p.nextReclaim.IsZero() {
			p.nextReclaim = now
		}
		if !p.nextReclaim.IsZero() && !now.Before(p.nextReclaim) && idle > p.cfg.MinIdle {
			excess = max(excess, min(p.cfg.IdleReclaimBatch, idle-p.cfg.MinIdle))
			p.nextReclaim = now.Add(p.reclaimInterval())
		}
	}
	if excess <= 0 {
		return
	}
	// Emptiest ENIs first, so that whole ENIs can go; among those as
	// empty, the smallest first: the cheapest to give back whole.
	enis := p.sortedENIsLocked()
	slices.SortStableFunc(enis, func(a, b *eniSlot) int {
		if d := inUse(a, now) - inUse(b, now); d != 0 {
			return d
		}
		return len(a.ips) - len(b.ips)
	})
	for _, e := range enis {
		if excess <= 0 {
			return
		}
		if e.busy || e.deleting {
			continue
		}
		// Above MaxIdle, a whole idle ENI goes when that leaves the warm
		// pool its minimum: two calls (detach, delete) instead of an
		// Unassign per ten addresses, and an ENI slot back. Idle reclaim
		// keeps to its batch.
		if inUse(e, now) == 0 && (len(e.ips) <= excess || (idle > p.cfg.MaxIdle && idle-len(e.ips) >= p.cfg.MinIdle)) {
			excess -= len(e.ips)
			idle -= len(e.ips)
			p.releaseENILocked(e)
			continue
		}
		var drop []*ipSlot
		for _, s := range e.ips {
			if len(drop) == min(excess, maxPerCall) {
				break
			}
			if s.idle() && s.owner == "" && s.v4 != e.PrimaryIP {
				drop = append(drop, s)
			}
		}
		if len(drop) == 0 {
			continue
		}
		excess -= len(drop)
		idle -= len(drop)
		p.unassignLocked(e, drop)
	}
}

// inUse counts the addresses of e held or reserved by pods.
func inUse(e *eniSlot, now time.Time) int {
	n := 0
	for _, s := range e.ips {
		if s.inUse || s.reserved(now) {
			n++
		}
	}
	return n
}

func (p *MultiIP) releaseENILocked(e *eniSlot) {
	e.deleting, e.busy = true, true
	e.gen++
	for _, s := range e.ips {
		s.inUse, s.releasing = false, true
		p.owners.forget(s)
	}
	p.ops.start(func(ctx context.Context) {
		err := p.cloud.ReleaseENI(ctx, e.ID)
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			// Keep it out of use; sync retries the release.
			e.busy = false
			p.events.Warn("DisposeResourceFailed", fmt.Sprintf("release ENI %s: %v", e.ID, err))
			return
		}
		delete(p.enis, e.ID)
		p.vsw.Released(e.VSwitchID)
		p.slotsChangedLocked()
		// Not a change for idle reclaim (lastChange): see IdleReclaimAfter.
		p.kick()
	})
}

// cloudAddrs are the addresses the cloud assigns to an ENI.
type cloudAddrs struct{ v4, v6 []netip.Addr }

// has reports whether the cloud still assigns s's addresses (either).
func (a cloudAddrs) has(s *ipSlot) bool {
	return slices.Contains(a.v4, s.v4) || (s.v6.IsValid() && slices.Contains(a.v6, s.v6))
}

// assignedNow asks the cloud which addresses eniID has.
func (p *MultiIP) assignedNow(ctx context.Context, eniID string) (cloudAddrs, error) {
	e, err := p.cloud.DescribeENI(ctx, eniID)
	if err != nil {
		return cloudAddrs{}, fmt.Errorf("confirm the addresses of %s: %w", eniID, err)
	}
	return cloudAddrs{v4: append([]netip.Addr{e.PrimaryIP}, e.IPv4...), v6: e.IPv6}, nil
}

func (p *MultiIP) unassignLocked(e *eniSlot, drop []*ipSlot) {
	e.busy = true
	e.gen++
	var v4, v6 []netip.Addr
	for _, s := range drop {
		s.releasing = true
		v4 = append(v4, s.v4)
		if s.v6.IsValid() {
			v6 = append(v6, s.v6)
		}
	}
	p.ops.start(func(ctx context.Context) {
		err := p.cloud.UnassignIPv4(ctx, e.ID, v4)
		if err == nil && len(v6) > 0 {
			err = p.cloud.UnassignIPv6(ctx, e.ID, v6)
		}
		// A failed unassign may still have been applied (its answer lost,
		// then the retries throttled): what the cloud still assigns goes
		// back to idle, what it does not is gone. Handing such an address
		// to a pod gave it one the ENI no longer has.
		var still cloudAddrs
		var derr error
		if err != nil {
			still, derr = p.assignedNow(ctx, e.ID)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		e.busy = false
		if err != nil {
			var gone []*ipSlot
			for _, s := range drop {
				if derr == nil && !still.has(s) {
					gone = append(gone, s)
					continue
				}
				// Still assigned: back to idle. Unknown (the confirmation
				// failed too): kept from pods until the sync asks the cloud
				// again. The ENI waits out the failure backoff.
				s.releasing, s.unsure = false, derr != nil
			}
			e.inhibit = p.clock.Now().Add(p.failureBackoffLocked())
			p.events.Warn("DisposeResourceFailed", fmt.Sprintf("unassign %v from %s: %v", v4, e.ID, err))
			if len(gone) == 0 {
				return
			}
			drop = gone
		}
		e.ips = slices.DeleteFunc(e.ips, func(s *ipSlot) bool { return slices.Contains(drop, s) })
		p.vsw.Released(e.VSwitchID)
		// Not a change for idle reclaim (lastChange): see IdleReclaimAfter.
		p.kick()
	})
}
