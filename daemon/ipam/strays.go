package ipam

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/terway-sim/terway/daemon/cloud"
)

// Strays are ENIs of ours — plain secondary ENIs carrying every one of the
// pool's ownership tags — that are attached or attaching to this
// instance while the pool does not know them: left by a creation whose
// rollback failed (an attach whose answer was lost and whose detach met
// an ENI still Attaching), or by anything else that lost track. The
// periodic sync finds them, not only Restore: each is waited for in the
// background until InUse, then adopted (its addresses idle, once metadata
// shows them) when the pool has room for it and use for it, else
// detached and deleted.
//
// ENIs of another type (Trunk, Member, the primary) and ENIs whose tags
// name another owner (creator, cluster or instance) are never touched.
// Neither are ENIs that lack a tag of the pool's TagFilter
// (eni_tag_filter): the pool's Tags include the filter (checkTagFilter),
// so here and in the orphan sweeps "carries every ownership tag" implies
// "passes the filter".
//
// A pool's own creation is tagged and attaching before the pool knows the
// ENI: creations report their ENI's ID as soon as it exists (OnCreated)
// and the sync leaves those alone, as it leaves ENIs the pool knew before
// its Describe (an ENI released meanwhile is not a stray).

// ownedBy reports whether e is a plain secondary ENI on instanceID that
// carries every one of tags with the same value. Empty tags own nothing.
func ownedBy(e cloud.ENI, instanceID string, tags map[string]string) bool {
	return len(tags) > 0 && e.Type == "Secondary" && e.InstanceID == instanceID && cloud.HasTags(e.Tags, tags)
}

// strayCandidates lists our ENIs attached or attaching to this instance
// (Detaching ones become Available, where the orphan sweep finds them).
func strayCandidates(ctx context.Context, c Cloud, tags map[string]string) ([]cloud.ENI, error) {
	enis, err := c.DescribeENIs(ctx, cloud.ENIFilter{InstanceID: c.InstanceID(), Tags: tags})
	if err != nil {
		return nil, fmt.Errorf("look for unknown ENIs of ours: %w", err)
	}
	var out []cloud.ENI
	for _, e := range enis {
		if ownedBy(e, c.InstanceID(), tags) && (e.Status == cloud.StatusInUse || e.Status == cloud.StatusAttaching) {
			out = append(out, e)
		}
	}
	return out, nil
}

// settleStray waits until a stray that is Attaching has finished: it
// returns the ENI InUse, or ok false when the attach failed (the ENI is
// Available and deleted here) or could not be waited for (next sync).
func settleStray(ctx context.Context, c Cloud, e cloud.ENI) (cloud.ENI, bool, error) {
	if e.Status != cloud.StatusAttaching {
		return e, true, nil
	}
	got, err := c.WaitENIStatus(ctx, e.ID, cloud.StatusInUse, cloud.StatusAvailable)
	switch {
	case cloud.IsNotFound(err):
		return e, false, nil
	case err != nil:
		return e, false, err
	case got.Status == cloud.StatusAvailable:
		if err := c.DeleteENI(ctx, e.ID); err != nil {
			return e, false, err
		}
		return e, false, nil
	}
	return got, true, nil
}

// restorable settles an attached ENI a restore finds and reports whether
// the pool takes it: a secondary ENI with our ownership tags, InUse once an
// attach in flight has ended. One caught detaching is released; eth0,
// trunks and ENIs of other owners are left alone.
func restorable(ctx context.Context, c Cloud, log *slog.Logger, owner map[string]string, e cloud.ENI) (bool, error) {
	if e.Type != "Secondary" {
		return false, nil
	}
	if !cloud.HasTags(e.Tags, owner) {
		// Another owner's (or a user's): its addresses are not ours to
		// hand out, nor the ENI ours to release.
		log.Info("restore: leaving alone an attached ENI without our ownership tags (creator, instance, cluster, eni_tag_filter)", "eni", e.ID, "status", e.Status)
		return false, nil
	}
	switch e.Status {
	case cloud.StatusAttaching:
		if _, err := c.WaitENIStatus(ctx, e.ID, cloud.StatusInUse); err != nil {
			return false, fmt.Errorf("restore: %w", err)
		}
	case cloud.StatusDetaching:
		if err := c.ReleaseENI(ctx, e.ID); err != nil {
			return false, fmt.Errorf("restore: finish releasing %s: %w", e.ID, err)
		}
		return false, nil
	}
	return true, nil
}

// notePending records an ENI a creation made (its OnCreated hook) in the
// pool's pending set and in the creation's own list; forgetPending drops
// that list when the creation ends. The pool's mutex guards both.
func notePending(pending *map[string]bool, ids *[]string, id string) {
	if *pending == nil {
		*pending = map[string]bool{}
	}
	(*pending)[id] = true
	*ids = append(*ids, id)
}

func forgetPending(pending map[string]bool, ids []string) {
	for _, id := range ids {
		delete(pending, id)
	}
}

// --- Both pools (poolCore) ---

// restoreAttached takes in the ENIs of ours attached to this node that
// restorable settles, once metadata shows them, and counts them in rep.
func (c *poolCore[E, R]) restoreAttached(ctx context.Context, owner map[string]string, holdings []Holding, rep *RestoreReport) error {
	attached, err := c.cloud.DescribeENIs(ctx, cloud.ENIFilter{InstanceID: c.cloud.InstanceID()})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	for _, e := range attached {
		take, err := restorable(ctx, c.cloud, c.log, owner, e)
		if err != nil {
			return err
		}
		if !take {
			continue
		}
		addrs := c.pol.addrsOf(e)
		m, err := c.cloud.WaitMetadata(ctx, e.MAC, addrs, e.IPv6)
		if err != nil {
			return fmt.Errorf("restore: ENI %s: %w", e.ID, err)
		}
		c.mu.Lock()
		c.pol.adoptLocked(e, m, holdings)
		c.mu.Unlock()
		rep.ENIs++
		rep.Addresses += len(addrs)
	}
	return nil
}

// syncStrays starts adopting or releasing the strays of the ENIs that
// carry owner (the pool's ownership tags) the cloud shows.
func (c *poolCore[E, R]) syncStrays(ctx context.Context, owner map[string]string) error {
	if len(owner) == 0 {
		return nil
	}
	c.mu.Lock()
	before := c.knownIDsLocked()
	c.mu.Unlock()
	enis, err := strayCandidates(ctx, c.cloud, owner)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range enis {
		if _, known := c.enis[e.ID]; before[e.ID] || known || c.pendingENIs[e.ID] || c.strays[e.ID] {
			continue
		}
		if c.strays == nil {
			c.strays = map[string]bool{}
		}
		c.strays[e.ID] = true
		c.log.Warn("found an ENI of ours attached to this node that the pool does not know", "eni", e.ID, "status", e.Status)
		c.ops.start(func(ctx context.Context) { c.takeStray(ctx, e) })
	}
	return nil
}

func (c *poolCore[E, R]) knownIDsLocked() map[string]bool {
	out := make(map[string]bool, len(c.enis)+len(c.pendingENIs))
	for id := range c.enis {
		out[id] = true
	}
	for id := range c.pendingENIs {
		out[id] = true
	}
	return out
}

// takeStray adopts the stray e when the pool wants it, else releases it.
func (c *poolCore[E, R]) takeStray(ctx context.Context, e cloud.ENI) {
	defer func() {
		c.mu.Lock()
		delete(c.strays, e.ID)
		c.mu.Unlock()
	}()
	e, ok, err := settleStray(ctx, c.cloud, e)
	if err != nil {
		c.log.Warn("unknown ENI of ours: waiting for its attach to end failed; next sync retries", "eni", e.ID, "err", err)
		return
	}
	if !ok {
		return
	}
	addrs := c.pol.addrsOf(e)
	c.mu.Lock()
	wanted := c.pol.strayWantedLocked(len(addrs))
	c.mu.Unlock()
	if wanted {
		m, err := c.cloud.WaitMetadata(ctx, e.MAC, addrs, e.IPv6)
		if err != nil {
			c.log.Warn("unknown ENI of ours is InUse but metadata does not show it; next sync retries", "eni", e.ID, "err", err)
			return
		}
		c.mu.Lock()
		if _, known := c.enis[e.ID]; !known && c.pol.strayWantedLocked(len(addrs)) {
			c.pol.adoptLocked(e, m, nil)
			c.lastChange = c.clock.Now()
			c.slotsChangedLocked()
			c.mu.Unlock()
			c.log.Warn("adopted an unknown ENI of ours", "eni", e.ID, "addresses", len(addrs))
			c.kick()
			return
		}
		c.mu.Unlock()
	}
	if err := c.cloud.ReleaseENI(ctx, e.ID); err != nil {
		c.events.Warn("DisposeResourceFailed", fmt.Sprintf("release unknown ENI %s: %v", e.ID, err))
		return
	}
	c.mu.Lock()
	c.vsw.Released(e.VSwitchID)
	c.slotsChangedLocked()
	c.mu.Unlock()
	c.log.Warn("released an unknown ENI of ours the pool has no use for", "eni", e.ID)
	c.kick()
}

// --- MultiIP ---

// strayWantedLocked: a stray with n addresses is adopted when the pool
// has a free ENI slot and room for its addresses, and either demand waits
// or its addresses keep idle within MaxIdle.
func (p *MultiIP) strayWantedLocked(n int) bool {
	if len(p.enis)+p.creating >= p.cfg.MaxENI || p.heldLocked()+p.inflight+n > p.cfg.Capacity {
		return false
	}
	return p.waitingLocked() > p.inflight || p.idleLocked(p.clock.Now())+n <= p.cfg.MaxIdle
}

// --- ENIPool ---

// sync is the ENI pool's periodic reconciliation with the cloud: strays
// are adopted or released, and our Available ENIs (a rollback that
// detached but did not delete) are deleted.
func (p *ENIPool) sync(ctx context.Context) {
	if len(p.cfg.owner()) == 0 {
		return
	}
	p.mu.Lock()
	busy := p.creating > 0
	p.mu.Unlock()
	if err := p.syncStrays(ctx, p.cfg.owner()); err != nil {
		p.log.Warn("pool sync", "err", err)
		return
	}
	// An ENI being created is Available and tagged until it is attached:
	// sweep only when no creation was in flight around the Describe.
	if busy {
		return
	}
	orphans, err := p.cloud.DescribeENIs(ctx, cloud.ENIFilter{Tags: p.cfg.owner(), Status: cloud.StatusAvailable})
	if err != nil {
		p.log.Warn("pool sync: sweep orphan ENIs", "err", err)
		return
	}
	p.mu.Lock()
	busy = p.creating > 0
	var del []cloud.ENI
	for _, e := range orphans {
		if e.Type == "Secondary" && p.enis[e.ID] == nil && !p.pendingENIs[e.ID] && !p.strays[e.ID] && cloud.HasTags(e.Tags, p.cfg.owner()) {
			del = append(del, e)
		}
	}
	p.mu.Unlock()
	if busy {
		return
	}
	for _, e := range del {
		if err := p.cloud.DeleteENI(ctx, e.ID); err != nil {
			p.log.Warn("pool sync: delete orphan ENI", "eni", e.ID, "err", err)
			continue
		}
		p.log.Info("deleted an orphan ENI of this node", "eni", e.ID)
	}
}

// checkTagFilter makes sure that the ENIs a pool creates with tags pass
// its filter: one that did not would be managed until the next restart,
// then neither adopted nor swept — a leak.
func checkTagFilter(tags, owner, filter map[string]string) error {
	keys := make([]string, 0, len(filter))
	for k := range filter {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got, ok := tags[k]; !ok || got != filter[k] {
			return fmt.Errorf("ENI tag filter %s=%q: the ENIs the pool creates are not tagged so (tags %v), it would not recognise its own ENIs", k, filter[k], tags)
		}
		if got, ok := owner[k]; owner != nil && (!ok || got != filter[k]) {
			return fmt.Errorf("ENI tag filter %s=%q: not among the ownership tags %v, the pool would take ENIs the filter excludes", k, filter[k], owner)
		}
	}
	for k, v := range owner {
		if got, ok := tags[k]; !ok || got != v {
			return fmt.Errorf("ownership tag %s=%q: the ENIs the pool creates are not tagged so (tags %v), it would not recognise its own ENIs", k, v, tags)
		}
	}
	return nil
}

// strayWantedLocked: a stray (one address: the ENI) is adopted when a
// slot is free and a waiter needs it or idle ENIs stay within MaxIdle.
func (p *ENIPool) strayWantedLocked(int) bool {
	if len(p.enis)+p.creating >= p.cfg.MaxENI {
		return false
	}
	return p.waitingLocked() > p.creating || p.idleLocked(p.clock.Now()) < p.cfg.MaxIdle
}
