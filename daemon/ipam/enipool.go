package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"time"

	"k8s.io/utils/clock"

	"github.com/terway-sim/terway/daemon/cloud"
)

// ENIPoolConfig sizes the pool of whole ENIs.
type ENIPoolConfig struct {
	// MaxENI is how many secondary ENIs the node may hold.
	MaxENI int
	// MinIdle ENIs are kept attached and ready; above MaxIdle idle ENIs
	// are released.
	MinIdle, MaxIdle int
	DualStack        bool
	// FailureBackoff is the pause after a failed creation (doubling, up to
	// a minute); ENILimitInhibit the pause after EniPerInstanceLimitExceeded.
	FailureBackoff  time.Duration
	ENILimitInhibit time.Duration
	// FailureBackoffCap bounds the doubling of FailureBackoff (default a
	// minute).
	FailureBackoffCap time.Duration
	SyncPeriod        time.Duration

	SecurityGroups  []string
	Tags            map[string]string
	ResourceGroupID string
	// TagFilter, when set, limits the pool to the ENIs that carry all of
	// these tags (eni_tag_filter): other ENIs attached to the node are
	// neither adopted nor released nor swept, though they take instance
	// ENI slots. Tags must include them, or the pool would not know its
	// own ENIs after a restart.
	TagFilter map[string]string
	// Owner is the part of Tags that marks an ENI as this pool's: the
	// daemon's creator, instance and cluster tags and TagFilter. Restore,
	// the stray sync and the orphan sweeps recognise an ENI by these alone,
	// whatever else it carries: an ENI without them (another owner's, a
	// user's) is never adopted or deleted, and one created before eni_tags
	// changed is still ours. Nil: all of Tags.
	Owner map[string]string
}

// ENIPool hands whole ENIs to pods (ENIOnly mode, and exclusive-ENI pods
// of VPC mode). The pod's address is the ENI's primary address; the
// plugin moves the ENI into the pod. Idle ENIs stay attached.
type ENIPool struct {
	// The ENI is both the pool's record and what it hands out.
	poolCore[*eniRes, *eniRes]
	cfg ENIPoolConfig
}

type eniRes struct {
	ip IP
	claim
	releasing bool
}

func (r *eniRes) podIP() IP            { return r.ip }
func (r *eniRes) isReleasing() bool    { return r.releasing }
func (r *eniRes) resources() []*eniRes { return []*eniRes{r} }

// owner is Owner, or Tags without it.
func (c *ENIPoolConfig) owner() map[string]string {
	if c.Owner != nil {
		return c.Owner
	}
	return c.Tags
}

// NewENIPool returns an empty pool; call Restore, then Run.
func NewENIPool(cfg ENIPoolConfig, cl Cloud, vsw VSwitches, c clock.WithTicker, log *slog.Logger, ev Events) (*ENIPool, error) {
	if cfg.MaxENI < 1 {
		return nil, fmt.Errorf("max ENIs %d must be at least 1", cfg.MaxENI)
	}
	if err := checkTagFilter(cfg.Tags, cfg.Owner, cfg.TagFilter); err != nil {
		return nil, err
	}
	cfg.MaxIdle = min(cfg.MaxIdle, cfg.MaxENI)
	cfg.MinIdle = min(cfg.MinIdle, cfg.MaxIdle)
	if cfg.FailureBackoff <= 0 {
		cfg.FailureBackoff = 5 * time.Second
	}
	if cfg.FailureBackoffCap < cfg.FailureBackoff {
		cfg.FailureBackoffCap = max(cfg.FailureBackoff, time.Minute)
	}
	if cfg.ENILimitInhibit <= 0 {
		cfg.ENILimitInhibit = time.Minute
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 2 * time.Minute
	}
	p := &ENIPool{cfg: cfg}
	p.poolCore = newPoolCore[*eniRes, *eniRes](p, cl, vsw, c, log, ev)
	return p, nil
}

func ipFromMeta(m cloud.ENIMeta, v6 []netip.Addr) IP {
	ip := IP{ENIID: m.ID, MAC: m.MAC, IPv4: m.PrimaryIP, Gateway4: m.Gateway, Gateway6: m.Gateway6, CIDR4: m.CIDR, CIDR6: m.CIDR6}
	if len(v6) > 0 {
		ip.IPv6 = v6[0]
	}
	return ip
}

// Allocate gives owner a whole ENI: the one it holds, the one reserved
// for it, an idle one, or a new one.
func (p *ENIPool) Allocate(ctx context.Context, owner string) (IP, error) {
	return p.allocate(ctx, owner, "an ENI")
}

// takeIdleLocked gives owner the ENI reserved for it, else the first idle
// one in ID order.
func (p *ENIPool) takeIdleLocked(owner string) *eniRes {
	now := p.clock.Now()
	var best *eniRes
	for _, r := range p.sortedLocked() {
		if r.releasing {
			continue
		}
		ok, own := r.availableTo(owner, now, 0)
		if own {
			best = r
			break
		}
		if ok && best == nil {
			best = r
		}
	}
	return p.takeLocked(best, owner, now)
}

func (p *ENIPool) sortedLocked() []*eniRes {
	out := make([]*eniRes, 0, len(p.enis))
	for _, r := range p.enis {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ip.ENIID < out[j].ip.ENIID })
	return out
}

// Run plans on demand and every SyncPeriod until ctx ends, then closes
// the pool (Close): it returns once no cloud call of the pool is left.
func (p *ENIPool) Run(ctx context.Context) {
	defer p.Close()
	t := p.clock.NewTicker(p.cfg.SyncPeriod)
	defer t.Stop()
	p.plan() // warm up to MinIdle at once
	for {
		select {
		case <-ctx.Done():
			p.failAll(ctx.Err())
			return
		case <-p.kickc:
			p.plan()
		case <-t.C():
			p.syncRound(ctx)
		}
	}
}

func (p *ENIPool) plan() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	p.unplanned = time.Time{}
	idle, want := p.demandLocked(now, p.cfg.MinIdle)
	for want > 0 && len(p.enis)+p.creating < p.cfg.MaxENI && !now.Before(p.createPause) {
		p.creating++
		want--
		key := p.nextKey("eni")
		p.ops.start(func(ctx context.Context) { p.create(ctx, key) })
	}
	// Waiters fail only when nothing is on its way: no creation, and no
	// ENI being released whose slot a creation could then take.
	if len(p.waiters) > p.creating && p.creating == 0 && !p.releasingLocked() {
		err := ErrInsufficientIPs
		if len(p.enis) >= p.cfg.MaxENI {
			err = fmt.Errorf("%w: all %d ENIs the instance type allows are in use", ErrNoCapacity, p.cfg.MaxENI)
		}
		for _, w := range p.waiters {
			w.ch <- result{err: err}
		}
		p.waiters = nil
	}
	if len(p.waiters) == 0 && p.creating == 0 && idle > p.cfg.MaxIdle {
		excess := idle - p.cfg.MaxIdle
		for _, r := range p.sortedLocked() {
			if excess == 0 {
				break
			}
			if r.inUse || r.releasing || (r.owner != "" && now.Before(r.reservedUntil)) {
				continue
			}
			excess--
			p.releaseENILocked(r)
		}
	}
}

// idleLocked counts idle, unreserved ENIs.
func (p *ENIPool) idleLocked(now time.Time) int {
	n := 0
	for _, r := range p.enis {
		if !r.inUse && !r.releasing && (r.owner == "" || !now.Before(r.reservedUntil)) {
			n++
		}
	}
	return n
}

// inflightLocked is the ENIs being created: a creation adds one.
func (p *ENIPool) inflightLocked() int { return p.creating }

func (p *ENIPool) create(ctx context.Context, key string) {
	var r cloud.ReadyENI
	var ids []string // the ENI this creation made, while it is in flight
	v, err := p.vsw.Pick(ctx)
	if err == nil {
		req := cloud.CreateENIRequest{IntentKey: key, VSwitchID: v.ID, SecurityGroups: p.cfg.SecurityGroups, Tags: p.cfg.Tags,
			Description: "interface create by terway", ResourceGroupID: p.cfg.ResourceGroupID,
			OnCreated: func(id string) { p.mu.Lock(); notePending(&p.pendingENIs, &ids, id); p.mu.Unlock() }}
		if p.cfg.DualStack {
			req.IPv6 = 1
		}
		r, err = p.cloud.AllocateENI(ctx, req)
		if cloud.IsExhausted(err) {
			p.vsw.Block(v.ID)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creating--
	forgetPending(p.pendingENIs, ids)
	now := p.clock.Now()
	if err != nil {
		p.failures++
		p.starved = cloud.IsExhausted(err) || errors.Is(err, cloud.ErrNoVSwitch)
		d := min(p.cfg.FailureBackoff<<min(p.failures-1, 6), p.cfg.FailureBackoffCap)
		p.createPauseHard = cloud.ErrorCode(err) == cloud.CodeENIPerInstanceLimit
		if p.createPauseHard {
			d = p.cfg.ENILimitInhibit
		}
		if w, ok := cloud.ThrottleWait(err, now); ok {
			d = w // the budget is spent until the next window, nothing failed
		}
		p.createPause = now.Add(d)
		p.events.Warn("AllocResourceFailed", fmt.Sprintf("create an ENI: %v", err))
		p.kick()
		return
	}
	p.failures, p.starved, p.createPauseHard = 0, false, false
	p.enis[r.ID] = &eniRes{ip: ipFromMeta(r.Meta, r.IPv6)}
	p.lastChange = now
	p.kick()
}

func (p *ENIPool) releaseENILocked(r *eniRes) {
	r.releasing = true
	// Only an expired reservation's owner can be left: it holds nothing
	// now, as in MultiIP.releaseENILocked.
	p.owners.forget(r)
	p.ops.start(func(ctx context.Context) {
		err := p.cloud.ReleaseENI(ctx, r.ip.ENIID)
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			r.releasing = false
			p.events.Warn("DisposeResourceFailed", fmt.Sprintf("release ENI %s: %v", r.ip.ENIID, err))
			return
		}
		delete(p.enis, r.ip.ENIID)
		p.slotsChangedLocked()
		p.kick()
	})
}

// Restore adopts the secondary ENIs attached to this node that carry the
// pool's ownership tags (Owner, which includes TagFilter; waiting out attaches in
// flight, finishing detaches), sweeps our Available orphans and marks the
// ENIs of holdings in use.
func (p *ENIPool) Restore(ctx context.Context, holdings []Holding) (RestoreReport, error) {
	var rep RestoreReport
	if err := p.restoreAttached(ctx, p.cfg.owner(), holdings, &rep); err != nil {
		return rep, err
	}
	if len(p.cfg.owner()) > 0 {
		orphans, err := p.cloud.DescribeENIs(ctx, cloud.ENIFilter{Tags: p.cfg.owner(), Status: cloud.StatusAvailable})
		if err != nil {
			return rep, fmt.Errorf("sweep orphan ENIs: %w", err)
		}
		for _, e := range orphans {
			// Checked here too, not left to the API's tag filter: Trunk
			// and Member ENIs are never ours to delete.
			if e.Type != "Secondary" || !cloud.HasTags(e.Tags, p.cfg.owner()) {
				continue
			}
			if err := p.cloud.DeleteENI(ctx, e.ID); err != nil {
				return rep, fmt.Errorf("sweep orphan ENI %s: %w", e.ID, err)
			}
			rep.Swept = append(rep.Swept, e.ID)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rep.Broken = p.restoreHoldingsLocked(holdings, p.clock.Now(), func(h Holding) *eniRes {
		if r := p.enis[h.ENIID]; r != nil {
			return r
		}
		return p.byAddrLocked(h.IPv4) // a holding rebuilt without its ENI
	})
	return rep, nil
}

// addrsOf is e's primary address: the one a pod of the ENI gets.
func (p *ENIPool) addrsOf(e cloud.ENI) []netip.Addr { return []netip.Addr{e.PrimaryIP} }

// adoptLocked adds e, idle, as metadata shows it.
func (p *ENIPool) adoptLocked(e cloud.ENI, m cloud.ENIMeta, _ []Holding) {
	p.enis[e.ID] = &eniRes{ip: ipFromMeta(m, e.IPv6)}
}

// byAddrLocked finds the ENI whose primary address is v4.
func (p *ENIPool) byAddrLocked(v4 netip.Addr) *eniRes {
	for _, r := range p.enis {
		if r.ip.IPv4 == v4 {
			return r
		}
	}
	return nil
}

func (p *ENIPool) releasingLocked() bool {
	for _, r := range p.enis {
		if r.releasing {
			return true
		}
	}
	return false
}
