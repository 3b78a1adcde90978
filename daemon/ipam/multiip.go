package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/terway-sim/terway/daemon/cloud"
)

// Errors of allocation. They say why a pod cannot get an address now;
// the CNI plugin turns them into a clear failure the runtime retries.
var (
	// ErrNoCapacity: the node holds as many addresses as its instance
	// type (and max_eni) allow, all in use.
	ErrNoCapacity = errors.New("no capacity left on this node")
	// ErrInsufficientIPs: the cloud cannot give more addresses now (vSwitch
	// dry, ENI limit, repeated failures); it recovers by itself.
	ErrInsufficientIPs = errors.New("no address can be allocated now")
)

// IP is one pod address of the shared-ENI pool: an IPv4 and, in dual
// stack, an IPv6 on the same secondary ENI.
type IP struct {
	ENIID    string
	MAC      string
	IPv4     netip.Addr
	IPv6     netip.Addr
	Gateway4 netip.Addr
	Gateway6 netip.Addr
	CIDR4    netip.Prefix
	CIDR6    netip.Prefix
}

// ID is the resource ID in Terway's form: "<mac>.<ipv4>" or
// "<mac>.<ipv4>-<ipv6>".
func (ip IP) ID() string {
	if ip.IPv6.IsValid() {
		return ip.MAC + "." + ip.IPv4.String() + "-" + ip.IPv6.String()
	}
	return ip.MAC + "." + ip.IPv4.String()
}

// MultiIPConfig sizes and shapes the pool.
type MultiIPConfig struct {
	// MaxENI is how many secondary ENIs the node may hold; IPsPerENI how
	// many addresses each (its primary included).
	MaxENI    int
	IPsPerENI int
	// Capacity bounds the addresses held (default MaxENI × IPsPerENI).
	Capacity int
	// MinIdle is the warm pool kept ready; MaxIdle the idle addresses
	// above which the pool gives addresses back.
	MinIdle, MaxIdle int
	DualStack        bool
	// BatchWindow is how long a new demand waits for more to aggregate
	// into one call (Terway: 300ms).
	BatchWindow time.Duration
	// MaxConcurrentCreates bounds ENIs being created at once (Terway: 3).
	MaxConcurrentCreates int
	// Cooldown is how long a released address waits before reuse.
	Cooldown time.Duration
	// ExhaustedInhibit is how long an ENI whose vSwitch is dry is not asked
	// for addresses (Terway: 10m); ENILimitInhibit how long ENI creation
	// pauses after EniPerInstanceLimitExceeded (Terway: 1m); FailureBackoff
	// how long after another failure.
	ExhaustedInhibit time.Duration
	ENILimitInhibit  time.Duration
	FailureBackoff   time.Duration
	// FailureBackoffCap bounds the doubling of FailureBackoff (default a
	// minute).
	FailureBackoffCap time.Duration
	// IdleReclaimAfter enables idle reclaim: when the pool has not changed
	// for this long, IdleReclaimBatch idle addresses above MinIdle are
	// given back at once and then every IdleReclaimInterval, stretched by
	// up to IdleReclaimJitter × itself at random (wait.Jitter; 0: exactly
	// the interval), so that nodes which went quiet together do not call
	// the cloud together. What the reclaim itself gives back is no change:
	// otherwise each round would restart the quiet period and rounds would
	// come IdleReclaimAfter apart whatever the interval.
	IdleReclaimAfter    time.Duration
	IdleReclaimInterval time.Duration
	IdleReclaimBatch    int
	IdleReclaimJitter   float64
	// SyncPeriod is how often the pool is reconciled with metadata and
	// resized (the periodic loop; demand never waits for it).
	SyncPeriod time.Duration
	// PackENIs fills the fullest ENI first (most_ips, Terway's default);
	// false fills the emptiest first (least_ips).
	PackENIs bool

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

func (c *MultiIPConfig) defaults() error {
	if c.MaxENI < 1 || c.IPsPerENI < 1 {
		return fmt.Errorf("max ENIs %d and addresses per ENI %d must be at least 1", c.MaxENI, c.IPsPerENI)
	}
	if c.Capacity <= 0 || c.Capacity > c.MaxENI*c.IPsPerENI {
		c.Capacity = c.MaxENI * c.IPsPerENI
	}
	if c.MaxIdle > c.Capacity {
		c.MaxIdle = c.Capacity
	}
	if c.MinIdle > c.MaxIdle {
		c.MinIdle = c.MaxIdle
	}
	if c.MaxConcurrentCreates <= 0 {
		c.MaxConcurrentCreates = 3
	}
	if c.ExhaustedInhibit <= 0 {
		c.ExhaustedInhibit = 10 * time.Minute
	}
	if c.ENILimitInhibit <= 0 {
		c.ENILimitInhibit = time.Minute
	}
	if c.FailureBackoff <= 0 {
		c.FailureBackoff = 5 * time.Second
	}
	if c.FailureBackoffCap < c.FailureBackoff {
		c.FailureBackoffCap = max(c.FailureBackoff, time.Minute)
	}
	if c.SyncPeriod <= 0 {
		c.SyncPeriod = 2 * time.Minute
	}
	if c.IdleReclaimInterval <= 0 {
		c.IdleReclaimInterval = 10 * time.Minute
	}
	if c.IdleReclaimBatch <= 0 {
		c.IdleReclaimBatch = 5
	}
	if !(c.IdleReclaimJitter >= 0) || math.IsInf(c.IdleReclaimJitter, 0) {
		return fmt.Errorf("idle reclaim jitter factor %g must be a finite number >= 0", c.IdleReclaimJitter)
	}
	return checkTagFilter(c.Tags, c.Owner, c.TagFilter)
}

// owner is Owner, or Tags without it.
func (c *MultiIPConfig) owner() map[string]string {
	if c.Owner != nil {
		return c.Owner
	}
	return c.Tags
}

// maxPerCall is how many addresses one Assign or Unassign call carries
// (the API's limit).
const maxPerCall = 10

// maxPerCreate is how many addresses one CreateNetworkInterface asks for:
// the primary and up to 49 secondaries (the API's limit). An ENI created
// for a burst comes with as many as the burst needs, so a new ENI costs
// no Assign call at all (Terway creates with at most 10). With dual stack
// every address is paired with an IPv6 one, and an ENI that is not
// attached holds at most 10 of those: maxPerCall then.
const maxPerCreate = 50

// Events receives what the pool wants operators to see.
type Events interface {
	// Warn reports a problem with a resource (Terway: ResourceInvalid,
	// AllocResourceFailed, DisposeResourceFailed).
	Warn(reason, message string)
}

// MultiIP is the shared-ENI address pool of ENIMultiIP mode. Addresses of
// secondary ENIs (their primaries included) are handed to pods. Demand is
// served from idle addresses at once; otherwise it is aggregated (up to
// ten addresses per call) into Assign calls on ENIs with room, or into new
// ENIs, without waiting for the periodic loop. Each ENI has at most one
// cloud operation in flight, so calls never conflict with each other.
type MultiIP struct {
	cfg    MultiIPConfig
	cloud  Cloud
	vsw    VSwitches
	clock  clock.WithTicker
	log    *slog.Logger
	events Events

	kickc chan struct{}
	ops   *ops

	mu      sync.Mutex
	enis    map[string]*eniSlot
	owners  holdings[*ipSlot] // owner → the address it holds or has reserved
	waiters []*waiter
	// creating counts ENIs being created; inflight the addresses that
	// calls in flight will add.
	creating    int
	inflight    int
	createPause time.Time
	// createGen counts creations started, so that a sweep can tell
	// whether one began while it looked.
	createGen uint64
	// createPauseHard: the pause is the instance's ENI limit, which
	// waiting a backoff does not cure.
	createPauseHard bool
	failures        int
	lastErr         error
	// retryAt asks Run to plan again when a transient backoff ends.
	retryAt     time.Time
	lastChange  time.Time
	nextReclaim time.Time
	seq         uint64
	orphanSeen  map[netip.Addr]int
	// starved is set while the cloud answers that the vSwitch is dry.
	starved bool
	// syncs counts the completed sync rounds (Stats.Syncs).
	syncs int
	// pendingENIs are ENIs this pool's creations made and have not
	// finished with; strays the unknown ENIs of ours being adopted or
	// released (strays.go).
	pendingENIs map[string]bool
	strays      map[string]bool
}

type eniSlot struct {
	cloud.ENIMeta
	ips      []*ipSlot
	busy     bool // a cloud call on this ENI is in flight
	pending  int  // addresses that call will add
	inhibit  time.Time
	deleting bool
}

type ipSlot struct {
	eni *eniSlot
	v4  netip.Addr
	v6  netip.Addr
	claim
	// releasing: being unassigned, or its ENI released; no longer
	// anyone's.
	releasing bool
}

// idle reports whether s is neither in use nor being given back (it may
// be reserved).
func (s *ipSlot) idle() bool { return !s.inUse && !s.releasing }

type waiter struct {
	owner string
	ch    chan result
	done  bool
}

type result struct {
	ip  IP
	err error
}

// NewMultiIP returns an empty pool; call Restore, then Run.
func NewMultiIP(cfg MultiIPConfig, cl Cloud, vsw VSwitches, c clock.WithTicker, log *slog.Logger, ev Events) (*MultiIP, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
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
	return &MultiIP{cfg: cfg, cloud: cl, vsw: vsw, clock: c, log: log, events: ev,
		kickc: make(chan struct{}, 1), ops: newOps(), enis: map[string]*eniSlot{}, owners: holdings[*ipSlot]{},
		orphanSeen: map[netip.Addr]int{}, lastChange: c.Now()}, nil
}

type nopEvents struct{}

func (nopEvents) Warn(string, string) {}

func (p *MultiIP) ipOf(s *ipSlot) IP {
	e := s.eni
	return IP{ENIID: e.ID, MAC: e.MAC, IPv4: s.v4, IPv6: s.v6, Gateway4: e.Gateway, Gateway6: e.Gateway6,
		CIDR4: e.CIDR, CIDR6: e.CIDR6}
}

// Allocate returns the address of owner ("namespace/name"): the one it
// already holds (a retried ADD), the one reserved for it (sticky), an
// idle one, or a new one. A caller that gives up does not lose the
// address: it lands in the pool.
func (p *MultiIP) Allocate(ctx context.Context, owner string) (IP, error) {
	p.mu.Lock()
	if s, ok := p.owners[owner]; ok && !s.releasing {
		p.owners.take(s, owner)
		ip := p.ipOf(s)
		p.mu.Unlock()
		return ip, nil
	}
	if s := p.takeIdleLocked(owner); s != nil {
		ip := p.ipOf(s)
		p.mu.Unlock()
		p.kick()
		return ip, nil
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
		case r := <-w.ch: // delivered meanwhile: give it back
			if r.err == nil {
				p.releaseLocked(owner, time.Time{})
			}
		default:
			w.done = true
		}
		return IP{}, fmt.Errorf("allocate an address for %s: %w", owner, ctx.Err())
	}
}

// takeIdleLocked hands owner an idle address: its reservation if it has
// one, else the idle address that has cooled down longest.
func (p *MultiIP) takeIdleLocked(owner string) *ipSlot {
	now := p.clock.Now()
	var best *ipSlot
	for _, e := range p.enis {
		if e.deleting {
			continue
		}
		for _, s := range e.ips {
			if s.releasing {
				continue
			}
			ok, own := s.availableTo(owner, now, p.cfg.Cooldown)
			if own {
				best = s
				break
			}
			if ok && (best == nil || s.releasedAt.Before(best.releasedAt)) {
				best = s
			}
		}
	}
	if best == nil {
		return nil
	}
	p.owners.take(best, owner)
	p.lastChange = now
	return best
}

// Release gives owner's address back to the pool. With stickyUntil in the
// future the address stays reserved for owner until then (StatefulSet
// pods get their address back). Releasing an owner without an address is
// a no-op.
func (p *MultiIP) Release(owner string, stickyUntil time.Time) {
	p.mu.Lock()
	p.releaseLocked(owner, stickyUntil)
	p.mu.Unlock()
	p.kick()
}

func (p *MultiIP) releaseLocked(owner string, stickyUntil time.Time) {
	s, ok := p.owners[owner]
	if !ok || s.releasing {
		return
	}
	now := p.clock.Now()
	p.owners.release(owner, stickyUntil, now)
	p.lastChange = now
}

// Holds reports the address owner holds or has reserved.
func (p *MultiIP) Holds(owner string) (IP, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.owners[owner]
	if !ok {
		return IP{}, false
	}
	return p.ipOf(s), true
}

// Address is one address of the pool with its state ("idle", "inuse",
// "reserved", "releasing") and owner.
type Address struct {
	IP    IP
	State string
	Owner string
}

// Addresses lists every address the pool holds, ordered by ENI and
// address.
func (p *MultiIP) Addresses() []Address {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	var out []Address
	for _, e := range p.enis {
		for _, s := range e.ips {
			st := "idle"
			switch {
			case s.inUse:
				st = "inuse"
			case s.releasing:
				st = "releasing"
			case s.reserved(now):
				st = "reserved"
			}
			out = append(out, Address{IP: p.ipOf(s), State: st, Owner: s.owner})
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

// Owners lists who holds or has reserved an address.
func (p *MultiIP) Owners() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owners.owners()
}

// Starved reports whether the pool's last growth failed because the cloud
// had no addresses (cleared by the next successful growth).
func (p *MultiIP) Starved() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starved
}

// Stats are the pool's counts.
type Stats struct {
	ENIs, Total, Idle, InUse, Reserved, Inflight, Waiting int
	// Starved: the pool's last growth failed because the cloud had no
	// addresses (see Starved).
	Starved bool
	// Syncs counts the periodic sync rounds (SyncPeriod: the sync and the
	// plan after it) the pool has completed: one that completes after a
	// moment proves that a whole round ran after it.
	Syncs int
}

// Stats returns the current counts.
func (p *MultiIP) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{ENIs: len(p.enis), Inflight: p.inflight, Waiting: len(p.waiters), Starved: p.starved, Syncs: p.syncs}
	now := p.clock.Now()
	for _, e := range p.enis {
		for _, s := range e.ips {
			st.Total++
			switch {
			case s.inUse:
				st.InUse++
			case s.releasing:
			case s.reserved(now):
				st.Reserved++
			default:
				st.Idle++
			}
		}
	}
	return st
}

// kick asks the loop to plan now (coalesced).
func (p *MultiIP) kick() {
	select {
	case p.kickc <- struct{}{}:
	default:
	}
}

// Run plans on demand and every SyncPeriod until ctx ends, then closes
// the pool (Close): it returns once no cloud call of the pool is left.
func (p *MultiIP) Run(ctx context.Context) {
	defer p.Close()
	t := p.clock.NewTicker(p.cfg.SyncPeriod)
	defer t.Stop()
	p.plan() // warm up to MinIdle at once, not a sync period later
	// Idle reclaim happens in quiet times, when nothing kicks the pool: a
	// timer wakes the loop when the next round is due. It is re-armed
	// whenever that time moves (a change restarts the quiet period, a
	// round draws the next jittered interval), and not again for a time
	// it already fired at: a round that could not run then (demand in
	// flight) runs at the kick that ends the demand.
	var reclaim, retry clock.Timer
	var reclaimAt, reclaimFired time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
		if reclaim != nil {
			reclaim.Stop()
		}
	}()
	for {
		var retryC, reclaimC <-chan time.Time
		if at := p.takeRetry(); !at.IsZero() {
			if retry != nil {
				retry.Stop()
			}
			retry = p.clock.NewTimer(max(0, at.Sub(p.clock.Now())))
		}
		if retry != nil {
			retryC = retry.C()
		}
		if at := p.reclaimDue(); !at.IsZero() && !at.Equal(reclaimAt) && !at.Equal(reclaimFired) {
			if reclaim != nil {
				reclaim.Stop()
			}
			reclaim, reclaimAt = p.clock.NewTimer(max(0, at.Sub(p.clock.Now()))), at
		}
		if reclaim != nil {
			reclaimC = reclaim.C()
		}
		select {
		case <-retryC:
			retry = nil
			p.plan()
		case <-reclaimC:
			reclaim, reclaimFired, reclaimAt = nil, reclaimAt, time.Time{}
			p.plan()
		case <-ctx.Done():
			p.failAll(ctx.Err())
			return
		case <-p.kickc:
			if p.cfg.BatchWindow > 0 && p.hasNewDemand() {
				// Let a burst gather so that it becomes few calls.
				bt := p.clock.NewTimer(p.cfg.BatchWindow)
				select {
				case <-bt.C():
				case <-ctx.Done():
					bt.Stop()
					p.failAll(ctx.Err())
					return
				}
			}
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
// have returned; the pool starts no new ones. The pool's state stays
// readable. Run closes the pool when it returns; Close is for a pool
// that never ran. It may be called more than once.
func (p *MultiIP) Close() { p.ops.stop() }

func (p *MultiIP) hasNewDemand() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters) > p.inflight
}

func (p *MultiIP) failAll(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.waiters {
		if !w.done {
			w.ch <- result{err: err}
		}
	}
	p.waiters = nil
}

// plan serves waiters from idle addresses and starts the calls that close
// the gap between demand (waiters plus the warm pool) and supply, or, with
// no demand, gives back what is above the limits.
func (p *MultiIP) plan() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked()
	now := p.clock.Now()
	idle := p.idleLocked(now)
	deficit := len(p.waiters) + max(0, p.cfg.MinIdle-idle) - p.inflight
	if room := p.cfg.Capacity - p.heldLocked() - p.inflight; deficit > room {
		deficit = room
	}
	if deficit > 0 {
		deficit = p.startAssignsLocked(now, deficit)
		p.startCreatesLocked(now, deficit)
	}
	p.failHopelessLocked(now)
	if len(p.waiters) == 0 && p.inflight == 0 {
		p.shrinkLocked(now, idle)
	}
}

// serveLocked hands idle addresses to waiters in arrival order.
func (p *MultiIP) serveLocked() {
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if w.done {
			continue
		}
		s := p.takeIdleLocked(w.owner)
		if s == nil {
			kept = append(kept, w)
			continue
		}
		w.ch <- result{ip: p.ipOf(s)}
	}
	for i := len(kept); i < len(p.waiters); i++ {
		p.waiters[i] = nil
	}
	p.waiters = kept
}

// idleLocked counts idle, unreserved addresses (cooling ones included:
// they will serve soon).
func (p *MultiIP) idleLocked(now time.Time) int {
	n := 0
	for _, e := range p.enis {
		if e.deleting {
			continue
		}
		for _, s := range e.ips {
			if s.idle() && !s.reserved(now) {
				n++
			}
		}
	}
	return n
}

func (p *MultiIP) heldLocked() int {
	n := 0
	for _, e := range p.enis {
		n += len(e.ips)
	}
	return n
}

// sortedENIsLocked orders ENIs by fill: fullest first with PackENIs.
func (p *MultiIP) sortedENIsLocked() []*eniSlot {
	out := make([]*eniSlot, 0, len(p.enis))
	for _, e := range p.enis {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := len(out[i].ips)+out[i].pending, len(out[j].ips)+out[j].pending
		if a != b {
			if p.cfg.PackENIs {
				return a > b
			}
			return a < b
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (p *MultiIP) nextKey(kind string) string {
	p.seq++
	return fmt.Sprintf("%s/%d/%d", kind, p.clock.Now().UnixNano(), p.seq)
}

// takeRetry returns and clears the pending retry time.
func (p *MultiIP) takeRetry() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := p.retryAt
	p.retryAt = time.Time{}
	return at
}
