// Package peer reproduces a peer's benchmark on our daemon: Cilium's
// BenchmarkAllocDelay{20,50}Worker{1,10,50}, whose worker count here
// really changes the time (see Options for how Cilium's terms map to
// ours).
package peer

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/harness"
	"github.com/terway-sim/terway/bench/profile"
	"github.com/terway-sim/terway/daemon/cloud"
)

// Options configure the reproduction of Cilium's
// BenchmarkAllocDelay{20,50}Worker{1,10,50} (pkg/aws/ipam/node_manager_test.go,
// anchors §2.4) on our daemon: Nodes new nodes each need MinAllocate
// addresses; every API call takes Delay; calls go through a 100 QPS,
// burst 4 limiter; the timer runs until every node has what it needs.
//
// Mapping of Cilium's terms: a node's "needed addresses" with no pods is
// max(MinAllocate, PreAllocate), which our daemon keeps idle as
// min_pool_size (max_pool_size the same: Cilium allocates nothing above
// the watermark by default). Cilium's limiter is one for the operator,
// which allocates for every node; ours are per daemon (rate_limit, set
// to QPS) and, to keep Cilium's shape, one shared bucket in front of the
// API (harness.Options.SharedQPS). Cilium's m4.large (2 vCPU, 8 GiB) is
// our ecs.g7.large. Workers is how many nodes are brought up at once
// (daemon start and allocation until the node has what it needs): the
// role of the node manager's parallel workers, which Cilium's current
// code no longer honours.
type Options struct {
	// Delay is the fixed latency of every API call (default 20ms).
	Delay time.Duration
	// Workers is how many nodes are brought up concurrently (default 10).
	Workers int
	// Nodes is Cilium's b.N (default 20).
	Nodes int
	// QPS and Burst are the shared limiter (default 100 and 4).
	QPS   float64
	Burst int
	// MinAllocate and PreAllocate are Cilium's (default 10 and 1).
	MinAllocate int
	PreAllocate int
	// InstanceType of the nodes (default ecs.g7.large).
	InstanceType string
	Seed         int64
	// TimeScale is 1 by default: Cilium's benchmark runs in real time.
	TimeScale float64
	// Name names the result (default "alloc-delay<ms>-workers<W>-nodes<N>").
	Name    string
	Command string
	Logger  *slog.Logger
}

func (o *Options) defaults() error {
	orDefault(&o.Delay, 20*time.Millisecond)
	orDefault(&o.Workers, 10)
	orDefault(&o.Nodes, 20)
	orDefault(&o.QPS, 100)
	orDefault(&o.Burst, 4)
	orDefault(&o.MinAllocate, 10)
	orDefault(&o.PreAllocate, 1)
	orDefault(&o.TimeScale, 1)
	if o.InstanceType == "" {
		o.InstanceType = "ecs.g7.large"
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("alloc-delay%d-workers%d-nodes%d", o.Delay.Milliseconds(), o.Workers, o.Nodes)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// orDefault sets *v to def unless *v is positive.
func orDefault[T int | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// peerDaemonConfig is the nodes' eni_conf: the needed addresses as the
// warm pool, and every API limited to QPS.
func (o *Options) peerDaemonConfig() map[string]any {
	need := max(o.MinAllocate, o.PreAllocate)
	perMinute := int(o.QPS * 60)
	limits := map[string]int{}
	for api := range cloud.DefaultRateLimits() {
		limits[api] = perMinute
	}
	return map[string]any{"min_pool_size": need, "max_pool_size": need, "rate_limit": limits}
}

// Run runs the peer reproduction and returns its result: the time
// until every node has its addresses, and the calls it took.
func Run(ctx context.Context, o Options) (*bench.Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	wall := time.Now()
	prof := profile.FixedDelay(o.Delay)
	h, err := harness.New(ctx, harness.Options{Profile: prof, Seed: o.Seed, TimeScale: o.TimeScale, SharedQPS: o.QPS,
		SharedBurst: o.Burst, StoreNoSync: true, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	need := max(o.MinAllocate, o.PreAllocate)
	cfg := o.peerDaemonConfig()
	start := time.Now()
	ready, err := bringUp(ctx, h, o, cfg, need)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	calls, throttled := h.Calls()
	res := &bench.Result{Schema: bench.SchemaVersion, Kind: "peer", Name: o.Name, Scenario: "alloc-delay", Command: o.Command,
		Params: map[string]any{"delay": o.Delay.String(), "workers": o.Workers, "nodes": o.Nodes, "qps": o.QPS,
			"burst": o.Burst, "minAllocate": o.MinAllocate, "preAllocate": o.PreAllocate, "instanceType": o.InstanceType},
		Run: bench.RunInfo{Started: wall.UTC(), Seed: o.Seed, Profile: prof.Name, TimeScale: o.TimeScale,
			Daemon: harness.MergeConfig(harness.BaseDaemonConfig(nil), cfg), Machine: bench.MachineInfo(), GitCommit: bench.GitCommit()}}
	m := &res.Metrics
	m.Nodes = o.Nodes
	m.TimeToAllMs = float64(h.Sim(elapsed)) / float64(time.Millisecond)
	m.CallsByAction = calls
	var total int64
	for a, n := range calls {
		total += n
		m.Throttled += throttled[a]
		if bench.IsMutating(a) {
			m.MutatingCalls += n
		}
	}
	m.CallsPerNode = float64(total) / float64(o.Nodes)
	// The shared limiter lets Burst calls through at once, then QPS per
	// (simulated) second: the calls cannot take less than this.
	// RatioToLowerBound stays unset: here the time also holds each
	// daemon's start on this machine, so the ratio is not the
	// machine-independent figure the regression gate takes it for.
	m.LowerBoundMs = float64(max(0, total-int64(o.Burst))) / o.QPS * 1000
	res.Series = peerSeries(h, ready)
	m.WallSeconds = time.Since(wall).Seconds()
	if err := h.Close(); err != nil {
		return nil, fmt.Errorf("tear down: %w", err)
	}
	return res, nil
}

// nodeReady is when a node had its addresses: since the benchmark
// started, and since its own bring-up started.
type nodeReady struct{ at, took time.Duration }

// bringUp brings the nodes up, o.Workers at a time: a worker starts a
// node's daemon and waits until its pool holds need idle addresses, then
// takes the next node.
func bringUp(ctx context.Context, h *harness.Harness, o Options, cfg map[string]any, need int) ([]nodeReady, error) {
	start := time.Now()
	jobs := make(chan int, o.Nodes)
	for i := 0; i < o.Nodes; i++ {
		jobs <- i
	}
	close(jobs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		ready []nodeReady
		first error
	)
	var wg sync.WaitGroup
	for w := 0; w < min(o.Workers, o.Nodes); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				t0 := time.Now()
				err := bringUpNode(ctx, h, o.InstanceType, cfg, need)
				mu.Lock()
				if err != nil && first == nil {
					first = err
					cancel()
				}
				ready = append(ready, nodeReady{at: time.Since(start), took: time.Since(t0)})
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return ready, first
}

func bringUpNode(ctx context.Context, h *harness.Harness, instanceType string, cfg map[string]any, need int) error {
	n, err := h.AddNode(ctx, harness.NodeSpec{InstanceType: instanceType, Daemon: cfg})
	if err != nil {
		return err
	}
	for {
		s, err := n.PoolStats(ctx)
		if err != nil {
			return err
		}
		if s.Idle >= need {
			return nil
		}
		if err := harness.Sleep(ctx, time.Millisecond); err != nil {
			return fmt.Errorf("%s never had %d addresses (last %+v): %w", n.Name, need, s, err)
		}
	}
}

func peerSeries(h *harness.Harness, ready []nodeReady) []bench.Series {
	slices.SortFunc(ready, func(a, b nodeReady) int { return int(a.at - b.at) })
	nodes := bench.Series{Name: "nodes-ready", XLabel: "seconds", YLabel: "nodes with their addresses"}
	took := make([]time.Duration, 0, len(ready))
	for i, r := range ready {
		nodes.X, nodes.Y = append(nodes.X, h.Sim(r.at).Seconds()), append(nodes.Y, float64(i+1))
		took = append(took, r.took)
	}
	slices.Sort(took)
	cdf := bench.Series{Name: "node-ready-cdf", XLabel: "node bring-up (ms)", YLabel: "fraction of nodes"}
	for i, d := range took {
		cdf.X = append(cdf.X, float64(h.Sim(d))/float64(time.Millisecond))
		cdf.Y = append(cdf.Y, float64(i+1)/float64(len(took)))
	}
	return []bench.Series{nodes, cdf}
}
