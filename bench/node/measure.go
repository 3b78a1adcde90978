package node

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/harness"
)

// recorder collects one node run's measurements: each pod's time to an
// address (as the plugin sees it: from its first AllocIP to the
// successful one, retries included), and periodic samples of the pool's
// idle addresses and the node's cloud calls. Times are real; the result
// converts them to simulated time.
type recorder struct {
	h      *harness.Harness
	node   *harness.Node
	base   map[string]int64
	baseTh map[string]int64
	start  time.Time

	mu       sync.Mutex
	latency  []time.Duration
	ready    []time.Duration // when each pod got its address, since start
	failed   int
	attempts int64 // AllocIP calls that failed and were retried

	samples  []sample
	haltOnce sync.Once
	stop     chan struct{}
	stopped  chan struct{}
	sampling time.Duration
}

type sample struct {
	at    time.Duration
	idle  int
	calls map[string]int64
}

func newRecorder(h *harness.Harness, n *harness.Node, every time.Duration) *recorder {
	base, th := h.Calls(n.InstanceID)
	return &recorder{h: h, node: n, base: base, baseTh: th, sampling: every}
}

// begin starts the clock and the sampler.
func (r *recorder) begin(ctx context.Context) {
	r.start = time.Now()
	r.stop, r.stopped = make(chan struct{}), make(chan struct{})
	go r.sampleLoop(ctx)
}

// end stops the sampler after one last sample.
func (r *recorder) end(ctx context.Context) {
	r.halt()
	r.takeSample(ctx)
}

// halt stops the sampler (idempotent; a run that fails stops it too).
func (r *recorder) halt() {
	r.haltOnce.Do(func() {
		close(r.stop)
		<-r.stopped
	})
}

func (r *recorder) sampleLoop(ctx context.Context) {
	defer close(r.stopped)
	t := time.NewTicker(r.sampling)
	defer t.Stop()
	r.takeSample(ctx)
	for {
		select {
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			r.takeSample(ctx)
		}
	}
}

func (r *recorder) takeSample(ctx context.Context) {
	st, err := r.node.PoolStats(ctx)
	if err != nil {
		return
	}
	s := sample{at: time.Since(r.start), idle: st.Idle, calls: r.calls()}
	r.mu.Lock()
	r.samples = append(r.samples, s)
	r.mu.Unlock()
}

// calls are the node's calls by action since the recorder was made.
func (r *recorder) calls() map[string]int64 {
	now, _ := r.h.Calls(r.node.InstanceID)
	return diffCalls(now, r.base)
}

// throttledByAction are the node's throttled calls since the recorder
// was made.
func (r *recorder) throttledByAction() map[string]int64 {
	_, th := r.h.Calls(r.node.InstanceID)
	return diffCalls(th, r.baseTh)
}

func (r *recorder) throttled() int64 {
	var n int64
	for _, v := range r.throttledByAction() {
		n += v
	}
	return n
}

func diffCalls(now, base map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range now {
		if d := v - base[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// podDone records one pod's outcome.
func (r *recorder) podDone(took time.Duration, at time.Time, ok bool, retries int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts += int64(retries)
	if !ok {
		r.failed++
		return
	}
	r.latency = append(r.latency, took)
	r.ready = append(r.ready, at.Sub(r.start))
}

// fill writes the measurements into m and the series (simulated time).
func (r *recorder) fill(res *bench.Result, pods int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	m := &res.Metrics
	m.Pods, m.PodsFailed = pods, r.failed
	lat := slices.Clone(r.latency)
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(h.Sim(d)) / float64(time.Millisecond) }
	m.AllocP50Ms, m.AllocP90Ms = ms(percentile(lat, 0.50)), ms(percentile(lat, 0.90))
	m.AllocP99Ms, m.AllocMaxMs = ms(percentile(lat, 0.99)), ms(percentile(lat, 1))
	ready := slices.Clone(r.ready)
	slices.Sort(ready)
	if r.failed == 0 && len(ready) > 0 {
		m.TimeToAllMs = ms(ready[len(ready)-1])
	}
	m.FailedAllocs = r.attempts
	m.CallsByAction = r.calls()
	m.Throttled = r.throttled()
	var total int64
	for a, n := range m.CallsByAction {
		total += n
		if bench.IsMutating(a) {
			m.MutatingCalls += n
		}
	}
	if pods > 0 {
		m.CallsPerPod = float64(total) / float64(pods)
		m.MutatingPerPod = float64(m.MutatingCalls) / float64(pods)
	}
	var idleSum float64
	for _, s := range r.samples {
		idleSum += float64(s.idle)
	}
	if n := len(r.samples); n > 0 {
		m.IdleIPsAvg = idleSum / float64(n)
		m.IdleIPsEnd = r.samples[n-1].idle
	}
	sec := func(d time.Duration) float64 { return h.Sim(d).Seconds() }
	podsReady := bench.Series{Name: "pods-ready", XLabel: "seconds", YLabel: "pods with an address"}
	for i, d := range ready {
		podsReady.X, podsReady.Y = append(podsReady.X, sec(d)), append(podsReady.Y, float64(i+1))
	}
	idle := bench.Series{Name: "idle-ips", XLabel: "seconds", YLabel: "idle addresses"}
	for _, s := range r.samples {
		idle.X, idle.Y = append(idle.X, sec(s.at)), append(idle.Y, float64(s.idle))
	}
	res.Series = append(res.Series, podsReady, idle)
	actions := slices.Sorted(maps.Keys(m.CallsByAction))
	for _, a := range actions {
		c := bench.Series{Name: "calls:" + a, XLabel: "seconds", YLabel: "calls so far"}
		for _, s := range r.samples {
			c.X, c.Y = append(c.X, sec(s.at)), append(c.Y, float64(s.calls[a]))
		}
		res.Series = append(res.Series, c)
	}
	res.Series = append(res.Series, latencyCDF(lat, ms))
}

// latencyCDF is the empirical CDF of sorted latencies.
func latencyCDF(sorted []time.Duration, ms func(time.Duration) float64) bench.Series {
	s := bench.Series{Name: "alloc-cdf", XLabel: "AllocIP latency (ms)", YLabel: "fraction of pods"}
	for i, d := range sorted {
		s.X, s.Y = append(s.X, ms(d)), append(s.Y, float64(i+1)/float64(len(sorted)))
	}
	return s
}

// percentile of sorted values (nearest rank); p=1 is the maximum.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}
