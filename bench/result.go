package bench

import (
	"slices"
	"time"
)

// SchemaVersion is the version of the JSON result format. It changes
// only when a field changes meaning or goes away; new fields may be added
// within a version.
const SchemaVersion = 1

// Result is one run of one benchmark configuration: what ran, on what,
// and what it measured. It is the JSON format of results under
// bench/results/ and what the Markdown and plots are rendered from.
type Result struct {
	Schema int `json:"schema"`
	// Kind is "node" (one daemon), "fleet" (many daemons) or "peer"
	// (the reproduction of a peer's benchmark).
	Kind string `json:"kind"`
	// Name identifies the configuration, e.g. "cold-burst-100".
	Name string `json:"name"`
	// Scenario is "cold-burst", "warm-churn", "exhaustion", "throttled",
	// "fleet" or "alloc-delay".
	Scenario string `json:"scenario"`
	// Command is the exact command line that produced the result.
	Command string  `json:"command"`
	Run     RunInfo `json:"run"`
	// Params are the scenario's inputs (pods, nodes, pool sizes, rates…),
	// as the command line gave them.
	Params  map[string]any `json:"params"`
	Metrics Metrics        `json:"metrics"`
	// Series are time series for the plots; the X axis is seconds since
	// the start of the measurement, in simulated (scaled-back) time.
	Series []Series `json:"series,omitempty"`
}

// RunInfo is what a result needs to be reproduced and compared.
type RunInfo struct {
	Started   time.Time `json:"started"`
	Seed      int64     `json:"seed"`
	Profile   string    `json:"profile"`
	TimeScale float64   `json:"timeScale"`
	// Daemon is the daemon configuration (eni_conf keys) every node used.
	Daemon  map[string]any `json:"daemon"`
	Machine Machine        `json:"machine"`
	// GitCommit is the repository's HEAD when known.
	GitCommit string `json:"gitCommit,omitempty"`
}

// Machine describes where a run happened: timing figures only compare on
// the same kind of machine.
type Machine struct {
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel,omitempty"`
	MemoryMiB int    `json:"memoryMiB,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
}

// Metrics are the measured figures. Durations are in milliseconds of
// simulated time (real time divided by the time scale), so that a scaled
// run reports what the real cloud would have taken. Invariant tells which
// figures do not depend on the machine's speed (the regression gate
// compares only those).
type Metrics struct {
	Pods       int `json:"pods"`
	PodsFailed int `json:"podsFailed"`
	Nodes      int `json:"nodes,omitempty"`
	// AllocIP latency as the CNI plugin sees it.
	AllocP50Ms float64 `json:"allocP50Ms"`
	AllocP90Ms float64 `json:"allocP90Ms"`
	AllocP99Ms float64 `json:"allocP99Ms"`
	AllocMaxMs float64 `json:"allocMaxMs"`
	// TimeToAllMs is from the first pod's creation until every pod has
	// an address.
	TimeToAllMs float64 `json:"timeToAllMs"`
	// Calls by cloud action (all outcomes), throttled calls, and the
	// mutating calls (create/attach/detach/delete/assign/unassign: see
	// IsMutating).
	CallsByAction  map[string]int64 `json:"callsByAction"`
	Throttled      int64            `json:"throttled"`
	MutatingCalls  int64            `json:"mutatingCalls"`
	CallsPerPod    float64          `json:"callsPerPod"`
	MutatingPerPod float64          `json:"mutatingPerPod"`
	// IdleIPsAvg and IdleIPsEnd are the node's (or fleet's) idle
	// addresses averaged over the run and at its end.
	IdleIPsAvg float64 `json:"idleIPsAvg"`
	IdleIPsEnd int     `json:"idleIPsEnd"`
	// LowerBoundMs is the shortest time the API budgets allow for the
	// calls the run needed; RatioToLowerBound is TimeToAllMs divided by it
	// (fleet and throttled runs).
	LowerBoundMs      float64 `json:"lowerBoundMs,omitempty"`
	RatioToLowerBound float64 `json:"ratioToLowerBound,omitempty"`
	// MemoryPerDaemonMiB is the process's heap growth per simulated
	// daemon (fleet).
	MemoryPerDaemonMiB float64 `json:"memoryPerDaemonMiB,omitempty"`
	// WallSeconds is how long the run took on this machine.
	WallSeconds float64 `json:"wallSeconds"`
	// FailedAllocs counts AllocIP calls that failed and that the
	// simulated plugin retried (exhaustion, throttling); PodsFailed counts
	// pods that never got an address.
	FailedAllocs int64 `json:"failedAllocs,omitempty"`
	// WarmupCallsByAction are the calls a node made from its start until
	// its pool settled, before the measurement began (node runs): the
	// price of the warm pool, which CallsByAction does not include.
	WarmupCallsByAction map[string]int64 `json:"warmupCallsByAction,omitempty"`
	// ReleaseCallsByAction are the calls (among CallsByAction) from the
	// first pod's release until the pool settled (burst-release).
	ReleaseCallsByAction map[string]int64 `json:"releaseCallsByAction,omitempty"`
	// CallsPerNode is all calls divided by the nodes (peer runs).
	CallsPerNode float64 `json:"callsPerNode,omitempty"`
}

// Series is one plotted line.
type Series struct {
	// Name is e.g. "pods-ready", "idle-ips", "calls:CreateNetworkInterface",
	// "alloc-cdf" (X = latency ms, Y = fraction).
	Name   string    `json:"name"`
	X      []float64 `json:"x"`
	Y      []float64 `json:"y"`
	XLabel string    `json:"xLabel,omitempty"`
	YLabel string    `json:"yLabel,omitempty"`
}

// mutatingActions are the cloud actions that change the world; "mutating
// calls (per pod)" count them.
var mutatingActions = []string{"CreateNetworkInterface", "AttachNetworkInterface", "DetachNetworkInterface",
	"DeleteNetworkInterface", "AssignPrivateIpAddresses", "UnassignPrivateIpAddresses", "AssignIpv6Addresses",
	"UnassignIpv6Addresses"}

// IsMutating reports whether a cloud action changes the world, that is
// whether Metrics.MutatingCalls counts it.
func IsMutating(action string) bool { return slices.Contains(mutatingActions, action) }
