package ipam

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/terway-sim/terway/daemon/cloud"
)

// The heal puts right what an operator changes out of band (console or
// API, not the daemon) under pods that use it: a secondary address
// unassigned, an ENI detached or deleted. Without it the pool's sync
// dropped what the cloud no longer showed, claims included, and the cloud
// could hand the address out again and the pool give it to a second pod.
//
// A difference is acted on only when metadata shows it, the cloud API
// confirms it, and both still do a heal round later with no call of the
// pool's own on that ENI in between (metadata lags, the API is
// eventually consistent, the pool's own calls change what both show).
// The heal only looks at what the pool holds after Restore, so a restart
// never produces a heal: what a restore cannot find is reported Broken
// by Restore, and its claim is kept as lost (keepLostLocked).

// Heal outcomes.
const (
	// HealReassigned: an address unassigned out of band, its ENI still
	// attached, was assigned back to the same ENI; its pod keeps it.
	HealReassigned = "reassigned"
	// HealLost: the address is on no ENI of the node any more (its ENI
	// detached or deleted, or re-assigning it failed). Its claim is kept
	// — the address is never handed to another pod — until its owner is
	// released; the owner must go (the daemon evicts it).
	HealLost = "lost"
	// HealENIDeleted: an ENI of ours detached out of band was deleted
	// once no pod held an address of it.
	HealENIDeleted = "eni_deleted"
	// HealENIForgotten: an idle ENI (no address in use) detached or
	// deleted out of band was dropped from the pool at once, not at the
	// next sync, so the pool refills from what the node really has.
	HealENIForgotten = "eni_forgotten"
)

// Heal is one thing a heal round did.
type Heal struct {
	Outcome string
	// Owner and IPv4 are the pod and address (not for HealENIDeleted).
	Owner string
	IPv4  netip.Addr
	ENIID string
	// Why says what was found.
	Why string
}

// Healer is a pool that heals out-of-band changes (MultiIP).
type Healer interface {
	// Heal runs one heal round.
	Heal(ctx context.Context) []Heal
	// LostOwners lists the owners whose address is lost: they must go.
	LostOwners() []string
}

var _ Healer = (*MultiIP)(nil)

// healSuspect is a difference seen in one round, to be seen again in the
// next before the heal acts on it. gen is the ENI's call generation then.
type healSuspect struct {
	eni string
	gen uint64
}

// LostOwners lists the owners whose address is lost, sorted.
func (p *MultiIP) LostOwners() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, s := range p.lost {
		if s.owner != "" {
			out = append(out, s.owner)
		}
	}
	slices.Sort(out)
	return out
}

// healCandidate is an ENI of the pool as a round found it.
type healCandidate struct {
	e   *eniSlot
	gen uint64
	v4  []netip.Addr // the addresses in use; none for an idle ENI
}

// Heal compares metadata with what the pool holds, confirms each
// difference with the cloud and, the second time in a row, heals it (see
// the outcomes). It also deletes the detached ENIs whose pods are gone.
func (p *MultiIP) Heal(ctx context.Context) []Heal {
	out := p.finishGoneENIs(ctx)
	macs, err := p.cloud.MACs(ctx)
	if err != nil {
		p.log.Warn("heal: metadata", "err", err)
		return out
	}
	seen := map[netip.Addr]healSuspect{}
	seenENI := map[string]uint64{}
	for _, c := range p.healCandidates() {
		var missing []netip.Addr
		eniMissing := !slices.Contains(macs, c.e.MAC)
		if !eniMissing && len(c.v4) == 0 {
			continue // idle: only its own absence matters
		}
		if !eniMissing {
			meta, err := p.cloud.IPv4s(ctx, c.e.MAC)
			if err != nil {
				continue
			}
			for _, a := range c.v4 {
				if !slices.Contains(meta, a) {
					missing = append(missing, a)
				}
			}
			if len(missing) == 0 {
				continue
			}
		}
		ce, err := p.cloud.DescribeENI(ctx, c.e.ID)
		gone := cloud.IsNotFound(err)
		if err != nil && !gone {
			continue // unknown: a later round
		}
		if !gone && (ce.InstanceID != p.cloud.InstanceID() || ce.Status != cloud.StatusInUse && ce.Status != cloud.StatusAttaching) {
			gone = true
		}
		if gone {
			seenENI[c.e.ID] = c.gen
			continue
		}
		// Attached: what the cloud still assigns was only metadata's lag.
		for _, a := range missing {
			if a != ce.PrimaryIP && !slices.Contains(ce.IPv4, a) {
				seen[a] = healSuspect{eni: c.e.ID, gen: c.gen}
			}
		}
	}
	p.mu.Lock()
	prevIP, prevENI := p.suspectIPs, p.suspectENIs
	p.suspectIPs, p.suspectENIs = seen, seenENI
	var unassigned []Heal
	for id, gen := range seenENI {
		if g, ok := prevENI[id]; ok && g == gen {
			out = append(out, p.loseENILocked(id, gen)...)
		}
	}
	for a, s := range seen {
		if prev, ok := prevIP[a]; ok && prev == s {
			if h, ok := p.suspectSlotLocked(s, a); ok {
				unassigned = append(unassigned, h)
			}
		}
	}
	p.mu.Unlock()
	for _, h := range unassigned {
		out = append(out, p.reassign(ctx, h))
	}
	return out
}

// healCandidates lists the pool's ENIs with no call of the pool in
// flight, and the addresses in use on each.
func (p *MultiIP) healCandidates() []healCandidate {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []healCandidate
	for _, e := range p.enis {
		if e.busy || e.deleting {
			continue
		}
		c := healCandidate{e: e, gen: e.gen}
		for _, s := range e.ips {
			if s.inUse && !s.releasing {
				c.v4 = append(c.v4, s.v4)
			}
		}
		out = append(out, c)
	}
	return out
}

// stableLocked reports whether e is still the pool's, with no call of
// the pool on it since gen.
func (p *MultiIP) stableLocked(e *eniSlot, id string, gen uint64) bool {
	return e != nil && p.enis[id] == e && !e.busy && !e.deleting && e.gen == gen
}

// suspectSlotLocked returns the heal of an address unassigned out of
// band, if its slot is still in use on a stable ENI.
func (p *MultiIP) suspectSlotLocked(s healSuspect, a netip.Addr) (Heal, bool) {
	e := p.enis[s.eni]
	if !p.stableLocked(e, s.eni, s.gen) {
		return Heal{}, false
	}
	for _, slot := range e.ips {
		if slot.v4 == a && slot.inUse && !slot.releasing {
			// Busy while the call runs: no other call of the pool on it.
			e.busy = true
			e.gen++
			return Heal{Owner: slot.owner, IPv4: a, ENIID: e.ID}, true
		}
	}
	return Heal{}, false
}

// reassign assigns an address unassigned out of band back to its ENI
// (h.ENIID, made busy by suspectSlotLocked). If the cloud refuses (the
// address is another's by now, the ENI full) the address is lost.
func (p *MultiIP) reassign(ctx context.Context, h Heal) Heal {
	p.mu.Lock()
	e := p.enis[h.ENIID]
	meta := e.ENIMeta
	p.mu.Unlock()
	err := p.cloud.AssignIPv4Addrs(ctx, meta, []netip.Addr{h.IPv4})
	if err != nil {
		// The call may have been applied all the same (a lost answer).
		still, derr := p.assignedNow(ctx, h.ENIID)
		switch {
		case derr == nil && slices.Contains(still.v4, h.IPv4):
			err = nil
		case derr != nil || ctx.Err() != nil || cloud.ErrorCode(err) == "" || cloud.IsRetryable(err):
			// Unknown, or a refusal that may pass: leave it in use and
			// look again in later rounds.
			p.mu.Lock()
			e.busy = false
			p.mu.Unlock()
			h.Why = fmt.Sprintf("assign %s back to %s: %v (confirm: %v)", h.IPv4, h.ENIID, err, derr)
			return h
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e.busy = false
	e.gen++
	if err == nil {
		h.Outcome, h.Why = HealReassigned, fmt.Sprintf("%s was unassigned from %s out of band; assigned it back", h.IPv4, h.ENIID)
		return h
	}
	h.Outcome, h.Why = HealLost, fmt.Sprintf("%s was unassigned from %s out of band and cannot be assigned back: %v", h.IPv4, h.ENIID, err)
	for _, s := range e.ips {
		if s.v4 == h.IPv4 {
			p.loseSlotLocked(e, s)
		}
	}
	return h
}

// loseENILocked handles an ENI detached or deleted out of band: its
// addresses in use are lost (claims kept), the idle ones forgotten, and
// the ENI is kept from the orphan sweep until its lost claims are
// released (finishGoneENIs then deletes it).
func (p *MultiIP) loseENILocked(id string, gen uint64) []Heal {
	e := p.enis[id]
	if !p.stableLocked(e, id, gen) {
		return nil
	}
	var out []Heal
	for _, s := range slices.Clone(e.ips) {
		if s.inUse && !s.releasing {
			out = append(out, Heal{Outcome: HealLost, Owner: s.owner, IPv4: s.v4, ENIID: id,
				Why: fmt.Sprintf("ENI %s of %s was detached or deleted out of band", id, s.v4)})
			p.loseSlotLocked(e, s)
			continue
		}
		p.owners.forget(s)
	}
	if len(out) == 0 {
		out = append(out, Heal{Outcome: HealENIForgotten, ENIID: id,
			Why: fmt.Sprintf("ENI %s, idle, was detached or deleted out of band; dropped it from the pool", id)})
	}
	delete(p.enis, id)
	p.goneENIs[id] = e
	p.slotsChangedLocked()
	p.kick()
	return out
}

// loseSlotLocked moves s, in use, off its ENI into the lost set: its
// owner keeps the claim, and no idle slot of the same address is handed
// out while it lasts.
func (p *MultiIP) loseSlotLocked(e *eniSlot, s *ipSlot) {
	e.ips = slices.DeleteFunc(e.ips, func(x *ipSlot) bool { return x == s })
	p.lost[s.v4] = s
}

// keepLostLocked keeps the claim of a holding Restore found on no ENI of
// the node (an operator unassigned its address, or detached or deleted its
// ENI, while the daemon was down; or the heal had lost it before a
// restart) as a lost claim, as the heal does while the daemon runs: the
// address is never handed to another pod, even when the cloud assigns it
// to the node again, and the owner is evicted (LostOwners). A released
// sticky reservation is dropped instead: its pod is gone, and its
// successor must get an address the node has.
func (p *MultiIP) keepLostLocked(h Holding, now time.Time) {
	_, owned := p.owners[h.Owner]
	if h.Optional || owned || h.ReservedUntil.After(now) || p.findAddrLocked(h.IPv4) != nil || p.lost[h.IPv4] != nil {
		return
	}
	s := &ipSlot{eni: &eniSlot{ENIMeta: cloud.ENIMeta{ID: h.ENIID}}, v4: h.IPv4, v6: h.IPv6}
	p.owners.restore(s, h.Owner, time.Time{}, now)
	p.lost[h.IPv4] = s
	p.log.Warn("restore: kept the claim of an address found on no ENI of the node; its pod is evicted",
		"owner", h.Owner, "ip", h.IPv4, "eni", h.ENIID)
}

// lostAddrLocked reports whether a is the address of a lost claim.
func (p *MultiIP) lostAddrLocked(a netip.Addr) bool {
	s, ok := p.lost[a]
	return ok && s.owner != ""
}

// releaseLostLocked drops owner's lost claim; it reports whether owner
// had one.
func (p *MultiIP) releaseLostLocked(owner string) bool {
	s, ok := p.owners[owner]
	if !ok || p.lost[s.v4] != s {
		return false
	}
	p.owners.forget(s)
	s.owner, s.inUse, s.reservedUntil = "", false, time.Time{}
	delete(p.lost, s.v4)
	return true
}

// finishGoneENIs deletes the ENIs detached out of band whose lost claims
// are all released: ours (tagged), so nothing the cloud holds for the
// node is unknown to it. An ENI attached again meanwhile is left to the
// stray sync.
func (p *MultiIP) finishGoneENIs(ctx context.Context) []Heal {
	p.mu.Lock()
	var done []string
	for id, e := range p.goneENIs {
		if !slices.ContainsFunc(slices.Collect(maps.Values(p.lost)), func(s *ipSlot) bool { return s.eni == e && s.owner != "" }) {
			done = append(done, id)
		}
	}
	p.mu.Unlock()
	var out []Heal
	for _, id := range done {
		ce, err := p.cloud.DescribeENI(ctx, id)
		switch {
		case cloud.IsNotFound(err):
		case err != nil:
			continue
		case ce.Status == cloud.StatusAvailable && ce.Type == "Secondary" && cloud.HasTags(ce.Tags, p.cfg.owner()):
			if err := p.cloud.DeleteENI(ctx, id); err != nil {
				p.log.Warn("heal: delete an ENI detached out of band", "eni", id, "err", err)
				continue
			}
			out = append(out, Heal{Outcome: HealENIDeleted, ENIID: id,
				Why: fmt.Sprintf("ENI %s was detached out of band; deleted it once its pods were gone", id)})
		case ce.Status == cloud.StatusDetaching:
			continue // next round
		}
		p.mu.Lock()
		delete(p.goneENIs, id)
		p.mu.Unlock()
	}
	return out
}
