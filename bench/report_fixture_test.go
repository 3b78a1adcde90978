package bench

import (
	"encoding/json"
	"testing"
	"time"
)

// Hand-made results shared by the report, plot and check tests. Params
// and daemon values are float64/string/bool/maps, what JSON decodes, so
// that a round trip compares equal.

var fixtureMachine = Machine{
	GoVersion: "go1.26.8", OS: "linux", Arch: "amd64", CPUs: 2,
	CPUModel: "Test CPU @ 2.0GHz", MemoryMiB: 3936, Kernel: "6.18.0",
}

func fixtureColdBurst() *Result {
	return &Result{
		Schema:   SchemaVersion,
		Kind:     "node",
		Name:     "cold-burst-100",
		Scenario: "cold-burst",
		Command:  "terway-bench node --scenario cold-burst --pods 100 --seed 1 --profile default && echo done",
		Run: RunInfo{
			Started:   time.Date(2025, 11, 29, 12, 0, 0, 0, time.UTC),
			Seed:      1,
			Profile:   "default",
			TimeScale: 0.1,
			Daemon:    map[string]any{"max_pool_size": 5.0, "min_pool_size": 0.0, "backoff_override": map[string]any{"eni_ops": "1s"}},
			Machine:   fixtureMachine,
			GitCommit: "0123abcd",
		},
		Params: map[string]any{"pods": 100.0, "burst": true},
		Metrics: Metrics{
			Pods: 100, AllocP50Ms: 812.5, AllocP90Ms: 2400, AllocP99Ms: 3100.25, AllocMaxMs: 3300,
			TimeToAllMs:   3350,
			CallsByAction: map[string]int64{"AssignPrivateIpAddresses": 12, "AttachNetworkInterface": 4, "CreateNetworkInterface": 4, "DescribeNetworkInterfaces": 300},
			MutatingCalls: 20, CallsPerPod: 3.2, MutatingPerPod: 0.2,
			IdleIPsAvg: 3.5, IdleIPsEnd: 2, WallSeconds: 1.7,
			WarmupCallsByAction: map[string]int64{"DescribeNetworkInterfaces": 3, "DescribeInstanceTypes": 1},
		},
		Series: []Series{
			{Name: "alloc-cdf", X: []float64{5, 50, 812.5, 2400, 3100.25, 3300}, Y: []float64{0.01, 0.2, 0.5, 0.9, 0.99, 1}},
			{Name: "pods-ready", X: []float64{0, 0.5, 1, 2, 3.35}, Y: []float64{0, 10, 40, 90, 100}},
			{Name: "calls:CreateNetworkInterface", X: []float64{0, 1, 2, 3}, Y: []float64{0, 2, 4, 4}},
			{Name: "calls:AssignPrivateIpAddresses", X: []float64{0, 1, 2, 3}, Y: []float64{0, 5, 10, 12}},
			{Name: "idle-ips", X: []float64{0, 1, 2, 3}, Y: []float64{0, 6, 4, 2}},
		},
	}
}

// fixtureChurn is one of two warm-churn results that differ in pool
// settings, for the comparison table and overlays. Its latencies come as
// raw samples, so the CDF is computed.
func fixtureChurn(minPool float64, callsPerPod float64) *Result {
	name := "warm-churn-min0"
	if minPool != 0 {
		name = "warm-churn-min10"
	}
	return &Result{
		Schema:   SchemaVersion,
		Kind:     "node",
		Name:     name,
		Scenario: "warm-churn",
		Command:  "terway-bench node --scenario warm-churn --min-pool-size " + fmtCount(minPool),
		Run: RunInfo{
			Seed: 7, Profile: "default", TimeScale: 0.1,
			Daemon:  map[string]any{"max_pool_size": 20.0, "min_pool_size": minPool},
			Machine: fixtureMachine,
		},
		Params: map[string]any{"pods": 200.0, "rate": 5.0},
		Metrics: Metrics{
			Pods: 200, AllocP50Ms: 2, AllocP90Ms: 40, AllocP99Ms: 900, AllocMaxMs: 1200,
			TimeToAllMs:   40_000,
			CallsByAction: map[string]int64{"AssignPrivateIpAddresses": int64(callsPerPod * 100), "UnassignPrivateIpAddresses": int64(callsPerPod * 100)},
			MutatingCalls: int64(callsPerPod * 200), CallsPerPod: callsPerPod, MutatingPerPod: callsPerPod,
			IdleIPsAvg: 4 + minPool, IdleIPsEnd: int(minPool), WallSeconds: 4, FailedAllocs: 3,
		},
		Series: []Series{
			{Name: "alloc-latency", X: []float64{0, 1, 2, 3, 4, 5}, Y: []float64{1, 2, 2, 40, 900, 1200}},
			{Name: "pods-ready", X: []float64{0, 20, 40}, Y: []float64{0, 100, 200}},
			{Name: "calls:AssignPrivateIpAddresses", X: []float64{0, 20, 40}, Y: []float64{0, 50, 100}},
			{Name: "calls:UnassignPrivateIpAddresses", X: []float64{0, 30}, Y: []float64{0, 100}},
			{Name: "idle-ips", X: []float64{0, 20, 40}, Y: []float64{minPool, 4 + minPool, minPool}},
			{Name: "throttled", X: []float64{0, 40}, Y: []float64{0, 0}},
		},
	}
}

func fixtureFleet() *Result {
	return &Result{
		Schema:   SchemaVersion,
		Kind:     "fleet",
		Name:     "fleet-1000x30",
		Scenario: "fleet",
		Command:  "terway-bench fleet --nodes 1000 --pods-per-node 30",
		Run: RunInfo{
			Seed: 1, Profile: "default", TimeScale: 0.01,
			Daemon: map[string]any{"max_pool_size": 5.0}, Machine: fixtureMachine,
		},
		Params: map[string]any{"nodes": 1000.0, "podsPerNode": 30.0},
		Metrics: Metrics{
			Pods: 30000, Nodes: 1000, TimeToAllMs: 600_000,
			CallsByAction: map[string]int64{"CreateNetworkInterface": 2000, "AssignPrivateIpAddresses": 8000},
			Throttled:     150, MutatingCalls: 10000, CallsPerPod: 0.3333, MutatingPerPod: 0.3333,
			LowerBoundMs: 400_000, RatioToLowerBound: 1.5, MemoryPerDaemonMiB: 1.25, WallSeconds: 180, CallsPerNode: 10,
		},
		Series: []Series{
			{Name: "pods-ready", X: []float64{0, 300, 600}, Y: []float64{0, 15000, 30000}},
			{Name: "throttled", X: []float64{0, 300, 600}, Y: []float64{0, 100, 150}},
		},
	}
}

// fixtures returns fresh copies of every fixture, in Kind/Name order.
func fixtures() []*Result {
	return []*Result{fixtureFleet(), fixtureColdBurst(), fixtureChurn(0, 2), fixtureChurn(10, 1)}
}

// cloneResults deep-copies rs through JSON.
func cloneResults(t *testing.T, rs []*Result) []*Result {
	t.Helper()
	out := make([]*Result, len(rs))
	for i, r := range rs {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var c Result
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		out[i] = &c
	}
	return out
}
