// Package benchtest provides hand-made results for the tests of the
// result format (package bench) and of the reports (package report):
// Params and daemon values are float64/string/bool/maps, what JSON
// decodes, so that a round trip compares equal. Every function returns a
// fresh copy, which a test may change.
package benchtest

import (
	"strconv"
	"time"

	"github.com/terway-sim/terway/bench"
)

// machine is the machine every fixture ran on.
var machine = bench.Machine{
	GoVersion: "go1.26.8", OS: "linux", Arch: "amd64", CPUs: 2,
	CPUModel: "Test CPU @ 2.0GHz", MemoryMiB: 3936, Kernel: "6.18.0",
}

// ColdBurst is a node result with every kind of series: a ready-made
// latency CDF, pods ready, calls by action and idle IPs, and warm-up calls.
func ColdBurst() *bench.Result {
	r := header("node", "cold-burst-100", "cold-burst", "terway-bench node --scenario cold-burst --pods 100 --seed 1 --profile default && echo done")
	r.Run = bench.RunInfo{
		Started:   time.Date(2025, 11, 29, 12, 0, 0, 0, time.UTC),
		Seed:      1,
		Profile:   "default",
		TimeScale: 0.1,
		Daemon:    map[string]any{"max_pool_size": 5.0, "min_pool_size": 0.0, "backoff_override": map[string]any{"eni_ops": "1s"}},
		Machine:   machine,
		GitCommit: "0123abcd",
	}
	r.Params = map[string]any{"pods": 100.0, "burst": true}
	r.Metrics = bench.Metrics{
		Pods: 100, AllocP50Ms: 812.5, AllocP90Ms: 2400, AllocP99Ms: 3100.25, AllocMaxMs: 3300,
		TimeToAllMs:   3350,
		CallsByAction: map[string]int64{"AssignPrivateIpAddresses": 12, "AttachNetworkInterface": 4, "CreateNetworkInterface": 4, "DescribeNetworkInterfaces": 300},
		MutatingCalls: 20, CallsPerPod: 3.2, MutatingPerPod: 0.2,
		IdleIPsAvg: 3.5, IdleIPsEnd: 2, WallSeconds: 1.7,
		WarmupCallsByAction: map[string]int64{"DescribeNetworkInterfaces": 3, "DescribeInstanceTypes": 1},
	}
	r.Series = []bench.Series{
		{Name: "alloc-cdf", X: []float64{5, 50, 812.5, 2400, 3100.25, 3300}, Y: []float64{0.01, 0.2, 0.5, 0.9, 0.99, 1}},
		{Name: "pods-ready", X: []float64{0, 0.5, 1, 2, 3.35}, Y: []float64{0, 10, 40, 90, 100}},
		{Name: "calls:CreateNetworkInterface", X: []float64{0, 1, 2, 3}, Y: []float64{0, 2, 4, 4}},
		{Name: "calls:AssignPrivateIpAddresses", X: []float64{0, 1, 2, 3}, Y: []float64{0, 5, 10, 12}},
		{Name: "idle-ips", X: []float64{0, 1, 2, 3}, Y: []float64{0, 6, 4, 2}},
	}
	return r
}

// Churn is one of two warm-churn results that differ in pool
// settings, for the comparison table and overlays. Its latencies come as
// raw samples, so the CDF is computed.
func Churn(minPool float64, callsPerPod float64) *bench.Result {
	name := "warm-churn-min0"
	if minPool != 0 {
		name = "warm-churn-min10"
	}
	r := header("node", name, "warm-churn", "terway-bench node --scenario warm-churn --min-pool-size "+strconv.FormatFloat(minPool, 'f', -1, 64))
	r.Run = bench.RunInfo{
		Seed: 7, Profile: "default", TimeScale: 0.1,
		Daemon:  map[string]any{"max_pool_size": 20.0, "min_pool_size": minPool},
		Machine: machine,
	}
	r.Params = map[string]any{"pods": 200.0, "rate": 5.0}
	r.Metrics = bench.Metrics{
		Pods: 200, AllocP50Ms: 2, AllocP90Ms: 40, AllocP99Ms: 900, AllocMaxMs: 1200,
		TimeToAllMs:   40_000,
		CallsByAction: map[string]int64{"AssignPrivateIpAddresses": int64(callsPerPod * 100), "UnassignPrivateIpAddresses": int64(callsPerPod * 100)},
		MutatingCalls: int64(callsPerPod * 200), CallsPerPod: callsPerPod, MutatingPerPod: callsPerPod,
		IdleIPsAvg: 4 + minPool, IdleIPsEnd: int(minPool), WallSeconds: 4, FailedAllocs: 3,
	}
	r.Series = []bench.Series{
		{Name: "alloc-latency", X: []float64{0, 1, 2, 3, 4, 5}, Y: []float64{1, 2, 2, 40, 900, 1200}},
		{Name: "pods-ready", X: []float64{0, 20, 40}, Y: []float64{0, 100, 200}},
		{Name: "calls:AssignPrivateIpAddresses", X: []float64{0, 20, 40}, Y: []float64{0, 50, 100}},
		{Name: "calls:UnassignPrivateIpAddresses", X: []float64{0, 30}, Y: []float64{0, 100}},
		{Name: "idle-ips", X: []float64{0, 20, 40}, Y: []float64{minPool, 4 + minPool, minPool}},
		{Name: "throttled", X: []float64{0, 40}, Y: []float64{0, 0}},
	}
	return r
}

// Fleet is a fleet result: nodes, throttling, a lower bound and its ratio.
func Fleet() *bench.Result {
	r := header("fleet", "fleet-1000x30", "fleet", "terway-bench fleet --nodes 1000 --pods-per-node 30")
	r.Run = bench.RunInfo{
		Seed: 1, Profile: "default", TimeScale: 0.01,
		Daemon: map[string]any{"max_pool_size": 5.0}, Machine: machine,
	}
	r.Params = map[string]any{"nodes": 1000.0, "podsPerNode": 30.0}
	r.Metrics = bench.Metrics{
		Pods: 30000, Nodes: 1000, TimeToAllMs: 600_000,
		CallsByAction: map[string]int64{"CreateNetworkInterface": 2000, "AssignPrivateIpAddresses": 8000},
		Throttled:     150, MutatingCalls: 10000, CallsPerPod: 0.3333, MutatingPerPod: 0.3333,
		LowerBoundMs: 400_000, RatioToLowerBound: 1.5, MemoryPerDaemonMiB: 1.25, WallSeconds: 180, CallsPerNode: 10,
	}
	r.Series = []bench.Series{
		{Name: "pods-ready", X: []float64{0, 300, 600}, Y: []float64{0, 15000, 30000}},
		{Name: "throttled", X: []float64{0, 300, 600}, Y: []float64{0, 100, 150}},
	}
	return r
}

// header is a result of the current schema with what ran and how.
func header(kind, name, scenario, command string) *bench.Result {
	return &bench.Result{Schema: bench.SchemaVersion, Kind: kind, Name: name, Scenario: scenario, Command: command}
}

// All returns fresh copies of every fixture, in Kind/Name order.
func All() []*bench.Result {
	return []*bench.Result{Fleet(), ColdBurst(), Churn(0, 2), Churn(10, 1)}
}
