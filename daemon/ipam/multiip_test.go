package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"go.uber.org/goleak"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/fakecloudtest"
	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/testwait"
)

const (
	testAK = "LTAIipamTest"
	testSK = "ipam-test-secret"
	node1  = "i-bp1lab0000000000001" // ecs.g7.xlarge: 4 ENIs × 15 addresses
	vsw1   = "vsw-bp1lab0000000000001"
)

func TestMain(m *testing.M) {
	noproxy.Unset()
	// Every goroutine a pool starts ends with it (Run, Close): none may
	// outlive the tests.
	goleak.VerifyTestMain(m)
}

// waitLimit bounds a wait on the pool's goroutines and the cloud's
// delays: generous, for -race on a loaded machine.
const waitLimit = 30 * time.Second

type env struct {
	t     *testing.T
	cloud *fakecloud.Cloud
	node  *cloud.Node
	vsw   *cloud.VSwitchPool
	cfg   MultiIPConfig
}

func fastBackoff() *backoff.Set {
	o := map[string]backoff.Policy{}
	for k, b := range backoff.Defaults() {
		o[k] = backoff.Policy{Duration: 5 * time.Millisecond, Factor: 1.2, Jitter: 0.1, Steps: max(b.Steps, 4)}
	}
	return backoff.NewSet(nil, o)
}

func newEnv(t *testing.T, mod func(*fakecloud.Spec, *fakecloud.Options)) *env {
	t.Helper()
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSK}}
	fo := fakecloud.Options{Seed: 3, TimeScale: 0.01}
	if mod != nil {
		mod(&spec, &fo)
	}
	fo.Spec = &spec
	fc := fakecloudtest.Start(t, fo, node1)
	cl, err := cloud.New(cloud.Options{RegionID: "cn-hangzhou", ECSEndpoint: fc.API.URL, VPCEndpoint: fc.API.URL,
		Credentials: credentials.NewStaticAKCredentialsProvider(testAK, testSK), Backoff: fastBackoff()})
	if err != nil {
		t.Fatal(err)
	}
	meta := cloud.NewMetadata(fc.Metadata.URL, nil, nil, fastBackoff(), nil)
	inst, err := meta.Instance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	vsw, err := cloud.NewVSwitchPool(cl, nil, cloud.SelectMostFree, []string{vsw1}, time.Second, 200*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, cloud: fc.Cloud, node: &cloud.Node{API: cl, Metadata: meta, Instance: inst, MetadataTimeout: 10 * time.Second}, vsw: vsw,
		cfg: MultiIPConfig{MaxENI: 3, IPsPerENI: 15, MinIdle: 0, MaxIdle: 5, BatchWindow: 20 * time.Millisecond,
			SyncPeriod: time.Hour, FailureBackoff: 50 * time.Millisecond, ExhaustedInhibit: 200 * time.Millisecond,
			SecurityGroups: []string{fakecloud.DefaultSecurityGroup}, PackENIs: true,
			Tags: map[string]string{"creator": "terway", "terway.alibabacloud.com/instance-id": node1}}}
}

// start builds and runs a pool; it stops with the test.
func (e *env) start(holdings ...Holding) (*MultiIP, RestoreReport) {
	e.t.Helper()
	p, err := NewMultiIP(e.cfg, e.node, e.vsw, nil, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	rep, err := p.Restore(ctxT(e.t), holdings)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return p, rep
}

func ctxT(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// cloudAddrs returns every secondary-ENI address of node1 in the cloud.
func (e *env) cloudAddrs() map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, v := range e.cloud.ENIs() {
		if v.Type != fakecloud.ENITypeSecondary || v.InstanceID != node1 {
			continue
		}
		out[v.PrimaryIP] = v.ID
		for _, a := range v.IPv4 {
			out[a] = v.ID
		}
	}
	return out
}

// allocateMany runs n allocations at once and returns the addresses got
// and the errors.
func allocateMany(t *testing.T, p *MultiIP, prefix string, n int) (map[string]IP, []error) {
	var mu sync.Mutex
	got := map[string]IP{}
	var errs []error
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("%s/pod-%d", prefix, i)
			ip, err := p.Allocate(ctxT(t), owner)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			got[owner] = ip
		}()
	}
	wg.Wait()
	return got, errs
}

func noDuplicates(t *testing.T, got map[string]IP) {
	t.Helper()
	seen := map[netip.Addr]string{}
	for owner, ip := range got {
		if prev, ok := seen[ip.IPv4]; ok {
			t.Fatalf("%s handed to %s and %s", ip.IPv4, prev, owner)
		}
		seen[ip.IPv4] = owner
	}
}

// checkSplit checks what allocateMany returned: distinct addresses for
// ok pods, and failed refusals, each with want.
func checkSplit(t *testing.T, got map[string]IP, errs []error, ok, failed int, want error) {
	t.Helper()
	noDuplicates(t, got)
	if len(got) != ok || len(errs) != failed {
		t.Fatalf("%d allocated, %d failed; want %d and %d", len(got), len(errs), ok, failed)
	}
	for _, err := range errs {
		if !errors.Is(err, want) {
			t.Fatalf("a refused allocation failed with %v, want %v", err, want)
		}
	}
}

// mustAllocate allocates owner's address in p or fails the test.
func mustAllocate(t *testing.T, p *MultiIP, owner string) IP {
	t.Helper()
	ip, err := p.Allocate(ctxT(t), owner)
	if err != nil {
		t.Fatalf("allocate for %s: %v", owner, err)
	}
	return ip
}

// allocateHeldAtAttach starts owner's allocation in p with the attach of
// the ENI it creates paused at step (fakecloud.StepBefore: the ENI is
// Available and tagged; StepAfter: attached, the answer held) and returns
// once the attach is held: the fault to remove, and the allocation's
// error when it ends.
func (e *env) allocateHeldAtAttach(p *MultiIP, owner, step string) (string, <-chan error) {
	e.t.Helper()
	hold, err := e.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "AttachNetworkInterface", Step: step})
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := p.Allocate(ctxT(e.t), owner); done <- err }()
	if err := e.cloud.WaitHeld(ctxT(e.t), hold, 1); err != nil {
		e.t.Fatal(err)
	}
	return hold, done
}

func TestBurstAboveCapacity(t *testing.T) {
	e := newEnv(t, nil)
	p, _ := e.start()
	got, errs := allocateMany(t, p, "default", 55) // capacity 45
	checkSplit(t, got, errs, 45, 10, ErrNoCapacity)
	// Every address a pod got is assigned to our ENI in the cloud.
	ca := e.cloudAddrs()
	for owner, ip := range got {
		if ca[ip.IPv4] != ip.ENIID {
			t.Fatalf("%s: %s is on %q in the cloud, pool says %s", owner, ip.IPv4, ca[ip.IPv4], ip.ENIID)
		}
	}
	creates := e.cloud.CallCount(fakecloud.CallFilter{Action: "CreateNetworkInterface"})
	assigns := e.cloud.CallCount(fakecloud.CallFilter{Action: "AssignPrivateIpAddresses"})
	if creates != 3 || assigns > 6 {
		t.Fatalf("%d creates and %d assigns for 45 addresses", creates, assigns)
	}
	st := p.Stats()
	if st.InUse != 45 || st.ENIs != 3 || st.Waiting != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestWarmUpAndShrink(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.MinIdle, e.cfg.MaxIdle = 4, 6
	p, _ := e.start()
	p.kick()
	testwait.Until(t, waitLimit, "warm pool of 4", func() bool { return p.Stats().Idle >= 4 })
	got, errs := allocateMany(t, p, "ns", 20)
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	noDuplicates(t, got)
	for owner := range got {
		p.Release(owner, time.Time{})
	}
	// Back to at most MaxIdle idle addresses, with at least MinIdle.
	testwait.Until(t, waitLimit, "shrink to MaxIdle", func() bool {
		st := p.Stats()
		return st.Idle <= 6 && st.Idle >= 4 && st.Inflight == 0 && len(e.cloudAddrs()) == st.Total
	})
}

func TestStickyReservation(t *testing.T) {
	e := newEnv(t, nil)
	p, _ := e.start()
	a := mustAllocate(t, p, "db/web-0")
	p.Release("db/web-0", time.Now().Add(time.Hour))
	other, err := p.Allocate(ctxT(t), "db/other")
	if err != nil || other.IPv4 == a.IPv4 {
		t.Fatalf("a reserved address went to another pod: %v %v", other, err)
	}
	again, err := p.Allocate(ctxT(t), "db/web-0")
	if err != nil || again.IPv4 != a.IPv4 {
		t.Fatalf("sticky pod got %v, want %v (%v)", again.IPv4, a.IPv4, err)
	}
	// An expired reservation frees the address.
	p.Release("db/web-0", time.Now().Add(-time.Second))
	if _, ok := p.Holds("db/web-0"); ok {
		t.Fatal("expired reservation still held")
	}
}

func TestIdempotentAllocate(t *testing.T) {
	e := newEnv(t, nil)
	p, _ := e.start()
	a := mustAllocate(t, p, "ns/a")
	b, err := p.Allocate(ctxT(t), "ns/a")
	if err != nil || a != b {
		t.Fatalf("retried allocation got %v, first %v", b, a)
	}
}

func TestExhaustionAndRecovery(t *testing.T) {
	e := newEnv(t, func(s *fakecloud.Spec, _ *fakecloud.Options) {
		s.VSwitches[0].CIDR = "192.168.0.0/27" // 28 usable; eth0 takes one
	})
	p, _ := e.start()
	got, errs := allocateMany(t, p, "a", 30)
	checkSplit(t, got, errs, 27, 3, ErrInsufficientIPs)
	// Five pods that got an address go away; new pods get addresses
	// again without a restart.
	released := 0
	for owner := range got {
		if released == 5 {
			break
		}
		p.Release(owner, time.Time{})
		released++
	}
	more, errs := allocateMany(t, p, "b", 5)
	if len(errs) > 0 || len(more) != 5 {
		t.Fatalf("after release: %d, %v; pool %+v", len(more), errs, p.Stats())
	}
}

func TestRecoveryWhenAddressesComeBackElsewhere(t *testing.T) {
	e := newEnv(t, func(s *fakecloud.Spec, _ *fakecloud.Options) {
		s.VSwitches[0].CIDR = "192.168.0.0/28" // 12 usable; eth0 one
		s.ENIs = []fakecloud.ENISpec{{ID: "eni-bp1squatter000000001", VSwitchID: vsw1, SecurityGroupIDs: []string{fakecloud.DefaultSecurityGroup},
			SecondaryIPs: []string{"192.168.0.2", "192.168.0.3", "192.168.0.4", "192.168.0.5", "192.168.0.6", "192.168.0.7"}}}
	})
	p, _ := e.start()
	got, errs := allocateMany(t, p, "x", 6)
	if len(got) != 4 || len(errs) != 2 {
		t.Fatalf("%d allocated, %d failed", len(got), len(errs))
	}
	// Someone else frees addresses in the vSwitch: after the inhibit the
	// pool grows again by itself.
	api := e.node.API
	if err := api.UnassignIPv4(ctxT(t), "eni-bp1squatter000000001", []netip.Addr{
		netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("192.168.0.3")}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, waitLimit, "recovery", func() bool {
		_, err := p.Allocate(ctxT(t), fmt.Sprintf("y/pod-%d", time.Now().UnixNano()))
		return err == nil
	})
}

func TestRestoreAdoptsAndSweeps(t *testing.T) {
	e := newEnv(t, func(s *fakecloud.Spec, _ *fakecloud.Options) {
		s.ENIs = []fakecloud.ENISpec{{ID: "eni-bp1orphan0000000001", VSwitchID: vsw1, SecurityGroupIDs: []string{fakecloud.DefaultSecurityGroup},
			Tags: map[string]string{"creator": "terway", "terway.alibabacloud.com/instance-id": node1}},
			{ID: "eni-bp1foreign000000001", VSwitchID: vsw1, SecurityGroupIDs: []string{fakecloud.DefaultSecurityGroup}}}
	})
	p1, rep := e.start()
	if len(rep.Swept) != 1 || rep.Swept[0] != "eni-bp1orphan0000000001" {
		t.Fatalf("swept %v", rep.Swept)
	}
	got, errs := allocateMany(t, p1, "r", 12)
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	var holdings []Holding
	for owner, ip := range got {
		holdings = append(holdings, Holding{Owner: owner, ENIID: ip.ENIID, IPv4: ip.IPv4})
	}
	holdings = append(holdings, Holding{Owner: "r/ghost", ENIID: "eni-bp1gone", IPv4: netip.MustParseAddr("192.168.0.200")})
	// A second pool (a restarted daemon) sees the same world.
	p2, rep2 := e.start(holdings...)
	if len(rep2.Broken) != 1 || rep2.Broken[0].Owner != "r/ghost" {
		t.Fatalf("broken %+v", rep2.Broken)
	}
	for owner, ip := range got {
		if h, ok := p2.Holds(owner); !ok || h.IPv4 != ip.IPv4 {
			t.Fatalf("%s lost its address after restore", owner)
		}
	}
	n := mustAllocate(t, p2, "r/new")
	for _, ip := range got {
		if ip.IPv4 == n.IPv4 {
			t.Fatalf("restored pool handed out %s twice", n.IPv4)
		}
	}
	if _, ok := e.cloud.ENI("eni-bp1foreign000000001"); !ok {
		t.Fatal("an ENI that is not ours was deleted")
	}
}

func TestDualStack(t *testing.T) {
	e := newEnv(t, nil)
	e.cfg.DualStack = true
	p, _ := e.start()
	got, errs := allocateMany(t, p, "d", 12)
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	seen6 := map[netip.Addr]bool{}
	for _, ip := range got {
		if !ip.IPv6.IsValid() || !ip.CIDR6.Contains(ip.IPv6) || seen6[ip.IPv6] {
			t.Fatalf("IPv6 %v (cidr %v) missing or duplicated", ip.IPv6, ip.CIDR6)
		}
		seen6[ip.IPv6] = true
	}
}

// TestTransientFailuresDelayPersistentFail: a cloud that fails for a
// while (more than the client's own retries) delays the pods that wait;
// one that keeps failing with the same error fails them with that error,
// without waiting for their deadline.
func TestTransientFailuresDelayPersistentFail(t *testing.T) {
	t.Run("transient", func(t *testing.T) {
		e := newEnv(t, nil)
		p, _ := e.start()
		// Enough failures to exhaust the client's retries of one create,
		// not enough to exhaust the pool's patience.
		if _, err := e.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultError, Action: "CreateNetworkInterface",
			Probability: 1, Count: 12, Code: "InternalError", Status: 500}); err != nil {
			t.Fatal(err)
		}
		got, errs := allocateMany(t, p, "t", 3)
		if len(errs) > 0 || len(got) != 3 {
			t.Fatalf("%d allocated, errors %v", len(got), errs)
		}
		if n := e.cloud.CallCount(fakecloud.CallFilter{Action: "CreateNetworkInterface", Outcome: "InternalError"}); n != 12 {
			t.Fatalf("%d failed creates, want all 12 injected to have been hit", n)
		}
	})
	t.Run("persistent", func(t *testing.T) {
		e := newEnv(t, nil)
		p, _ := e.start()
		if _, err := e.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultError, Action: "CreateNetworkInterface",
			Probability: 1, Code: "Forbidden.RAM", Status: 403, Message: "no permission"}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, errs := allocateMany(t, p, "f", 2)
		if len(errs) != 2 || !errors.Is(errs[0], ErrInsufficientIPs) || !strings.Contains(errs[0].Error(), "Forbidden.RAM") {
			t.Fatalf("errors %v", errs)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Fatalf("a persistent error took %v to reach the pods", took)
		}
	})
}

// TestSweepSparesENIsBeingCreated: between Create and Attach a new ENI is
// Available and tagged like an orphan; a GC sweep at that moment must not
// delete it from under the creation.
func TestSweepSparesENIsBeingCreated(t *testing.T) {
	e := newEnv(t, nil)
	p, _ := e.start()
	hold, done := e.allocateHeldAtAttach(p, "s/pod", fakecloud.StepBefore)
	visible := func() bool { // past the API's consistency window
		l, err := e.node.API.DescribeENIs(ctxT(t), cloud.ENIFilter{Tags: e.cfg.Tags, Status: cloud.StatusAvailable})
		return err == nil && len(l) == 1
	}
	testwait.Until(t, waitLimit, "the new ENI visible as Available", visible)
	swept, err := p.Sweep(ctxT(t))
	if err != nil || len(swept) != 0 {
		t.Fatalf("sweep during a creation deleted %v (%v)", swept, err)
	}
	e.cloud.RemoveFault(hold)
	if err := <-done; err != nil {
		t.Fatalf("allocation after the sweep: %v", err)
	}
	// With nothing in flight, a real orphan is swept.
	if _, err := e.node.API.CreateENI(ctxT(t), cloud.CreateENIRequest{IntentKey: "orphan-1", VSwitchID: vsw1,
		SecurityGroups: []string{fakecloud.DefaultSecurityGroup}, Tags: e.cfg.Tags}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, waitLimit, "the orphan visible", visible)
	if swept, err := p.Sweep(ctxT(t)); err != nil || len(swept) != 1 {
		t.Fatalf("idle sweep removed %v (%v), want the orphan", swept, err)
	}
}

// A release that fails before any growth failure was counted must not
// panic on a negative shift; the backoff doubles from there, capped.
func TestFailureBackoffFromZeroFailures(t *testing.T) {
	p := &MultiIP{}
	p.cfg.FailureBackoff, p.cfg.FailureBackoffCap = time.Second, time.Minute
	for failures, want := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 20: time.Minute} {
		p.failures = failures
		if got := p.failureBackoffLocked(); got != want {
			t.Errorf("failures %d: backoff %v, want %v", failures, got, want)
		}
	}
}
