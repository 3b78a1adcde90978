package ipam

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/daemon/cloud"
)

// The TestPolicy tests drive the pools' policy — batching, inhibit,
// backoff, reclaim, shrink, warm-up, reservations — over memCloud on a
// fake clock: no emulator, no HTTP, no real waiting.

// held says owner holds e's i-th address (0: the primary).
func held(owner string, e cloud.ENI, i int) Holding {
	a := e.PrimaryIP
	if i > 0 {
		a = e.IPv4[i-1]
	}
	return Holding{Owner: owner, ENIID: e.ID, IPv4: a}
}

// seededMultiIP builds a pool over one ENI of ours whose primary address
// ns/seed holds (the pool has an ENI to assign to, and none idle).
func (h *policy) seededMultiIP(cfg MultiIPConfig) *MultiIP {
	h.t.Helper()
	e := h.cloud.addENI(h.t, 1)
	return h.multiIP(cfg, held("ns/seed", e, 0))
}

// checkLimitPauseLifted runs pods b, c and d against a running pool p at
// the instance's ENI limit, with created ENIs made before: b fails with
// the limit, c meets the pause without a creation, and once holders
// release their ENI's addresses and the pool gives the ENI back, d gets
// an ENI at once (the clock does not move).
func (h *policy) checkLimitPauseLifted(p Pool, created int, holders ...string) {
	h.t.Helper()
	if err := h.allocateErr(p.Allocate, "ns/b"); !errors.Is(err, ErrInsufficientIPs) {
		h.t.Fatalf("got %v, want ErrInsufficientIPs", err)
	}
	h.allocateErr(p.Allocate, "ns/c")
	if n := h.cloud.count("AllocateENI"); n != created+1 {
		h.t.Fatalf("%d creations, want %d (then a pause)", n, created+1)
	}
	for _, o := range holders {
		p.Release(o, time.Time{})
	}
	h.until("the idle ENI to be released", func() bool { return h.cloud.count("ReleaseENI") == 1 && p.Stats().ENIs == 0 })
	h.mustAllocate(p.Allocate, "ns/d")
	if n := h.cloud.count("AllocateENI"); n != created+2 {
		h.t.Fatalf("%d creations, want %d", n, created+2)
	}
}

func (p *MultiIP) failureCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failures
}

// createPauseLeft is how long ENI creation still pauses.
func (p *MultiIP) createPauseLeft() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.createPause.Sub(p.clock.Now())
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// A burst that arrives while a creation is in flight waits out the batch
// window and then for that ENI, which it fills with Assigns of at most
// ten: it does not race the creation into a second ENI.
func TestPolicyBurstFillsTheENIBeingCreated(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	cfg.MaxENI, cfg.IPsPerENI, cfg.MaxIdle, cfg.BatchWindow = 2, 30, 30, time.Second
	p := h.multiIP(cfg)
	hold := make(chan struct{})
	h.cloud.set(func(m *memCloud) { m.hold["AllocateENI"] = hold })
	first := allocAsync(p.Allocate, "ns/first")
	h.until("the first demand to queue", func() bool { return p.waiting() == 1 })
	h.run(p.Run)
	h.until("the first creation to start", func() bool { return h.cloud.count("AllocateENI") == 1 })
	const burst = 24
	got := []<-chan alloc{first}
	for i := range burst {
		got = append(got, allocAsync(p.Allocate, fmt.Sprintf("ns/p%d", i)))
	}
	// The Run loop's ticker and its batch timer.
	h.until("the burst to queue in the batch window", func() bool { return p.waiting() == burst+1 && h.clk.Waiters() == 2 })
	h.clk.Step(cfg.BatchWindow)
	h.until("the burst to be planned", func() bool { return h.clk.Waiters() == 1 })
	if n := h.cloud.count("AllocateENI"); n != 1 {
		t.Fatalf("%d creations for a burst the ENI being created can hold, want 1", n)
	}
	close(hold)
	// The creation that ends serves its waiter and starts the Assigns at
	// once: the burst has waited its window already.
	for _, ch := range got {
		if r := h.wait(ch); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if s := h.cloud.sizesOf("AllocateENI"); !slices.Equal(s, []int{1}) {
		t.Fatalf("creations of %v addresses, want [1]", s)
	}
	if s := h.cloud.sizesOf("AssignIPv4"); !slices.Equal(s, []int{10, 10, 4}) {
		t.Fatalf("assigns of %v addresses, want [10 10 4]", s)
	}
}

// A burst that arrives at once is one creation carrying every address
// it needs, whatever the size of the burst up to a whole ENI; the rest
// becomes further whole ENIs.
func TestPolicyBurstCreatesWhatItCarries(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	cfg.MaxENI, cfg.IPsPerENI, cfg.MaxIdle, cfg.BatchWindow = 3, 15, 15, time.Second
	p := h.multiIP(cfg)
	h.run(p.Run)
	h.until("the loop to run", func() bool { return h.clk.Waiters() == 1 })
	const burst = 20
	var got []<-chan alloc
	for i := range burst {
		got = append(got, allocAsync(p.Allocate, fmt.Sprintf("ns/p%d", i)))
	}
	h.until("the burst to queue in the batch window", func() bool { return p.waiting() == burst && h.clk.Waiters() == 2 })
	h.clk.Step(cfg.BatchWindow)
	for _, ch := range got {
		if r := h.wait(ch); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if s := h.cloud.sizesOf("AllocateENI"); len(s) != 2 || sum(s) != burst || slices.Max(s) != 15 {
		t.Fatalf("creations of %v addresses, want one full ENI (15) and one of 5", s)
	}
	if n := h.cloud.count("AssignIPv4"); n != 0 {
		t.Fatalf("%d assigns, want none: each ENI is created with what it carries", n)
	}
}

// Demand on an ENI with room becomes Assign calls of at most ten
// addresses, one at a time per ENI.
func TestPolicyAssignCarriesAtMostTen(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	cfg.IPsPerENI, cfg.MaxIdle = 30, 30
	p := h.seededMultiIP(cfg)
	var got []<-chan alloc
	for i := range 24 {
		got = append(got, allocAsync(p.Allocate, fmt.Sprintf("ns/p%d", i)))
	}
	h.until("the demand to queue", func() bool { return p.waiting() == 24 })
	h.run(p.Run)
	for _, ch := range got {
		if r := h.wait(ch); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if s := h.cloud.sizesOf("AssignIPv4"); !slices.Equal(s, []int{10, 10, 4}) {
		t.Fatalf("assigns of %v addresses, want [10 10 4]", s)
	}
	if n := h.cloud.count("AllocateENI"); n != 0 {
		t.Fatalf("%d ENIs created, want none", n)
	}
}

// An ENI whose vSwitch is dry is not asked again for ExhaustedInhibit;
// pods meanwhile fail at once, and the pool says it is starved.
func TestPolicyExhaustedVSwitchInhibitsTheENI(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	p := h.seededMultiIP(cfg)
	h.cloud.set(func(m *memCloud) { m.free = 0 })
	h.run(p.Run)
	if err := h.allocateErr(p.Allocate, "ns/a"); !errors.Is(err, ErrInsufficientIPs) {
		t.Fatalf("got %v, want ErrInsufficientIPs", err)
	}
	if !p.Starved() || h.vsw.blocks != 1 {
		t.Fatalf("starved %v, vSwitch blocked %d times; want starved and blocked once", p.Starved(), h.vsw.blocks)
	}
	h.cloud.set(func(m *memCloud) { m.free = 10 })
	h.allocateErr(p.Allocate, "ns/b")
	h.clk.Step(cfg.ExhaustedInhibit - time.Second)
	h.allocateErr(p.Allocate, "ns/c")
	if n := h.cloud.count("AssignIPv4"); n != 1 {
		t.Fatalf("%d assigns during the inhibit, want only the first", n)
	}
	h.clk.Step(time.Second)
	h.mustAllocate(p.Allocate, "ns/d")
	if n := h.cloud.count("AssignIPv4"); n != 2 || p.Starved() {
		t.Fatalf("%d assigns, starved %v; want 2 and not starved", n, p.Starved())
	}
}

// A vSwitch that cannot give the whole batch gives what it has left.
func TestPolicyExhaustedTakesWhatIsLeft(t *testing.T) {
	h := newPolicy(t)
	p := h.seededMultiIP(h.multiIPConfig())
	h.cloud.set(func(m *memCloud) { m.free = 3 })
	var got []<-chan alloc
	for i := range 5 {
		got = append(got, allocAsync(p.Allocate, fmt.Sprintf("ns/p%d", i)))
	}
	h.until("the demand to queue", func() bool { return p.waiting() == 5 })
	h.run(p.Run)
	ok, dry := 0, 0
	for _, ch := range got {
		switch r := h.wait(ch); {
		case r.err == nil:
			ok++
		case errors.Is(r.err, ErrInsufficientIPs):
			dry++
		default:
			t.Fatal(r.err)
		}
	}
	if ok != 3 || dry != 2 {
		t.Fatalf("%d served, %d refused; want 3 and 2", ok, dry)
	}
	if s := h.cloud.sizesOf("AssignIPv4"); !slices.Equal(s, []int{5, 3, 2}) {
		t.Fatalf("assigns of %v addresses, want [5 3 2]", s)
	}
}

// The pause after EniPerInstanceLimitExceeded ends as soon as the pool
// releases an ENI, not when ENILimitInhibit has passed.
func TestPolicyENILimitPauseLiftedWhenSlotsChange(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	cfg.MaxENI, cfg.IPsPerENI, cfg.MaxIdle = 2, 2, 0
	e := h.cloud.addENI(t, 2)
	h.cloud.set(func(m *memCloud) { m.eniLimit = 1 })
	p := h.multiIP(cfg, held("ns/a1", e, 0), held("ns/a2", e, 1))
	h.run(p.Run)
	h.checkLimitPauseLifted(p, 0, "ns/a1", "ns/a2")
}

// pausesOfThreeFailures lets a failing creation fail three times in a
// row, each retried when its pause ends, and returns the three pauses.
func pausesOfThreeFailures(h *policy, p *MultiIP) []time.Duration {
	h.t.Helper()
	h.until("the first failure", func() bool { return p.failureCount() == 1 })
	pauses := []time.Duration{p.createPauseLeft()}
	for n := 2; n <= 3; n++ {
		h.advanceTo(h.clk.Now().Add(pauses[len(pauses)-1]), fmt.Sprintf("failure %d", n), func() bool { return p.failureCount() == n })
		pauses = append(pauses, p.createPauseLeft())
	}
	return pauses
}

// Consecutive failures double the pause, up to FailureBackoffCap; after
// maxTransientFailures pods fail instead of waiting.
func TestPolicyFailureBackoffDoublesUpToTheCap(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	h.cloud.set(func(m *memCloud) { m.failAlways["AllocateENI"] = apiError(cloud.CodeInternalError) })
	p := h.multiIP(cfg)
	h.run(p.Run)
	a := allocAsync(p.Allocate, "ns/a")
	pauses := pausesOfThreeFailures(h, p)
	if r := h.wait(a); !errors.Is(r.err, ErrInsufficientIPs) || !strings.Contains(r.err.Error(), "3 consecutive") {
		t.Fatalf("got %v, want ErrInsufficientIPs after 3 consecutive failures", r.err)
	}
	h.clk.Step(pauses[len(pauses)-1])
	h.allocateErr(p.Allocate, "ns/b")
	pauses = append(pauses, p.createPauseLeft())
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}; !slices.Equal(pauses, want) {
		t.Fatalf("pauses %v, want %v", pauses, want)
	}
}

// Throttling does not double the pause: every throttled creation waits
// the base interval stretched by up to half, whatever came before.
func TestPolicyThrottlingPausesWithoutDoubling(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	h.cloud.set(func(m *memCloud) { m.failAlways["AllocateENI"] = apiError("Throttling.User") })
	p := h.multiIP(cfg)
	h.run(p.Run)
	a := allocAsync(p.Allocate, "ns/a")
	pauses := pausesOfThreeFailures(h, p)
	for _, d := range pauses {
		if d < cfg.FailureBackoff || d > cfg.FailureBackoff*3/2 {
			t.Fatalf("pauses %v, want each within [%v, %v]", pauses, cfg.FailureBackoff, cfg.FailureBackoff*3/2)
		}
	}
	h.wait(a)
}

// A throttle that names the next window pauses creation until then, not
// for the failure backoff: a fleet throttled in one window calls again as
// the next opens.
func TestPolicyThrottledCreationWaitsForTheWindow(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	next := h.clk.Now().Add(7 * time.Second)
	throttled := &cloud.ThrottledError{Err: apiError("Throttling.User"), Until: next}
	h.cloud.set(func(m *memCloud) { m.fail["AllocateENI"] = []error{throttled} })
	p := h.multiIP(cfg)
	h.run(p.Run)
	a := allocAsync(p.Allocate, "ns/a")
	h.until("the throttled creation", func() bool { return p.failureCount() == 1 })
	if left := p.createPauseLeft(); left != next.Sub(h.clk.Now()) {
		t.Fatalf("creation paused %v, want until the next window (%v)", left, next.Sub(h.clk.Now()))
	}
	h.advanceTo(next, "the creation in the next window", func() bool { return h.cloud.count("AllocateENI") == 2 })
	if r := h.wait(a); r.err != nil {
		t.Fatal(r.err)
	}
}

// A pod waits out one transient failure and is served by the retry.
func TestPolicyTransientFailureIsRetried(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	h.cloud.set(func(m *memCloud) { m.fail["AllocateENI"] = []error{apiError(cloud.CodeInternalError)} })
	p := h.multiIP(cfg)
	h.run(p.Run)
	a := allocAsync(p.Allocate, "ns/a")
	h.until("the failure", func() bool { return p.failureCount() == 1 })
	h.advanceTo(h.clk.Now().Add(p.createPauseLeft()), "the retry", func() bool { return h.cloud.count("AllocateENI") == 2 })
	if r := h.wait(a); r.err != nil {
		t.Fatal(r.err)
	}
}

// Once the pool has been quiet for IdleReclaimAfter, IdleReclaimBatch idle
// addresses above MinIdle go back, then as many every interval.
func TestPolicyIdleReclaim(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	cfg.MinIdle = 2
	cfg.IdleReclaimAfter, cfg.IdleReclaimInterval, cfg.IdleReclaimBatch = time.Minute, 10*time.Minute, 3
	h.cloud.addENI(t, 8)
	p := h.multiIP(cfg)
	h.run(p.Run)
	idle := func(n int) func() bool { return func() bool { return p.settled() && p.Stats().Idle == n } }
	h.until("the pool to settle", idle(8))
	h.advanceTo(policyEpoch.Add(time.Minute-time.Nanosecond), "a quiet pool", idle(8))
	h.advanceTo(policyEpoch.Add(time.Minute), "the first round", idle(5))
	h.advanceTo(policyEpoch.Add(11*time.Minute-time.Nanosecond), "no round before the interval", idle(5))
	h.advanceTo(policyEpoch.Add(11*time.Minute), "the second round", idle(2))
	h.advanceTo(policyEpoch.Add(21*time.Minute), "no round at MinIdle", idle(2))
	if s := h.cloud.sizesOf("UnassignIPv4"); !slices.Equal(s, []int{3, 3}) {
		t.Fatalf("unassigns of %v addresses, want [3 3]", s)
	}
}

// Idle addresses above MaxIdle go back: a whole ENI when all of its
// addresses are idle and the pool keeps MinIdle without it, else
// secondary addresses.
func TestPolicyShrinkAboveMaxIdle(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	cfg.MaxENI, cfg.MinIdle, cfg.MaxIdle, cfg.BatchWindow = 2, 1, 2, time.Second
	a := h.cloud.addENI(t, 6)
	h.cloud.addENI(t, 3)
	var hs []Holding
	for i := range 4 {
		hs = append(hs, held(fmt.Sprintf("ns/p%d", i), a, i))
	}
	p := h.multiIP(cfg, hs...)
	h.run(p.Run)
	h.until("the idle ENI to go", func() bool { return p.settled() && p.Stats().ENIs == 1 })
	if n, u := h.cloud.count("ReleaseENI"), h.cloud.count("UnassignIPv4"); n != 1 || u != 0 {
		t.Fatalf("%d ENIs released, %d unassigns; want the idle ENI released whole", n, u)
	}
	h.until("the loop to wait", func() bool { return h.clk.Waiters() == 1 })
	for _, x := range hs {
		p.Release(x.Owner, time.Time{})
	}
	h.until("the releases to wait in the batch window", func() bool { return h.clk.Waiters() == 2 })
	h.clk.Step(cfg.BatchWindow)
	h.until("MaxIdle addresses", func() bool { st := p.Stats(); return p.settled() && st.Idle == 2 && st.Total == 2 })
	if s := h.cloud.sizesOf("UnassignIPv4"); !slices.Equal(s, []int{4}) || h.cloud.count("ReleaseENI") != 1 {
		t.Fatalf("unassigns of %v addresses, %d ENIs released; want one of 4, the ENI kept for MinIdle", s, h.cloud.count("ReleaseENI"))
	}
}

// fullENIPool runs a pool (30 addresses per ENI, pool 0/5, a 1 s batch
// window) over one ENI of n addresses, all held, once its loop waits: the
// releases a test makes next open the window.
func (h *policy) fullENIPool(n int) (*MultiIP, MultiIPConfig, []Holding) {
	h.t.Helper()
	cfg := h.multiIPConfig()
	cfg.MaxENI, cfg.IPsPerENI, cfg.MaxIdle, cfg.BatchWindow = 3, 30, 5, time.Second
	a := h.cloud.addENI(h.t, n)
	var hs []Holding
	for i := range n {
		hs = append(hs, held(fmt.Sprintf("ns/p%d", i), a, i))
	}
	p := h.multiIP(cfg, hs...)
	h.run(p.Run)
	h.until("the loop to run", func() bool { return p.settled() && h.clk.Waiters() == 1 })
	return p, cfg, hs
}

// Releases that arrive together are planned together, after the batch
// window: 20 pods going from one ENI with pool 0/5 give the whole ENI
// back (detach and delete: one release) rather than an Unassign each.
func TestPolicyReleasesBatchIntoAWholeENI(t *testing.T) {
	h := newPolicy(t)
	p, cfg, hs := h.fullENIPool(20)
	for _, x := range hs[:19] {
		p.Release(x.Owner, time.Time{})
	}
	h.until("the releases to wait in the batch window", func() bool { return h.clk.Waiters() == 2 })
	if n := h.cloud.count("UnassignIPv4") + h.cloud.count("ReleaseENI"); n != 0 {
		t.Fatalf("%d calls before the window closed, want none", n)
	}
	p.Release(hs[19].Owner, time.Time{})
	h.clk.Step(cfg.BatchWindow)
	h.until("the ENI to go", func() bool { return p.settled() && p.Stats().ENIs == 0 })
	if n, u := h.cloud.count("ReleaseENI"), h.cloud.count("UnassignIPv4"); n != 1 || u != 0 {
		t.Fatalf("%d ENIs released, %d unassigns; want the idle ENI released whole", n, u)
	}
}

// Shrinking above MaxIdle unassigns up to ten addresses a call when the
// ENI must stay: 17 idle on an ENI with a pod, pool 0/5, take two calls.
func TestPolicyShrinkUnassignsTenACall(t *testing.T) {
	h := newPolicy(t)
	p, cfg, hs := h.fullENIPool(18)
	for _, x := range hs[1:] {
		p.Release(x.Owner, time.Time{})
	}
	h.until("the releases to wait in the batch window", func() bool { return h.clk.Waiters() == 2 })
	h.clk.Step(cfg.BatchWindow)
	h.until("MaxIdle addresses", func() bool { st := p.Stats(); return p.settled() && st.Idle == 5 })
	if s := h.cloud.sizesOf("UnassignIPv4"); !slices.Equal(s, []int{10, 2}) {
		t.Fatalf("unassigns of %v addresses, want [10 2]", s)
	}
}

// The pool warms up to MinIdle without demand and refills after use.
func TestPolicyMinIdleWarmUp(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	cfg.MinIdle = 5
	p := h.multiIP(cfg)
	h.run(p.Run)
	h.until("the warm pool", func() bool { return p.settled() && p.Stats().Idle == 5 })
	if s := h.cloud.sizesOf("AllocateENI"); !slices.Equal(s, []int{5}) {
		t.Fatalf("creations of %v addresses, want [5]", s)
	}
	for i := range 3 {
		h.mustAllocate(p.Allocate, fmt.Sprintf("ns/p%d", i))
	}
	h.until("the refill", func() bool { st := p.Stats(); return p.settled() && st.Idle == 5 && st.InUse == 3 })
	if n, s := h.cloud.count("AllocateENI"), h.cloud.sizesOf("AssignIPv4"); n != 1 || sum(s) != 3 {
		t.Fatalf("%d creations, assigns of %v; want the ENI refilled with 3", n, s)
	}
}

// A sticky address stays reserved for its owner until the time passes,
// then serves anyone.
func TestPolicyStickyReservation(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	cfg.IPsPerENI, cfg.MaxIdle = 2, 2
	h.cloud.addENI(t, 2)
	p := h.multiIP(cfg)
	h.run(p.Run)
	a := h.mustAllocate(p.Allocate, "ns/a")
	c := h.mustAllocate(p.Allocate, "ns/c")
	p.Release("ns/a", h.clk.Now().Add(time.Hour))
	p.Release("ns/c", time.Time{})
	if b := h.mustAllocate(p.Allocate, "ns/b"); b.IPv4 != c.IPv4 {
		t.Fatalf("ns/b got %s, want the unreserved %s", b.IPv4, c.IPv4)
	}
	if err := h.allocateErr(p.Allocate, "ns/d"); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("got %v, want ErrNoCapacity while the reservation holds", err)
	}
	if again := h.mustAllocate(p.Allocate, "ns/a"); again.IPv4 != a.IPv4 {
		t.Fatalf("ns/a got %s back, want %s", again.IPv4, a.IPv4)
	}
	p.Release("ns/a", h.clk.Now().Add(time.Hour))
	h.clk.Step(time.Hour)
	if d := h.mustAllocate(p.Allocate, "ns/d"); d.IPv4 != a.IPv4 {
		t.Fatalf("ns/d got %s, want the expired reservation's %s", d.IPv4, a.IPv4)
	}
	if _, ok := p.Holds("ns/a"); ok {
		t.Fatal("ns/a still holds an address after its reservation was taken")
	}
}

// A released address is not handed out again before Cooldown: a fresh
// one is assigned instead.
func TestPolicyCooldown(t *testing.T) {
	h := newPolicy(t)
	cfg := h.multiIPConfig()
	cfg.IPsPerENI, cfg.MaxIdle, cfg.Cooldown = 3, 3, 30*time.Second
	h.cloud.addENI(t, 2)
	p := h.multiIP(cfg)
	h.run(p.Run)
	a := h.mustAllocate(p.Allocate, "ns/a")
	p.Release("ns/a", time.Time{})
	for _, o := range []string{"ns/b", "ns/c"} {
		if ip := h.mustAllocate(p.Allocate, o); ip.IPv4 == a.IPv4 {
			t.Fatalf("%s got %s, which ns/a released within the cooldown", o, ip.IPv4)
		}
	}
	if n := h.cloud.count("AssignIPv4"); n != 1 {
		t.Fatalf("%d assigns, want 1 (for ns/c)", n)
	}
	h.clk.Step(cfg.Cooldown)
	if d := h.mustAllocate(p.Allocate, "ns/d"); d.IPv4 != a.IPv4 {
		t.Fatalf("ns/d got %s, want the cooled %s", d.IPv4, a.IPv4)
	}
}

func (h *policy) eniPoolConfig() ENIPoolConfig {
	return ENIPoolConfig{MaxENI: 3, SyncPeriod: 24 * time.Hour, FailureBackoff: time.Second,
		FailureBackoffCap: 4 * time.Second, ENILimitInhibit: time.Minute, Tags: memTags}
}

func (p *ENIPool) pauseLeft() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.createPause.Sub(p.clock.Now())
}

// The ENI pool creates an ENI per pod; at the instance's ENI limit it
// pauses creation, and releasing an ENI lifts the pause.
func TestPolicyENIPoolPausesAtTheInstanceLimit(t *testing.T) {
	h := newPolicy(t)
	h.cloud.set(func(m *memCloud) { m.eniLimit = 1 })
	p := h.eniPool(h.eniPoolConfig())
	h.run(p.Run)
	h.mustAllocate(p.Allocate, "ns/a")
	h.checkLimitPauseLifted(p, 1, "ns/a")
}

// After a failed creation the ENI pool pauses FailureBackoff, doubling.
func TestPolicyENIPoolFailureBackoff(t *testing.T) {
	h := newPolicy(t)
	err := apiError(cloud.CodeInternalError)
	h.cloud.set(func(m *memCloud) { m.fail["AllocateENI"] = []error{err, err} })
	p := h.eniPool(h.eniPoolConfig())
	h.run(p.Run)
	h.allocateErr(p.Allocate, "ns/a")
	if d := p.pauseLeft(); d != time.Second {
		t.Fatalf("paused %v, want 1s", d)
	}
	h.allocateErr(p.Allocate, "ns/b")
	if n := h.cloud.count("AllocateENI"); n != 1 {
		t.Fatalf("%d creations during the pause, want 1", n)
	}
	h.clk.Step(time.Second)
	h.allocateErr(p.Allocate, "ns/c")
	if d := p.pauseLeft(); d != 2*time.Second {
		t.Fatalf("paused %v, want 2s", d)
	}
	h.clk.Step(2 * time.Second)
	h.mustAllocate(p.Allocate, "ns/d")
	if n := h.cloud.count("AllocateENI"); n != 3 {
		t.Fatalf("%d creations, want 3", n)
	}
}

// A throttled creation pauses the ENI pool until the window it names.
func TestPolicyENIPoolThrottledWaitsForTheWindow(t *testing.T) {
	h := newPolicy(t)
	next := h.clk.Now().Add(42 * time.Second)
	h.cloud.set(func(m *memCloud) {
		m.fail["AllocateENI"] = []error{&cloud.ThrottledError{Err: apiError("Throttling.User"), Until: next}}
	})
	p := h.eniPool(h.eniPoolConfig())
	h.run(p.Run)
	h.allocateErr(p.Allocate, "ns/a")
	if d := p.pauseLeft(); d != 42*time.Second {
		t.Fatalf("paused %v, want until the next window (42s)", d)
	}
	h.clk.Step(42 * time.Second)
	h.mustAllocate(p.Allocate, "ns/b")
}

// The ENI pool keeps MinIdle ENIs attached and ready.
func TestPolicyENIPoolWarmUp(t *testing.T) {
	h := newPolicy(t)
	cfg := h.eniPoolConfig()
	cfg.MinIdle, cfg.MaxIdle = 2, 2
	p := h.eniPool(cfg)
	h.run(p.Run)
	ready := func(enis int) func() bool {
		return func() bool { st := p.Stats(); return st.Idle == 2 && st.ENIs == enis && st.Inflight == 0 }
	}
	h.until("two idle ENIs", ready(2))
	h.mustAllocate(p.Allocate, "ns/a")
	h.until("the refill", ready(3))
	if n := h.cloud.count("AllocateENI"); n != 3 {
		t.Fatalf("%d creations, want 3", n)
	}
}

// An ENI whose sticky reservation has expired and that shrink gives back
// leaves no owner behind: its owner holds nothing afterwards (it was
// listed by Owners, and Holds answered with the deleted ENI, so GC's
// release of it was a no-op every round).
func TestPolicyENIPoolShrinkForgetsExpiredReservation(t *testing.T) {
	h := newPolicy(t)
	p := h.eniPool(h.eniPoolConfig())
	h.run(p.Run)
	h.mustAllocate(p.Allocate, "ns/sticky")
	p.Release("ns/sticky", h.clk.Now().Add(time.Minute))
	if _, ok := p.Holds("ns/sticky"); !ok {
		t.Fatal("the reservation is not held")
	}
	h.clk.Step(2 * time.Minute)
	p.Release("ns/other", time.Time{}) // a no-op that kicks the pool to plan
	h.until("the expired ENI to be released", func() bool { return h.cloud.count("ReleaseENI") == 1 && p.Stats().ENIs == 0 })
	if _, ok := p.Holds("ns/sticky"); ok {
		t.Fatal("the owner of the released ENI still holds it")
	}
	if o := p.Owners(); len(o) != 0 {
		t.Fatalf("owners after the release: %v, want none", o)
	}
}
