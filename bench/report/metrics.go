package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/terway-sim/terway/bench"
)

// metricDef describes one figure of Metrics for the Markdown tables: how
// to read it, print it, and whether it means anything for a given result.
type metricDef struct {
	label string
	get   func(*bench.Result) float64
	fmt   func(float64) string
	// applies reports whether the figure is meaningful for r; a metric
	// that is always meaningful (pods, failures, calls) has applies nil.
	applies func(*bench.Result) bool
	// timing marks figures that depend on the speed of the machine.
	timing bool
}

// metricDefs lists the figures in the order the reports show them.
var metricDefs = []metricDef{
	{label: "pods", get: func(r *bench.Result) float64 { return float64(r.Metrics.Pods) }, fmt: fmtCount},
	{label: "nodes", get: func(r *bench.Result) float64 { return float64(r.Metrics.Nodes) }, fmt: fmtCount, applies: nonZero(func(m *bench.Metrics) float64 { return float64(m.Nodes) })},
	{label: "pods failed", get: func(r *bench.Result) float64 { return float64(r.Metrics.PodsFailed) }, fmt: fmtCount},
	{label: "failed AllocIP attempts (retried)", get: func(r *bench.Result) float64 { return float64(r.Metrics.FailedAllocs) }, fmt: fmtCount, applies: nonZero(func(m *bench.Metrics) float64 { return float64(m.FailedAllocs) }), timing: true},
	{label: "AllocIP p50", get: func(r *bench.Result) float64 { return r.Metrics.AllocP50Ms }, fmt: fmtMs, applies: hasAllocLatency, timing: true},
	{label: "AllocIP p90", get: func(r *bench.Result) float64 { return r.Metrics.AllocP90Ms }, fmt: fmtMs, applies: hasAllocLatency, timing: true},
	{label: "AllocIP p99", get: func(r *bench.Result) float64 { return r.Metrics.AllocP99Ms }, fmt: fmtMs, applies: hasAllocLatency, timing: true},
	{label: "AllocIP max", get: func(r *bench.Result) float64 { return r.Metrics.AllocMaxMs }, fmt: fmtMs, applies: hasAllocLatency, timing: true},
	{label: "time to all pods", get: func(r *bench.Result) float64 { return r.Metrics.TimeToAllMs }, fmt: fmtMs, applies: nonZero(func(m *bench.Metrics) float64 { return m.TimeToAllMs }), timing: true},
	{label: "cloud calls", get: func(r *bench.Result) float64 { return float64(totalCalls(&r.Metrics)) }, fmt: fmtCount},
	{label: "calls per pod", get: func(r *bench.Result) float64 { return r.Metrics.CallsPerPod }, fmt: fmtPerPod, applies: hasPods},
	{label: "calls per node", get: func(r *bench.Result) float64 { return r.Metrics.CallsPerNode }, fmt: fmtPerPod, applies: nonZero(func(m *bench.Metrics) float64 { return m.CallsPerNode })},
	{label: "mutating calls", get: func(r *bench.Result) float64 { return float64(r.Metrics.MutatingCalls) }, fmt: fmtCount},
	{label: "mutating per pod", get: func(r *bench.Result) float64 { return r.Metrics.MutatingPerPod }, fmt: fmtPerPod, applies: hasPods},
	{label: "warm-up calls", get: func(r *bench.Result) float64 { return float64(sumCalls(r.Metrics.WarmupCallsByAction)) }, fmt: fmtCount, applies: hasWarmup},
	{label: "calls to shrink back", get: func(r *bench.Result) float64 { return float64(sumCalls(r.Metrics.ReleaseCallsByAction)) }, fmt: fmtCount, applies: hasRelease},
	{label: "mutating calls to shrink back", get: func(r *bench.Result) float64 { return float64(releaseMutating(&r.Metrics)) }, fmt: fmtCount, applies: hasRelease},
	{label: "throttled calls", get: func(r *bench.Result) float64 { return float64(r.Metrics.Throttled) }, fmt: fmtCount},
	{label: "idle IPs (average)", get: func(r *bench.Result) float64 { return r.Metrics.IdleIPsAvg }, fmt: fmtPerPod, applies: hasIdleIPs, timing: true},
	{label: "idle IPs (end)", get: func(r *bench.Result) float64 { return float64(r.Metrics.IdleIPsEnd) }, fmt: fmtCount, applies: hasIdleIPs},
	{label: "lower bound", get: func(r *bench.Result) float64 { return r.Metrics.LowerBoundMs }, fmt: fmtMs, applies: hasLowerBound},
	// The peer reproduction leaves the ratio unset on purpose: its bound
	// is a client limiter's, and the ratio would measure this machine.
	{label: "ratio to lower bound", get: func(r *bench.Result) float64 { return r.Metrics.RatioToLowerBound }, fmt: fmtRatio, applies: nonZero(func(m *bench.Metrics) float64 { return m.RatioToLowerBound })},
	{label: "memory per daemon", get: func(r *bench.Result) float64 { return r.Metrics.MemoryPerDaemonMiB }, fmt: fmtMiB, applies: nonZero(func(m *bench.Metrics) float64 { return m.MemoryPerDaemonMiB }), timing: true},
	{label: "wall time", get: func(r *bench.Result) float64 { return r.Metrics.WallSeconds }, fmt: fmtSeconds, timing: true},
}

// appliesToAny reports whether d is meaningful for at least one of rs.
func (d metricDef) appliesToAny(rs []*bench.Result) bool {
	if d.applies == nil {
		return true
	}
	return slices.ContainsFunc(rs, d.applies)
}

// nonZero makes an applies function for a figure that is absent when 0.
func nonZero(get func(*bench.Metrics) float64) func(*bench.Result) bool {
	return func(r *bench.Result) bool { return get(&r.Metrics) != 0 }
}

// hasRelease: the run measured the calls of a release phase
// (burst-release).
func hasRelease(r *bench.Result) bool { return r.Metrics.ReleaseCallsByAction != nil }

// releaseMutating counts the mutating calls of the release phase.
func releaseMutating(m *bench.Metrics) int64 {
	var n int64
	for a, c := range m.ReleaseCallsByAction {
		if bench.IsMutating(a) {
			n += c
		}
	}
	return n
}

func hasAllocLatency(r *bench.Result) bool {
	m := &r.Metrics
	return m.AllocP50Ms != 0 || m.AllocP90Ms != 0 || m.AllocP99Ms != 0 || m.AllocMaxMs != 0
}

func hasIdleIPs(r *bench.Result) bool {
	return r.Metrics.IdleIPsAvg != 0 || r.Metrics.IdleIPsEnd != 0 || findSeries(r, seriesIdleIPs) != nil
}

// hasPods reports whether r started pods (the peer reproduction counts
// nodes, not pods).
func hasPods(r *bench.Result) bool { return r.Metrics.Pods > 0 }

func hasLowerBound(r *bench.Result) bool {
	return r.Metrics.LowerBoundMs != 0 || r.Metrics.RatioToLowerBound != 0
}

// hasWarmup reports whether r counted the calls of its pool's warm-up.
func hasWarmup(r *bench.Result) bool { return len(r.Metrics.WarmupCallsByAction) > 0 }

// totalCalls is the sum of the measured calls of every action.
func totalCalls(m *bench.Metrics) int64 { return sumCalls(m.CallsByAction) }

// sumCalls adds up calls by action.
func sumCalls(byAction map[string]int64) int64 {
	var n int64
	for _, c := range byAction {
		n += c
	}
	return n
}

// actionsOf returns the cloud actions any of rs called, sorted.
func actionsOf(rs []*bench.Result) []string {
	return actionsIn(rs, func(m *bench.Metrics) map[string]int64 { return m.CallsByAction })
}

// warmupActionsOf returns the actions any of rs called while warming up.
func warmupActionsOf(rs []*bench.Result) []string {
	return actionsIn(rs, func(m *bench.Metrics) map[string]int64 { return m.WarmupCallsByAction })
}

// actionsIn returns the keys of the maps get gives for rs, sorted.
func actionsIn(rs []*bench.Result, get func(*bench.Metrics) map[string]int64) []string {
	set := map[string]bool{}
	for _, r := range rs {
		for a := range get(&r.Metrics) {
			set[a] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// resultID names a result the way the gate matches it: Kind/Name.
func resultID(r *bench.Result) string { return r.Kind + "/" + r.Name }

func fmtCount(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func fmtPerPod(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func fmtRatio(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" }

func fmtMiB(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " MiB" }

func fmtSeconds(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " s" }

// fmtMs prints a simulated duration in the unit a person reads best.
func fmtMs(v float64) string {
	switch a := math.Abs(v); {
	case a >= 60_000:
		return strconv.FormatFloat(v/60_000, 'f', 2, 64) + " min"
	case a >= 1_000:
		return strconv.FormatFloat(v/1_000, 'f', 2, 64) + " s"
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
	default:
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	}
}

// fmtValue prints a parameter or configuration value compactly and
// deterministically (JSON sorts map keys).
func fmtValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "—"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// describeScale prints fakecloud's time scale, the factor applied to
// every cloud delay ("×0.1" runs ten times faster than the real cloud).
func describeScale(s float64) string {
	switch s {
	case 0:
		return "—"
	case 1:
		return "×1 (real time)"
	}
	return "×" + strconv.FormatFloat(s, 'f', -1, 64)
}
