package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/terway-sim/terway/daemon/cloud"
)

// Holding is an address a pod held according to the daemon's store.
type Holding struct {
	Owner string
	ENIID string
	IPv4  netip.Addr
	IPv6  netip.Addr
	// ReservedUntil is set for a released sticky address.
	ReservedUntil time.Time
	// Optional marks a holding that only keeps an address from being
	// reused (a host route no pod explains): an address that is not the
	// pool's is skipped, not reported Broken.
	Optional bool
}

// RestoreReport says what Restore found.
type RestoreReport struct {
	ENIs      int
	Addresses int
	// Broken are store holdings whose address is not on any of the node's
	// ENIs any more.
	Broken []Holding
	// Swept are ENIs of ours that were Available (left by an interrupted
	// creation or release) and were deleted.
	Swept []string
}

// Restore rebuilds the pool at start from what the cloud and metadata say
// is attached to this node and carries the pool's ownership tags (Owner,
// which includes TagFilter), then marks the addresses of holdings in use.
// ENIs caught mid-attach are waited for, ENIs caught mid-detach are
// finished off, and our own Available ENIs (tagged with Tags) are
// deleted: a daemon killed at any point neither leaks nor double-assigns.
func (p *MultiIP) Restore(ctx context.Context, holdings []Holding) (RestoreReport, error) {
	var rep RestoreReport
	if err := p.restoreAttached(ctx, p.cfg.owner(), holdings, &rep); err != nil {
		return rep, err
	}
	swept, err := p.sweep(ctx)
	rep.Swept = swept
	if err != nil {
		return rep, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	rep.Broken = p.restoreHoldingsLocked(holdings, now, func(h Holding) *ipSlot {
		if s := p.findLocked(h.ENIID, h.IPv4); s != nil {
			return s
		}
		return p.findAddrLocked(h.IPv4) // a holding rebuilt without its ENI
	})
	for _, h := range rep.Broken {
		p.keepLostLocked(h, now)
	}
	p.lastChange = now
	return rep, nil
}

// addrsOf lists e's IPv4 addresses, its primary first: all are pods'.
func (p *MultiIP) addrsOf(e cloud.ENI) []netip.Addr {
	return append([]netip.Addr{e.PrimaryIP}, e.IPv4...)
}

// adoptLocked adds e with its addresses idle: those the cloud says are
// assigned (metadata lags and may still list addresses that were just
// unassigned), each IPv6 address paired with the IPv4 one of holdings
// again, the rest in order.
func (p *MultiIP) adoptLocked(e cloud.ENI, m cloud.ENIMeta, holdings []Holding) {
	m.IPv4, m.IPv6 = p.addrsOf(e), e.IPv6
	p.addENILocked(m, pairV6(m.IPv4, e.IPv6, holdings))
}

// pairV6 orders the ENI's IPv6 addresses so that those of holdings pair
// with their IPv4 again; the rest pair in order.
func pairV6(v4, v6 []netip.Addr, holdings []Holding) []netip.Addr {
	if len(v6) == 0 {
		return nil
	}
	out := make([]netip.Addr, len(v4))
	used := map[netip.Addr]bool{}
	for i, a := range v4 {
		for _, h := range holdings {
			if h.IPv4 == a && h.IPv6.IsValid() && slices.Contains(v6, h.IPv6) {
				out[i], used[h.IPv6] = h.IPv6, true
			}
		}
	}
	rest := slices.DeleteFunc(slices.Clone(v6), func(a netip.Addr) bool { return used[a] })
	for i := range out {
		if !out[i].IsValid() && len(rest) > 0 {
			out[i], rest = rest[0], rest[1:]
		}
	}
	return out
}

// sweep deletes our own ENIs that are Available: created (or being
// released) by a daemon of this instance that did not finish.
func (p *MultiIP) sweep(ctx context.Context) ([]string, error) {
	if len(p.cfg.owner()) == 0 {
		return nil, nil
	}
	// An ENI being created is Available and tagged until it is attached:
	// sweep only when no creation was in flight during the Describe, and
	// never an ENI the pool knows (one being detached for deletion).
	p.mu.Lock()
	busy, gen := p.creating > 0, p.createGen
	p.mu.Unlock()
	if busy {
		return nil, nil
	}
	orphans, err := p.cloud.DescribeENIs(ctx, cloud.ENIFilter{Tags: p.cfg.owner(), Status: cloud.StatusAvailable})
	if err != nil {
		return nil, fmt.Errorf("sweep orphan ENIs: %w", err)
	}
	p.mu.Lock()
	busy = p.creating > 0 || p.createGen != gen
	// Trunk and Member ENIs are never ours to delete, whatever their tags.
	orphans = slices.DeleteFunc(orphans, func(e cloud.ENI) bool {
		return p.enis[e.ID] != nil || p.goneENIs[e.ID] != nil || e.Type != "Secondary" || !cloud.HasTags(e.Tags, p.cfg.owner())
	})
	p.mu.Unlock()
	if busy {
		return nil, nil
	}
	var swept []string
	for _, e := range orphans {
		if err := p.cloud.DeleteENI(ctx, e.ID); err != nil {
			return swept, fmt.Errorf("sweep orphan ENI %s: %w", e.ID, err)
		}
		swept = append(swept, e.ID)
		p.log.Info("deleted an orphan ENI of this node", "eni", e.ID)
	}
	return swept, nil
}

// Sweep deletes our own Available ENIs (GC calls it periodically).
func (p *MultiIP) Sweep(ctx context.Context) ([]string, error) { return p.sweep(ctx) }

// findAddrLocked finds the slot of v4 on any ENI.
func (p *MultiIP) findAddrLocked(v4 netip.Addr) *ipSlot {
	for _, e := range p.enis {
		for _, s := range e.ips {
			if s.v4 == v4 {
				return s
			}
		}
	}
	return nil
}

func (p *MultiIP) findLocked(eniID string, v4 netip.Addr) *ipSlot {
	e := p.enis[eniID]
	if e == nil {
		return nil
	}
	for _, s := range e.ips {
		if s.v4 == v4 {
			return s
		}
	}
	return nil
}

// sync reconciles the pool with metadata: ENIs and addresses that
// vanished are dropped (a warning for those in use), and addresses that
// metadata and the cloud show on our ENIs but the pool does not know are
// adopted as idle once seen twice. ENIs whose release failed are retried.
// ENIs of ours attached to the node that the pool does not know are
// adopted or released (strays.go).
func (p *MultiIP) sync(ctx context.Context) {
	if err := p.syncStrays(ctx, p.cfg.owner()); err != nil {
		p.log.Warn("pool sync", "err", err)
	}
	macs, err := p.cloud.MACs(ctx)
	if err != nil {
		p.log.Warn("pool sync: metadata", "err", err)
		return
	}
	p.mu.Lock()
	var check, missing []*eniSlot
	for _, e := range p.enis {
		switch {
		case e.deleting && !e.busy:
			p.releaseENILocked(e)
		case e.busy || e.deleting:
		case !slices.Contains(macs, e.MAC):
			missing = append(missing, e)
		default:
			check = append(check, e)
		}
	}
	p.mu.Unlock()
	for _, e := range missing {
		// Metadata lags: drop only what the cloud confirms is no longer
		// attached here. An ENI dropped while attached would be taken for
		// a stray and released with its pods' addresses on it.
		ce, err := p.cloud.DescribeENI(ctx, e.ID)
		if err == nil && ce.InstanceID == p.cloud.InstanceID() && (ce.Status == cloud.StatusInUse || ce.Status == cloud.StatusAttaching) {
			continue
		}
		if err != nil && !cloud.IsNotFound(err) {
			continue // unknown: next sync
		}
		p.mu.Lock()
		if p.enis[e.ID] == e && !e.busy && !e.deleting && !hasInUse(e) {
			p.dropENILocked(e)
		}
		p.mu.Unlock()
	}
	for _, e := range check {
		v4, err := p.cloud.IPv4s(ctx, e.MAC)
		if err != nil {
			continue
		}
		p.reconcileENI(ctx, e, v4)
	}
}

// hasInUse reports whether a pod uses an address of e: then the heal, not
// the sync, deals with e gone (claims kept, pods evicted).
func hasInUse(e *eniSlot) bool {
	return slices.ContainsFunc(e.ips, func(s *ipSlot) bool { return s.inUse })
}

func (p *MultiIP) dropENILocked(e *eniSlot) {
	for _, s := range e.ips {
		if s.inUse {
			p.events.Warn("ResourceInvalid", fmt.Sprintf("ENI %s of %s vanished from metadata while %s used %s", e.ID, e.MAC, s.owner, s.v4))
		}
		p.owners.forget(s)
	}
	delete(p.enis, e.ID)
}

func (p *MultiIP) reconcileENI(ctx context.Context, e *eniSlot, meta []netip.Addr) {
	p.mu.Lock()
	if e.busy || e.deleting {
		p.mu.Unlock()
		return
	}
	var unknown []netip.Addr
	for _, a := range meta {
		if p.findLocked(e.ID, a) == nil {
			if p.orphanSeen[a]++; p.orphanSeen[a] >= 2 {
				unknown = append(unknown, a)
			}
		} else {
			delete(p.orphanSeen, a)
		}
	}
	e.ips = slices.DeleteFunc(e.ips, func(s *ipSlot) bool {
		if slices.Contains(meta, s.v4) || s.releasing {
			return false
		}
		if s.inUse {
			p.events.Warn("ResourceInvalid", fmt.Sprintf("Mark as invalid, ip: %s (held by %s) vanished from %s", s.v4, s.owner, e.ID))
			return false
		}
		p.owners.forget(s)
		return true
	})
	unsure, gen := slices.ContainsFunc(e.ips, func(s *ipSlot) bool { return s.unsure }), e.gen
	p.mu.Unlock()
	if len(unknown) == 0 && !unsure {
		return
	}
	// Adopt only what the cloud confirms is assigned to this ENI:
	// metadata lists unassigned addresses for a while.
	ce, err := p.cloud.DescribeENI(ctx, e.ID)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if unsure && p.enis[e.ID] == e && !e.busy && e.gen == gen {
		// What a failed unassign left unknown: idle again if the cloud
		// still assigns it, gone if not.
		e.ips = slices.DeleteFunc(e.ips, func(s *ipSlot) bool {
			if !s.unsure {
				return false
			}
			s.unsure = false
			if ce.PrimaryIP == s.v4 || slices.Contains(ce.IPv4, s.v4) {
				return false
			}
			p.owners.forget(s)
			return true
		})
	}
	for _, a := range unknown {
		if (slices.Contains(ce.IPv4, a) || ce.PrimaryIP == a) && p.findLocked(e.ID, a) == nil {
			e.ips = append(e.ips, &ipSlot{eni: e, v4: a})
			delete(p.orphanSeen, a)
			p.events.Warn("ResourceInvalid", fmt.Sprintf("orphan ip found on ecs metadata: %s on %s, adopted as idle", a, e.ID))
		}
	}
}
