package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"sort"
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
	// ErrAddressLost: the pod's address left the node out of band (an
	// operator unassigned it, or detached or deleted its ENI); the claim
	// is kept so that nobody else gets it, and the pod is evicted to
	// start over with a new address.
	ErrAddressLost = errors.New("the pod's address was lost out of band; the pod is being evicted")
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
	poolCore[*eniSlot, *ipSlot]
	cfg MultiIPConfig

	// The core's mutex guards the fields below. inflight counts the
	// addresses that calls in flight will add; createRoom the further
	// addresses that the ENIs being created will have room for.
	inflight   int
	createRoom int
	// createGen counts creations started, so that a sweep can tell
	// whether one began while it looked.
	createGen uint64
	lastErr   error
	// retryAt asks Run to plan again when a transient backoff ends.
	retryAt     time.Time
	nextReclaim time.Time
	orphanSeen  map[netip.Addr]int
	// The heal's (heal.go): lost are the slots, in use, whose address an
	// operator took away out of band (the claim is kept until its owner
	// is released); goneENIs the ENIs detached or deleted out of band
	// that lost claims still name (kept from the orphan sweep); the
	// suspects the differences the last round saw.
	lost        map[netip.Addr]*ipSlot
	goneENIs    map[string]*eniSlot
	suspectIPs  map[netip.Addr]healSuspect
	suspectENIs map[string]uint64
}

type eniSlot struct {
	cloud.ENIMeta
	ips     []*ipSlot
	busy    bool // a cloud call on this ENI is in flight
	pending int  // addresses that call will add
	// gen counts the pool's calls started on this ENI: the heal acts only
	// on what two rounds saw with no call of the pool in between.
	gen      uint64
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
	// unsure: an unassign of it failed and the cloud could not say
	// whether it was applied; nobody gets it until the sync has asked
	// again (a pod given an address the cloud took back would look like
	// an operator's doing to the heal).
	unsure bool
}

// idle reports whether s is neither in use nor being given back (it may
// be reserved).
func (s *ipSlot) idle() bool { return !s.inUse && !s.releasing && !s.unsure }

func (s *ipSlot) isReleasing() bool { return s.releasing }

// podIP is s as a pod gets it: its addresses on its ENI.
func (s *ipSlot) podIP() IP {
	e := s.eni
	return IP{ENIID: e.ID, MAC: e.MAC, IPv4: s.v4, IPv6: s.v6, Gateway4: e.Gateway, Gateway6: e.Gateway6,
		CIDR4: e.CIDR, CIDR6: e.CIDR6}
}

func (e *eniSlot) resources() []*ipSlot { return e.ips }

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
	p := &MultiIP{cfg: cfg, orphanSeen: map[netip.Addr]int{}, lost: map[netip.Addr]*ipSlot{}, goneENIs: map[string]*eniSlot{}}
	p.poolCore = newPoolCore[*eniSlot, *ipSlot](p, cl, vsw, c, log, ev)
	return p, nil
}

type nopEvents struct{}

func (nopEvents) Warn(string, string) {}

// Allocate returns the address of owner ("namespace/name"): the one it
// already holds (a retried ADD), the one reserved for it (sticky), an
// idle one, or a new one. A caller that gives up does not lose the
// address: it lands in the pool.
func (p *MultiIP) Allocate(ctx context.Context, owner string) (IP, error) {
	p.mu.Lock()
	s, ok := p.owners[owner]
	lost := ok && p.lost[s.v4] == s
	p.mu.Unlock()
	if lost {
		// Its ENI holds the address no more: a sandbox given it would
		// have no network.
		return IP{}, fmt.Errorf("allocate for %s: %s: %w", owner, s.v4, ErrAddressLost)
	}
	return p.allocate(ctx, owner, "an address")
}

// Release gives owner's address back to the pool (poolCore.Release); a
// lost address (heal.go) is dropped instead: it is no longer the pool's.
func (p *MultiIP) Release(owner string, stickyUntil time.Time) {
	p.mu.Lock()
	if p.releaseLostLocked(owner) {
		p.mu.Unlock()
		return
	}
	p.releaseLocked(owner, stickyUntil)
	p.mu.Unlock()
	p.kick()
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
			if s.releasing || s.unsure || p.lostAddrLocked(s.v4) {
				continue // a lost claim's address: never a second pod's
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
	return p.takeLocked(best, owner, now)
}

// Address is one address of the pool with its state ("idle", "inuse",
// "reserved", "releasing") and owner.
type Address struct {
	IP    IP
	State string
	Owner string
}

// Stats are the pool's counts.
type Stats struct {
	ENIs, Total, Idle, InUse, Reserved, Inflight, Waiting int
	// Starved: the pool's last growth failed because the cloud had no
	// addresses (see Starved).
	Starved bool
	// Pending: a demand or a release arrived that the pool has not planned
	// for yet (its batch window is open); calls may follow.
	Pending bool
	// Syncs counts the periodic sync rounds (SyncPeriod: the sync and the
	// plan after it) the pool has completed: one that completes after a
	// moment proves that a whole round ran after it.
	Syncs int
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
			if at := p.windowEnd(); !at.IsZero() {
				// Let a burst (of demand or of releases) gather so that
				// it becomes few calls.
				bt := p.clock.NewTimer(max(0, at.Sub(p.clock.Now())))
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
			p.syncRound(ctx)
		}
	}
}

// windowEnd is when the batch window that the first unplanned demand or
// release opened closes, if the plan would then start cloud calls (zero:
// plan now). Waiters that idle addresses can serve are served here, at
// once: a call that completes serves its waiters without a window.
func (p *MultiIP) windowEnd() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.BatchWindow <= 0 || p.unplanned.IsZero() {
		return time.Time{}
	}
	now := p.clock.Now()
	end := p.unplanned.Add(p.cfg.BatchWindow)
	if !now.Before(end) {
		return time.Time{}
	}
	idle, deficit := p.demandLocked(now, p.cfg.MinIdle)
	shrink := len(p.waiters) == 0 && p.inflight == 0 &&
		(idle > p.cfg.MaxIdle || (p.cfg.IdleReclaimAfter > 0 && idle > p.cfg.MinIdle))
	if deficit <= 0 && !shrink {
		return time.Time{}
	}
	return end
}

// plan serves waiters from idle addresses and starts the calls that close
// the gap between demand (waiters plus the warm pool) and supply, or, with
// no demand, gives back what is above the limits.
func (p *MultiIP) plan() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	p.unplanned = time.Time{}
	idle, deficit := p.demandLocked(now, p.cfg.MinIdle)
	if room := p.cfg.Capacity - p.heldLocked() - p.inflight; deficit > room {
		deficit = room
	}
	if deficit > 0 {
		deficit = p.startAssignsLocked(now, deficit)
		// What ENIs busy with a call, or being created, have room for
		// waits for them rather than racing them into another ENI: ENIs
		// are the node's scarcest resource.
		deficit -= p.roomInFlightLocked(now)
		p.startCreatesLocked(now, deficit)
	}
	p.failHopelessLocked(now)
	if len(p.waiters) == 0 && p.inflight == 0 {
		p.shrinkLocked(now, idle)
	}
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

// inflightLocked is the addresses that calls in flight will add.
func (p *MultiIP) inflightLocked() int { return p.inflight }

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

// takeRetry returns and clears the pending retry time.
func (p *MultiIP) takeRetry() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := p.retryAt
	p.retryAt = time.Time{}
	return at
}
