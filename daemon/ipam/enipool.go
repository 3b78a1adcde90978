package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"sync"
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
	cfg    ENIPoolConfig
	cloud  Cloud
	vsw    VSwitches
	clock  clock.WithTicker
	log    *slog.Logger
	events Events
	kickc  chan struct{}
	ops    *ops

	mu       sync.Mutex
	enis     map[string]*eniRes
	owners   holdings[*eniRes]
	waiters  []*waiter
	creating int
	pause    time.Time
	// pauseLimit: the pause is the instance's ENI limit (see
	// slotsChangedLocked).
	pauseLimit bool
	failures   int
	starved    bool
	lastChange time.Time
	seq        uint64
	// pendingENIs are ENIs this pool's creations made and have not
	// finished with; strays the unknown ENIs of ours being adopted or
	// released (strays.go).
	pendingENIs map[string]bool
	strays      map[string]bool
	// syncs counts the completed sync rounds (Stats.Syncs).
	syncs int
}

type eniRes struct {
	ip IP
	claim
	releasing bool
}

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
	if c == nil {
		c = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ev == nil {
		ev = nopEvents{}
	}
	return &ENIPool{cfg: cfg, cloud: cl, vsw: vsw, clock: c, log: log, events: ev, kickc: make(chan struct{}, 1),
		ops: newOps(), enis: map[string]*eniRes{}, owners: holdings[*eniRes]{}, lastChange: c.Now()}, nil
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
	p.mu.Lock()
	if r, ok := p.owners[owner]; ok && !r.releasing {
		p.owners.take(r, owner)
		p.mu.Unlock()
		return r.ip, nil
	}
	if r := p.takeIdleLocked(owner); r != nil {
		p.mu.Unlock()
		p.kick()
		return r.ip, nil
	}
	w := &waiter{owner: owner, ch: make(chan result, 1)}
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()
	p.kick()
	select {
	case r := <-w.ch:
		return r.ip, r.err
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		select {
		case r := <-w.ch:
			if r.err == nil {
				p.releaseLocked(owner, time.Time{})
			}
		default:
			w.done = true
		}
		return IP{}, fmt.Errorf("allocate an ENI for %s: %w", owner, ctx.Err())
	}
}

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
	if best == nil {
		return nil
	}
	p.owners.take(best, owner)
	p.lastChange = now
	return best
}

func (p *ENIPool) sortedLocked() []*eniRes {
	out := make([]*eniRes, 0, len(p.enis))
	for _, r := range p.enis {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ip.ENIID < out[j].ip.ENIID })
	return out
}

// Release gives owner's ENI back (idle, still attached), reserved for
// owner until stickyUntil when that is in the future.
func (p *ENIPool) Release(owner string, stickyUntil time.Time) {
	p.mu.Lock()
	p.releaseLocked(owner, stickyUntil)
	p.mu.Unlock()
	p.kick()
}

func (p *ENIPool) releaseLocked(owner string, stickyUntil time.Time) {
	r, ok := p.owners[owner]
	if !ok || r.releasing {
		return
	}
	now := p.clock.Now()
	p.owners.release(owner, stickyUntil, now)
	p.lastChange = now
}

// Holds reports the ENI owner holds or has reserved.
func (p *ENIPool) Holds(owner string) (IP, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.owners[owner]
	if !ok {
		return IP{}, false
	}
	return r.ip, true
}

// Owners lists who holds or has reserved an ENI.
func (p *ENIPool) Owners() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owners.owners()
}

// Starved reports whether the last creation failed for lack of addresses.
func (p *ENIPool) Starved() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starved
}

// Stats returns the pool's counts (addresses are ENIs here).
func (p *ENIPool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{ENIs: len(p.enis), Total: len(p.enis), Inflight: p.creating, Waiting: len(p.waiters), Starved: p.starved,
		Syncs: p.syncs}
	now := p.clock.Now()
	for _, r := range p.enis {
		switch {
		case r.inUse:
			st.InUse++
		case r.owner != "" && now.Before(r.reservedUntil):
			st.Reserved++
		case !r.releasing:
			st.Idle++
		}
	}
	return st
}

// Addresses lists the pool's ENIs with state and owner.
func (p *ENIPool) Addresses() []Address {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	var out []Address
	for _, r := range p.sortedLocked() {
		st := "idle"
		switch {
		case r.inUse:
			st = "inuse"
		case r.releasing:
			st = "releasing"
		case r.owner != "" && now.Before(r.reservedUntil):
			st = "reserved"
		}
		out = append(out, Address{IP: r.ip, State: st, Owner: r.owner})
	}
	return out
}

func (p *ENIPool) kick() {
	select {
	case p.kickc <- struct{}{}:
	default:
	}
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
			p.mu.Lock()
			for _, w := range p.waiters {
				if !w.done {
					w.ch <- result{err: ctx.Err()}
				}
			}
			p.waiters = nil
			p.mu.Unlock()
			return
		case <-p.kickc:
			p.plan()
		case <-t.C():
			p.sync(ctx)
			p.plan()
			p.mu.Lock()
			p.syncs++
			p.mu.Unlock()
		}
	}
}

// Close cancels the pool's cloud calls in flight and waits until they
// have returned; the pool starts no new ones. Run closes the pool when it
// returns; Close is for a pool that never ran. It may be called more
// than once.
func (p *ENIPool) Close() { p.ops.stop() }

func (p *ENIPool) plan() {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Serve waiters from idle ENIs.
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if w.done {
			continue
		}
		if r := p.takeIdleLocked(w.owner); r != nil {
			w.ch <- result{ip: r.ip}
			continue
		}
		kept = append(kept, w)
	}
	p.waiters = kept
	now := p.clock.Now()
	idle := p.idleLocked(now)
	want := len(p.waiters) + max(0, p.cfg.MinIdle-idle) - p.creating
	for want > 0 && len(p.enis)+p.creating < p.cfg.MaxENI && !now.Before(p.pause) {
		p.creating++
		want--
		p.seq++
		key := fmt.Sprintf("eni/%d/%d", now.UnixNano(), p.seq)
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
		p.pauseLimit = cloud.ErrorCode(err) == cloud.CodeENIPerInstanceLimit
		if p.pauseLimit {
			d = p.cfg.ENILimitInhibit
		}
		p.pause = now.Add(d)
		p.events.Warn("AllocResourceFailed", fmt.Sprintf("create an ENI: %v", err))
		p.kick()
		return
	}
	p.failures, p.starved, p.pauseLimit = 0, false, false
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

// slotsChangedLocked lifts a pause for the instance's ENI limit once the
// ENIs attached to the instance changed (one released, or an unknown one
// adopted): see MultiIP.slotsChangedLocked.
func (p *ENIPool) slotsChangedLocked() {
	if p.pauseLimit {
		p.pause, p.pauseLimit = time.Time{}, false
	}
}

// Restore adopts the secondary ENIs attached to this node that carry the
// pool's ownership tags (Owner, which includes TagFilter; waiting out attaches in
// flight, finishing detaches), sweeps our Available orphans and marks the
// ENIs of holdings in use.
func (p *ENIPool) Restore(ctx context.Context, holdings []Holding) (RestoreReport, error) {
	var rep RestoreReport
	attached, err := p.cloud.DescribeENIs(ctx, cloud.ENIFilter{InstanceID: p.cloud.InstanceID()})
	if err != nil {
		return rep, fmt.Errorf("restore: %w", err)
	}
	for _, e := range attached {
		take, err := restorable(ctx, p.cloud, p.log, p.cfg.owner(), e)
		if err != nil {
			return rep, err
		}
		if !take {
			continue
		}
		m, err := p.cloud.WaitMetadata(ctx, e.MAC, []netip.Addr{e.PrimaryIP}, e.IPv6)
		if err != nil {
			return rep, fmt.Errorf("restore: ENI %s: %w", e.ID, err)
		}
		p.mu.Lock()
		p.enis[e.ID] = &eniRes{ip: ipFromMeta(m, e.IPv6)}
		p.mu.Unlock()
		rep.ENIs++
		rep.Addresses++
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
	now := p.clock.Now()
	for _, h := range holdings {
		r := p.enis[h.ENIID]
		if r == nil {
			r = p.byAddrLocked(h.IPv4) // a holding rebuilt without its ENI
		}
		if r == nil || r.owner != "" {
			if !h.Optional {
				rep.Broken = append(rep.Broken, h)
			}
			continue
		}
		p.owners.restore(r, h.Owner, h.ReservedUntil, now)
	}
	return rep, nil
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
