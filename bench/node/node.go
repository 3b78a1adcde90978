// Package node runs the node benchmarks: one instance (ecs.g7.4xlarge by
// default) with its daemon on a harness, whose pool warms up and
// settles, then a scenario (cold burst, warm churn, vSwitch exhaustion
// and recovery, throttled region) measured until the pool settles again.
// The pool policy (PoolPolicy) is what a comparison varies.
package node

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/harness"
	"github.com/terway-sim/terway/bench/profile"
	"github.com/terway-sim/terway/fakecloud"
)

// Node scenarios.
const (
	ScenarioColdBurst  = "cold-burst"
	ScenarioWarmChurn  = "warm-churn"
	ScenarioExhaustion = "exhaustion"
	ScenarioThrottled  = "throttled"
	// ScenarioBurstRelease is a cold burst whose pods then all go at once
	// (a Deployment scaled to zero), measured until the pool settled: the
	// price of growing and of shrinking back.
	ScenarioBurstRelease = "burst-release"
)

// Scenarios lists the node scenarios.
func Scenarios() []string {
	return []string{ScenarioColdBurst, ScenarioWarmChurn, ScenarioExhaustion, ScenarioThrottled, ScenarioBurstRelease}
}

// Options configure one node benchmark: one daemon as a library,
// fakecloud in-process, the real SDK over loopback. Durations are
// simulated time.
type Options struct {
	Scenario string
	// Pods is the burst (cold-burst, burst-release, exhaustion, throttled) or the pods
	// running throughout (warm-churn).
	Pods int
	// Profile names a built-in profile ("default" when empty).
	Profile   string
	Seed      int64
	TimeScale float64
	// InstanceType is the node's ECS type (harness.DefaultInstanceType
	// when empty).
	InstanceType string
	Pool         PoolPolicy
	// Daemon are further eni_conf keys (simulated time) over the pool's.
	Daemon map[string]any

	// Duration (default 2m), Interval between waves (default 5s) and
	// MaxWave, the most pods replaced in one wave (default 6): warm-churn.
	Duration time.Duration
	Interval time.Duration
	MaxWave  int
	// Tail is a quiet spell after the last wave, still measured (default
	// 0): long enough, idle reclaim shows in the idle addresses.
	Tail time.Duration
	// Free is how many addresses the vSwitch has left when the burst
	// starts (default Pods/2) and RecoverAfter when, after the burst
	// started, the other tenant gives its addresses back (default 20s):
	// exhaustion.
	Free         int
	RecoverAfter time.Duration
	// ThrottleWindow (default 60s) and Throttle (budgets per window by
	// action; default defaultThrottledBudgets): throttled.
	ThrottleWindow time.Duration
	Throttle       map[string]int

	// RetryEvery is how long the simulated plugin waits before retrying a
	// failed ADD (default 5s), AttemptTimeout its deadline per ADD
	// (default 2m, kubelet's), Deadline how long a pod may take in all
	// (default 15m).
	RetryEvery     time.Duration
	AttemptTimeout time.Duration
	Deadline       time.Duration
	// SampleEvery is the sampling period of the series (default 1s).
	SampleEvery time.Duration
	// Quiet is how long (real time) the pool and the node's calls must
	// stay unchanged to count as settled (default 25ms).
	Quiet time.Duration

	// Name names the result (default "<scenario>-<pods>-<profile>-pool<min>-<max>[-<more pool keys>]").
	Name string
	// Command is the command line recorded in the result.
	Command string
	Logger  *slog.Logger
}

// defaultThrottledBudgets are the throttled scenario's per-window budgets:
// about half of what a 100-pod cold burst needs of each mutating action,
// so that the burst spans at least two windows.
func defaultThrottledBudgets() map[string]int {
	return map[string]int{"*": 20, "CreateNetworkInterface": 2, "AttachNetworkInterface": 2,
		"AssignPrivateIpAddresses": 2, "UnassignPrivateIpAddresses": 2, "DescribeNetworkInterfaceAttribute": 6,
		"DescribeVSwitches": 3}
}

func (o *Options) defaults() error {
	if !slices.Contains(Scenarios(), o.Scenario) {
		return fmt.Errorf("unknown scenario %q (%v)", o.Scenario, Scenarios())
	}
	if o.Pods <= 0 {
		return fmt.Errorf("pods must be positive, got %d", o.Pods)
	}
	if o.Profile == "" {
		o.Profile = "default"
	}
	if o.TimeScale <= 0 {
		o.TimeScale = 1
	}
	if o.InstanceType == "" {
		o.InstanceType = harness.DefaultInstanceType
	}
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDur(&o.Duration, 2*time.Minute)
	setDur(&o.Interval, 5*time.Second)
	setDur(&o.RecoverAfter, 20*time.Second)
	setDur(&o.ThrottleWindow, time.Minute)
	setDur(&o.RetryEvery, 5*time.Second)
	setDur(&o.AttemptTimeout, 2*time.Minute)
	setDur(&o.Deadline, 15*time.Minute)
	setDur(&o.SampleEvery, time.Second)
	setDur(&o.Quiet, 25*time.Millisecond)
	if o.MaxWave <= 0 {
		o.MaxWave = 6
	}
	if o.Free <= 0 {
		o.Free = max(1, o.Pods/2)
	}
	if o.Scenario == ScenarioExhaustion && o.Pods > exhaustionMaxPods {
		return fmt.Errorf("exhaustion: at most %d pods fit its /24 vSwitch, got %d", exhaustionMaxPods, o.Pods)
	}
	if o.Scenario == ScenarioThrottled && o.Throttle == nil {
		o.Throttle = defaultThrottledBudgets()
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("%s-%d-%s-pool%s", o.Scenario, o.Pods, o.Profile, o.Pool.slug())
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// params are the scenario's inputs as recorded in the result.
func (o *Options) params() map[string]any {
	p := map[string]any{"pods": o.Pods, "instanceType": o.InstanceType, "pool": o.Pool.String(), "storeFsync": o.TimeScale >= 1,
		"retryEvery": o.RetryEvery.String(), "attemptTimeout": o.AttemptTimeout.String(), "deadline": o.Deadline.String()}
	switch o.Scenario {
	case ScenarioWarmChurn:
		p["duration"], p["interval"], p["maxWave"], p["tail"] = o.Duration.String(), o.Interval.String(), o.MaxWave, o.Tail.String()
	case ScenarioExhaustion:
		p["free"], p["recoverAfter"] = o.Free, o.RecoverAfter.String()
	case ScenarioThrottled:
		p["throttleWindow"], p["throttle"] = o.ThrottleWindow.String(), maps.Clone(o.Throttle)
	}
	return p
}

// Run runs one node benchmark and returns its result. The node
// starts, its pool warms up and settles (the calls of that phase are
// WarmupCallsByAction), then the scenario runs and is measured until the
// pool settles again.
func Run(ctx context.Context, o Options) (*bench.Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	prof, err := profile.ByName(o.Profile)
	if err != nil {
		return nil, err
	}
	wall := time.Now()
	ho := harness.Options{Profile: prof, Seed: o.Seed, TimeScale: o.TimeScale, Logger: o.Logger,
		// At scale s the store's fsync (real time) would weigh 1/s times
		// its real cost in simulated time: scaled runs skip it.
		StoreNoSync: o.TimeScale < 1}
	if o.Scenario == ScenarioExhaustion {
		// A vSwitch the other tenant can fill without filling the VPC.
		ho.PodVSwitches = []fakecloud.VSwitchSpec{{ID: exhaustionVSwitch, CIDR: exhaustionCIDR}}
	}
	h, err := harness.New(ctx, ho)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	nodeCfg := harness.MergeConfig(o.Pool.config(), o.Daemon)
	n, err := h.AddNode(ctx, harness.NodeSpec{InstanceType: o.InstanceType, Daemon: nodeCfg})
	if err != nil {
		return nil, err
	}
	run := &nodeRun{o: &o, h: h, n: n}
	defer func() {
		if run.rec != nil {
			run.rec.halt()
		}
	}()
	if err := run.settle(ctx); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	warmup, _ := h.Calls(n.InstanceID)
	res := &bench.Result{Schema: bench.SchemaVersion, Kind: "node", Name: o.Name, Scenario: o.Scenario, Command: o.Command,
		Params: o.params(), Run: bench.RunInfo{Started: wall.UTC(), Seed: o.Seed, Profile: prof.Name, TimeScale: o.TimeScale,
			Daemon: n.Config, Machine: bench.MachineInfo(), GitCommit: bench.GitCommit()}}
	var pods int
	switch o.Scenario {
	case ScenarioColdBurst:
		pods, err = run.coldBurst(ctx)
	case ScenarioBurstRelease:
		pods, err = run.burstRelease(ctx)
	case ScenarioWarmChurn:
		pods, err = run.warmChurn(ctx)
	case ScenarioExhaustion:
		pods, err = run.exhaustion(ctx)
	case ScenarioThrottled:
		pods, err = run.throttled(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Scenario, err)
	}
	run.rec.fill(res, pods)
	res.Metrics.WarmupCallsByAction = warmup
	res.Metrics.ReleaseCallsByAction = run.releaseCalls
	if o.Scenario == ScenarioThrottled {
		run.lowerBound(res)
	}
	res.Metrics.WallSeconds = time.Since(wall).Seconds()
	if err := h.Close(); err != nil {
		return nil, fmt.Errorf("tear down: %w", err)
	}
	return res, nil
}
