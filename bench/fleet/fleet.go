// Package fleet simulates a fleet: many daemons (package daemon as
// libraries, each with its own fake Kubernetes clientset, store, socket
// and fakecloud instance) in this process against one in-process
// fakecloud whose API budgets are account-wide per action and window,
// with kubelet's retries and a DaemonSet's restarts. It reports the time
// until every pod has an address against the lower bound the budgets
// allow. See Options for how time scaling works and what stays invariant.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/profile"
	"github.com/terway-sim/terway/fakecloud"
)

// Options configure Run. Every duration here is simulated
// (world) time: Run multiplies it by TimeScale before waiting.
//
// # Time scaling
//
// The world can run faster (or slower) than real time, by configuration
// only, no special code path:
//
//   - fakecloud's TimeScale multiplies its delays (attach, detach, delete,
//     metadata lag, consistency window, the profile's per-action latency);
//   - the throttle window (fakecloud does not scale it) is set to
//     ThrottleWindow × TimeScale, so B calls per 60 s become B calls per
//     60 s × TimeScale of real time;
//   - every daemon duration key (ip_batch_window, metadata_lag_timeout,
//     gc_period, pool_check_period, ip_pool_sync_period, ip_exhausted_inhibit,
//     vswitch_cache_ttl, idle reclaim, sticky_time, cni_gc_grace) and every
//     backoff_override schedule (Duration and Cap of each of the daemon's
//     backoff keys) is multiplied by TimeScale, every rate_limit (calls per
//     minute) divided by it;
//   - the fleet's own waits (start jitter, kubelet's retry of a failed ADD
//     and its deadline, CrashLoopBackOff, sampling) are multiplied by it.
//
// Results are in simulated time: real durations divided by TimeScale.
//
// Invariant under scaling, as long as this machine keeps up: call counts
// (by action, per pod), throttled calls, the time until every pod has an
// address and the ratio to the lower bound; they depend only on the order
// and spacing of events in simulated time. What is not scaled is the
// machine's own time (CPU, loopback HTTP to the API, gRPC, bbolt) and a few
// waits no configuration reaches: client-go's informer sync poll (100 ms),
// the daemon's 118 s RPC cap, STS refresh and the node-publish tick. In simulated time these last 1/TimeScale times longer, so below
// some scale the figures drift and finally collapse: measured on this
// 2-core machine, 1,000 × 30 gives the same time (75.6 s), ratio (1.26),
// ENI calls (2,000 + 2,000) and throttled calls (±1 %) at TimeScale 2 and
// 1, and is 14 % slower at 0.5; at 0.25 the daemons' timeouts fire on
// machine delays, ENIs are rolled back and retried and the run takes 20
// times longer. AllocIP latency percentiles are the most sensitive (p99
// 5.7 s at 2, 7.4 s at 1). Wall time, memory per daemon, goroutines and
// open files are properties of this machine and process, not of the
// simulated world, and are never scaled. Exact equality across two runs
// is not promised either: a thousand concurrent daemons race for the same
// throttle windows.
type Options struct {
	// Name identifies the configuration; default "fleet-<nodes>x<pods>".
	Name string
	// Command is the command line recorded in the result.
	Command string
	// Nodes (default 100) and PodsPerNode (default 30).
	Nodes       int
	PodsPerNode int
	// Seed drives fakecloud (IDs, fault decisions) and the fleet's own
	// randomness (start jitter, retry jitter); default 1.
	Seed int64
	// TimeScale is real time per simulated time, in (0, 10]; default 1.
	// Below 1 the world runs faster than real time, above 1 slower (to
	// check that a run's figures are not bound by this machine: they
	// should not change).
	TimeScale float64
	// StartJitter spreads the daemons' starts uniformly over this span
	// (ARCHITECTURE.md "Fleet behaviour"); default 10s. Negative: 0.
	StartJitter time.Duration
	// InstanceType of every node; default the smallest of ecs.g7.xlarge,
	// ecs.g7.2xlarge, ecs.g7.4xlarge, ecs.g7.32xlarge whose ENIMultiIP
	// capacity holds PodsPerNode plus max_pool_size.
	InstanceType string
	// Daemon adds or replaces eni_conf keys of every daemon, in simulated
	// time (durations as Go duration strings). backoff_override and
	// rate_limit entries replace the built-in entry of their key. Defaults:
	// Terway's chart pool (max_pool_size 5, min_pool_size 0) and Terway's
	// intervals; see fleetDaemonDefaults.
	Daemon map[string]any
	// Profile sets fakecloud's delays and per-action latencies (world
	// time; fakecloud scales them); the zero Profile means the built-in
	// "default" (see profile.All).
	Profile profile.Profile
	// Throttle overrides fakecloud's default budgets per action (calls per
	// ThrottleWindow, account-wide; "*" for actions not listed; 0
	// unlimited).
	Throttle map[string]int
	// ThrottleWindow is the simulated length of a throttle window; default
	// fakecloud's 60 s.
	ThrottleWindow time.Duration
	// Faults are installed next to the profile's latencies before the
	// fleet starts; fakecloud scales their latency itself.
	Faults []fakecloud.Fault
	// SampleEvery is the period of the time series; default 1s.
	SampleEvery time.Duration
	// Timeout bounds the time until every pod has an address; default 1h.
	// Pods without one then count as failed.
	Timeout time.Duration
	// TempDir is where the fleet's directory (stores, sockets) is made;
	// default os.TempDir(). Keep it short: unix socket paths are limited
	// to 108 bytes.
	TempDir string
	// Restart, once every pod has an address, stops every daemon and
	// starts them all again at once, pods running, and measures that
	// instead (scenario fleet-restart): the calls it makes, crash loops,
	// and that every pod's sandbox gets its address again.
	Restart bool
	// Logger receives the fleet's progress; nil discards it.
	Logger *slog.Logger
	// DaemonLogger is every daemon's logger; nil discards (a thousand
	// daemons warning about throttling are a lot of lines).
	DaemonLogger *slog.Logger
}

// fleetDefaultScale is the default TimeScale. 1,000 × 30 under the
// default budgets takes a minute or two of simulated time, so real time
// is fast enough; on this 2-core machine, 1,000 daemons starting within
// 10 s at a smaller scale make the machine, not the cloud, the bottleneck
// (see Options).
const fleetDefaultScale = 1.0

func (o Options) withDefaults() (Options, error) {
	if o.Nodes == 0 {
		o.Nodes = 100
	}
	if o.PodsPerNode == 0 {
		o.PodsPerNode = 30
	}
	if o.Nodes < 1 || o.PodsPerNode < 1 {
		return o, fmt.Errorf("fleet: nodes (%d) and pods per node (%d) must be at least 1", o.Nodes, o.PodsPerNode)
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.TimeScale == 0 {
		o.TimeScale = fleetDefaultScale
	}
	if o.TimeScale < 0 || o.TimeScale > 10 {
		return o, fmt.Errorf("fleet: time scale %g must be in (0, 10]", o.TimeScale)
	}
	if o.StartJitter == 0 {
		o.StartJitter = 10 * time.Second
	}
	o.StartJitter = max(o.StartJitter, 0)
	if o.Name == "" && o.Restart {
		o.Name = fmt.Sprintf("fleet-restart-%dx%d", o.Nodes, o.PodsPerNode)
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("fleet-%dx%d", o.Nodes, o.PodsPerNode)
	}
	if o.Profile.Name == "" {
		o.Profile = profile.Default()
	}
	if err := o.Profile.Validate(); err != nil {
		return o, fmt.Errorf("fleet: %w", err)
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Hour
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ThrottleWindow == 0 {
		o.ThrottleWindow = time.Duration(fakecloud.DefaultSettings().ThrottleWindow)
	}
	if o.ThrottleWindow < 0 {
		return o, errors.New("fleet: the throttle window must be positive")
	}
	return o, nil
}

// ErrPodsFailed is wrapped by Run's error when some pods had no
// address by the deadline; the result is returned with it.
var ErrPodsFailed = errors.New("fleet: pods without an address")

// Run simulates a fleet: o.Nodes daemons (package daemon as
// libraries, each with its own fake Kubernetes clientset, store, socket
// and fakecloud instance) in this process against one in-process
// fakecloud with account-wide per-action budgets. Every node's daemon
// starts after a random jitter; when it is ready its o.PodsPerNode pods
// call AllocIP over its unix socket at once, as the CNI plugin does, and
// a failed ADD is retried as kubelet does (DEL, then a new sandbox after
// 10–15 s). It reports the time until every pod has an address, the
// calls (by action, per pod, throttled), the ratio to the lower bound the
// budgets allow (see fleetLowerBound) and heap per daemon.
//
// The result is in simulated time (see Options). With pods that never
// got an address the result is returned together with an error wrapping
// ErrPodsFailed.
func Run(ctx context.Context, o Options) (*bench.Result, error) {
	return runFleet(ctx, o, nil)
}

// runFleet is Run; inspect, when set, sees the fleet after the
// measurement and before it is torn down (tests).
func runFleet(ctx context.Context, o Options, inspect func(*fleet)) (*bench.Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := fleetCheckProxy(); err != nil {
		return nil, err
	}
	if err := fleetEnsureFiles(o.Nodes); err != nil {
		return nil, err
	}
	f, err := newFleet(o)
	if err != nil {
		return nil, err
	}
	res, runErr := f.run(ctx)
	if inspect != nil {
		inspect(f)
	}
	if err := f.close(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if res != nil {
		res.Metrics.WallSeconds = time.Since(f.created).Seconds()
	}
	return res, runErr
}

// fleetCheckProxy refuses a proxy that would carry the SDK's loopback
// calls: the Aliyun SDK honours HTTP_PROXY even for 127.0.0.1.
func fleetCheckProxy() error {
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		if os.Getenv(k) == "" {
			continue
		}
		np := os.Getenv("NO_PROXY") + "," + os.Getenv("no_proxy")
		if !strings.Contains(np, "127.0.0.1") {
			return fmt.Errorf("fleet: %s is set: set NO_PROXY=127.0.0.1,localhost so that the cloud SDK does not proxy loopback calls", k)
		}
	}
	return nil
}
