package node

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/harness"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/fakecloud"
)

const (
	podNamespace      = "bench"
	exhaustionVSwitch = "vsw-bp1bench0000000small"
	exhaustionCIDR    = "192.168.64.0/24"
	// exhaustionMaxPods keeps a burst within what the /24 (252 usable
	// addresses) can give once the other tenant has left.
	exhaustionMaxPods = 240
	// fillerENISize is how many addresses one ENI of the other tenant
	// takes: its primary and the 49 secondaries allowed at create.
	fillerENISize = 50
)

// nodeRun is one scenario on one node.
type nodeRun struct {
	o   *Options
	h   *harness.Harness
	n   *harness.Node
	rec *recorder
	// releaseCalls are the calls from the first release until the pool
	// settled (burst-release).
	releaseCalls map[string]int64
}

func podNames(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%05d", from+i)
	}
	return out
}

func (r *nodeRun) addPods(ctx context.Context, names []string) error {
	for _, name := range names {
		if err := r.n.AddPod(ctx, podNamespace, name); err != nil {
			return err
		}
	}
	return nil
}

// burst runs the plugin's ADD for every pod at once (released together
// from a barrier, on the connection already open) and waits for all. rec,
// when set, records each pod. It returns the address each pod got.
func (r *nodeRun) burst(ctx context.Context, names []string, rec *recorder) (map[string]netip.Addr, error) {
	gate := make(chan struct{})
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ips = map[string]netip.Addr{}
	)
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			if ip, ok := r.add(ctx, name, rec); ok {
				mu.Lock()
				ips[name] = ip
				mu.Unlock()
			}
		}()
	}
	close(gate)
	wg.Wait()
	return ips, ctx.Err()
}

// add is one pod's ADD, retried after RetryEvery when it fails, as the
// runtime retries a failed sandbox, until Deadline.
func (r *nodeRun) add(ctx context.Context, name string, rec *recorder) (netip.Addr, bool) {
	t0 := time.Now()
	deadline := t0.Add(r.h.Real(r.o.Deadline))
	retries := 0
	for {
		actx, cancel := context.WithTimeout(ctx, r.h.Real(r.o.AttemptTimeout))
		ip, err := r.n.Alloc(actx, podNamespace, name)
		cancel()
		now := time.Now()
		if err == nil || ctx.Err() != nil || now.Add(r.h.Real(r.o.RetryEvery)).After(deadline) {
			if rec != nil {
				rec.podDone(now.Sub(t0), now, err == nil, retries)
			}
			a, perr := netip.ParseAddr(ip)
			return a, err == nil && perr == nil
		}
		retries++
		if harness.Sleep(ctx, r.h.Real(r.o.RetryEvery)) != nil {
			if rec != nil {
				rec.podDone(0, now, false, retries)
			}
			return netip.Addr{}, false
		}
	}
}

// settle waits until the pool and the node's calls are quiet, for at
// most Deadline.
func (r *nodeRun) settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.h.Real(r.o.Deadline))
	defer cancel()
	_, err := r.h.WaitQuiet(ctx, r.n, r.o.Quiet)
	return err
}

func (r *nodeRun) startRecorder(ctx context.Context) {
	r.rec = newRecorder(r.h, r.n, r.h.Real(r.o.SampleEvery))
	r.rec.begin(ctx)
}

// coldBurst: an empty (or warm-pooled) node gets Pods pods at once.
func (r *nodeRun) coldBurst(ctx context.Context) (int, error) {
	names := podNames(0, r.o.Pods)
	if err := r.addPods(ctx, names); err != nil {
		return 0, err
	}
	return r.measuredBurst(ctx, names)
}

// measuredBurst is the measured part of a burst of Pods pods: recorded
// from the first ADD until the pool settled again.
func (r *nodeRun) measuredBurst(ctx context.Context, names []string) (int, error) {
	r.startRecorder(ctx)
	if _, err := r.burst(ctx, names, r.rec); err != nil {
		return 0, err
	}
	err := r.settle(ctx)
	r.rec.end(ctx)
	return r.o.Pods, err
}

// burstRelease: Pods pods start at once on an empty (or warm-pooled)
// node; once the pool settled they all go at once, as a Deployment scaled
// to zero does, each released and deleted on its own goroutine; measured
// until the pool settled again.
func (r *nodeRun) burstRelease(ctx context.Context) (int, error) {
	names := podNames(0, r.o.Pods)
	if err := r.addPods(ctx, names); err != nil {
		return 0, err
	}
	r.startRecorder(ctx)
	if _, err := r.burst(ctx, names, r.rec); err != nil {
		return 0, err
	}
	if err := r.settle(ctx); err != nil {
		return 0, err
	}
	before := r.rec.calls()
	gate := make(chan struct{})
	errs := make(chan error, len(names))
	for _, name := range names {
		go func() {
			<-gate
			err := r.n.Release(ctx, podNamespace, name)
			if err == nil {
				err = r.n.DeletePod(ctx, podNamespace, name)
			}
			errs <- err
		}()
	}
	close(gate)
	for range names {
		if err := <-errs; err != nil {
			return 0, fmt.Errorf("release: %w", err)
		}
	}
	err := r.settle(ctx)
	r.rec.end(ctx)
	r.releaseCalls = diffCalls(r.rec.calls(), before)
	return r.o.Pods, err
}

// warmChurn keeps Pods pods running and, every Interval, replaces 1 to
// MaxWave of them (seeded), as a rolling update does: the new pods are
// added at once (one batch window), then as many old ones go one by one,
// each after the pool settled from the previous one, so that no wave's
// calls depend on how its timing fell. The old pods are chosen by
// address (a seeded draw over the running pods sorted by IPv4), not by
// name: which pod of a wave got which address is up to the daemon, and
// whether a freed address is an ENI's primary (which stays) changes the
// calls.
func (r *nodeRun) warmChurn(ctx context.Context) (int, error) {
	names := podNames(0, r.o.Pods)
	if err := r.addPods(ctx, names); err != nil {
		return 0, err
	}
	ips, err := r.burst(ctx, names, nil)
	if err != nil {
		return 0, err
	}
	if err := r.settle(ctx); err != nil {
		return 0, err
	}
	running := podsByAddr(ips)
	rng := rand.New(rand.NewPCG(uint64(r.o.Seed), 0x636875726e))
	seq, started := r.o.Pods, 0
	r.startRecorder(ctx)
	waves := int(r.o.Duration / r.o.Interval)
	for w := 0; w < waves; w++ {
		if err := sleepUntil(ctx, r.rec.start.Add(r.h.Real(time.Duration(w)*r.o.Interval))); err != nil {
			return 0, err
		}
		k := 1 + rng.IntN(r.o.MaxWave)
		fresh := podNames(seq, k)
		seq += k
		if err := r.addPods(ctx, fresh); err != nil {
			return 0, err
		}
		got, err := r.burst(ctx, fresh, r.rec)
		if err != nil {
			return 0, err
		}
		started += k
		for j := 0; j < k && len(running) > 0; j++ {
			i := rng.IntN(len(running))
			victim := running[i]
			running = slices.Delete(running, i, i+1)
			if err := r.n.Release(ctx, podNamespace, victim.name); err != nil {
				return 0, fmt.Errorf("release %s: %w", victim.name, err)
			}
			if err := r.n.DeletePod(ctx, podNamespace, victim.name); err != nil {
				return 0, err
			}
			if err := r.settle(ctx); err != nil {
				return 0, err
			}
		}
		running = podsByAddr(got, running...)
	}
	if err := harness.Sleep(ctx, r.h.Real(r.o.Tail)); err != nil {
		return 0, err
	}
	err = r.settle(ctx)
	r.rec.end(ctx)
	return started, err
}

// runningPod is a pod and its address.
type runningPod struct {
	name string
	ip   netip.Addr
}

// podsByAddr adds the pods of ips to pods and sorts them by address.
func podsByAddr(ips map[string]netip.Addr, pods ...runningPod) []runningPod {
	for n, ip := range ips {
		pods = append(pods, runningPod{n, ip})
	}
	slices.SortFunc(pods, func(a, b runningPod) int { return a.ip.Compare(b.ip) })
	return pods
}

// exhaustion: another tenant has filled the pod vSwitch but for Free
// addresses; Pods pods arrive at once, the vSwitch runs dry mid-burst,
// and RecoverAfter later the tenant gives its addresses back. The pods
// that failed are retried every RetryEvery until they get one.
func (r *nodeRun) exhaustion(ctx context.Context) (int, error) {
	names := podNames(0, r.o.Pods)
	if err := r.addPods(ctx, names); err != nil {
		return 0, err
	}
	admin, err := r.h.AdminClient()
	if err != nil {
		return 0, err
	}
	filler, err := fillVSwitch(ctx, r.h, admin, exhaustionVSwitch, r.o.Free)
	if err != nil {
		return 0, err
	}
	r.startRecorder(ctx)
	recovered := make(chan error, 1)
	go func() {
		if err := harness.Sleep(ctx, r.h.Real(r.o.RecoverAfter)); err != nil {
			recovered <- err
			return
		}
		for _, id := range filler {
			if err := admin.DeleteENI(ctx, id); err != nil {
				recovered <- fmt.Errorf("the other tenant's release of %s: %w", id, err)
				return
			}
		}
		recovered <- nil
	}()
	_, burstErr := r.burst(ctx, names, r.rec)
	if err := <-recovered; err != nil {
		return 0, err
	}
	if burstErr != nil {
		return 0, burstErr
	}
	err = r.settle(ctx)
	r.rec.end(ctx)
	return r.o.Pods, err
}

// fillVSwitch creates Available ENIs (as another tenant) in a vSwitch
// until only free addresses are left, and returns their IDs.
func fillVSwitch(ctx context.Context, h *harness.Harness, admin *cloud.Client, vsw string, free int) ([]string, error) {
	var avail int
	for _, v := range h.Cloud.VSwitches() {
		if v.ID == vsw {
			avail = v.Available
		}
	}
	var ids []string
	for take := avail - free; take > 0; {
		k := min(take, fillerENISize)
		e, err := admin.CreateENI(ctx, cloud.CreateENIRequest{IntentKey: fmt.Sprintf("filler/%d", len(ids)), VSwitchID: vsw,
			SecurityGroups: []string{fakecloud.DefaultSecurityGroup}, SecondaryIPv4: k - 1, Description: "another tenant"})
		if err != nil {
			return ids, fmt.Errorf("fill %s: %w", vsw, err)
		}
		ids = append(ids, e.ID)
		take -= k
	}
	return ids, nil
}

// throttled is a cold burst in a region whose account-wide budgets
// (applied after the warm-up, from the start of a throttle window) are
// near what the burst needs.
func (r *nodeRun) throttled(ctx context.Context) (int, error) {
	names := podNames(0, r.o.Pods)
	if err := r.addPods(ctx, names); err != nil {
		return 0, err
	}
	s := r.h.Cloud.Settings()
	s.Throttle = r.o.Throttle
	window := r.h.Real(r.o.ThrottleWindow)
	s.ThrottleWindow = fakecloud.Duration(window)
	if err := r.h.Cloud.UpdateSettings(s); err != nil {
		return 0, fmt.Errorf("throttle budgets: %w", err)
	}
	// fakecloud's windows are aligned to the epoch: start at a boundary.
	next := (time.Now().UnixNano()/int64(window) + 1) * int64(window)
	if err := sleepUntil(ctx, time.Unix(0, next).Add(time.Millisecond)); err != nil {
		return 0, err
	}
	return r.measuredBurst(ctx, names)
}

// lowerBound is the shortest time the budgets allow for the calls the
// run made: an action whose c successful calls have a budget of b per
// window W needs at least ceil(c/b) windows, that is (ceil(c/b)-1)·W
// after the first call.
func (r *nodeRun) lowerBound(res *bench.Result) {
	th := r.rec.throttledByAction()
	var windows float64
	for a, n := range res.Metrics.CallsByAction {
		b, ok := r.o.Throttle[a]
		if !ok {
			b = r.o.Throttle["*"]
		}
		if b <= 0 {
			continue
		}
		windows = max(windows, math.Ceil(float64(n-th[a])/float64(b))-1)
	}
	res.Metrics.LowerBoundMs = windows * float64(r.o.ThrottleWindow) / float64(time.Millisecond)
	if res.Metrics.LowerBoundMs > 0 && res.Metrics.TimeToAllMs > 0 {
		res.Metrics.RatioToLowerBound = res.Metrics.TimeToAllMs / res.Metrics.LowerBoundMs
	}
}

// sleepUntil waits until at unless ctx ends.
func sleepUntil(ctx context.Context, at time.Time) error { return harness.Sleep(ctx, time.Until(at)) }
