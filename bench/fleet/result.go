package fleet

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/terway-sim/terway/bench"
)

// result turns what the fleet measured into a Result. heapGrowth is the
// heap in use after the fleet is up minus before it started.
func (f *fleet) result(heapGrowth, stack uint64, idle int) *bench.Result {
	o := f.o
	calls, throttled := fleetAggregate(f.final)
	m := bench.Metrics{Pods: int(f.total), Nodes: o.Nodes, CallsByAction: calls, IdleIPsEnd: idle}
	var lat []time.Duration
	for _, n := range f.nodes {
		for _, p := range n.pods {
			if p.ip == "" || p.done.After(f.finalAt) { // none by the deadline
				m.PodsFailed++
				continue
			}
			lat = append(lat, f.sim(p.done)-f.sim(p.start))
		}
	}
	slices.Sort(lat)
	var starts []time.Duration // from a daemon's scheduled start until it serves
	for _, n := range f.nodes {
		if !n.readyAt.IsZero() {
			starts = append(starts, n.readyAt.Sub(f.t0.Add(n.offset)))
		}
	}
	slices.Sort(starts)
	for i := range starts {
		starts[i] = time.Duration(float64(starts[i]) / o.TimeScale)
	}
	m.AllocP50Ms, m.AllocP90Ms = fleetMs(fleetQuantile(lat, 0.5)), fleetMs(fleetQuantile(lat, 0.9))
	m.AllocP99Ms, m.AllocMaxMs = fleetMs(fleetQuantile(lat, 0.99)), fleetMs(fleetQuantile(lat, 1))
	m.TimeToAllMs = fleetMs(f.sim(f.finalAt))
	var total int64
	for a, n := range calls {
		total += n
		if bench.IsMutating(a) {
			m.MutatingCalls += n
		}
	}
	for _, n := range throttled {
		m.Throttled += n
	}
	m.CallsPerPod = float64(total) / float64(f.total)
	m.MutatingPerPod = float64(m.MutatingCalls) / float64(f.total)
	lb, fluid, bound := fleetLowerBound(calls, throttled, f.settings, o.ThrottleWindow)
	m.LowerBoundMs = fleetMs(lb)
	if lb > 0 {
		m.RatioToLowerBound = m.TimeToAllMs / m.LowerBoundMs
	}
	const mib = 1 << 20
	m.MemoryPerDaemonMiB = float64(heapGrowth) / mib / float64(o.Nodes)
	peakG, peakF := 0, 0
	for _, s := range f.samples {
		peakG, peakF = max(peakG, s.goroutines), max(peakF, s.files)
	}
	return &bench.Result{
		Schema: bench.SchemaVersion, Kind: "fleet", Name: o.Name, Scenario: "fleet", Command: o.Command,
		Run: bench.RunInfo{Started: f.created.UTC(), Seed: o.Seed, Profile: o.Profile.Name, TimeScale: o.TimeScale,
			Daemon: f.runCfg, Machine: bench.MachineInfo()},
		Params: map[string]any{
			"nodes": o.Nodes, "podsPerNode": o.PodsPerNode, "instanceType": f.itype, "vswitches": f.vsws,
			"startJitterS": o.StartJitter.Seconds(), "throttleWindowS": o.ThrottleWindow.Seconds(),
			"throttle": maps.Clone(f.settings.Throttle), "sampleEveryS": o.SampleEvery.Seconds(), "timeoutS": o.Timeout.Seconds(),
			// The daemon configuration in simulated time (Run.Daemon is
			// the scaled one the daemons ran with).
			"daemonSimulated": f.simCfg,
			// Observed figures Metrics has no field for.
			"observed": map[string]any{
				"lowerBoundAction": bound, "fluidLowerBoundMs": fleetMs(fluid), "throttledByAction": throttled,
				"daemonStartP50Ms": fleetMs(fleetQuantile(starts, 0.5)), "daemonStartMaxMs": fleetMs(fleetQuantile(starts, 1)),
				"allocRetries": f.allocRetries.Load(), "daemonRestarts": f.restart.Load(),
				"stackPerDaemonMiB": float64(stack) / mib / float64(o.Nodes), "peakGoroutines": peakG, "peakOpenFiles": peakF,
			},
		},
		Metrics: m,
		Series:  f.series(),
	}
}

// series are the plots: pods and daemons ready, calls (all, throttled,
// by action), goroutines and open files over simulated time, all
// cumulative except the last two.
func (f *fleet) series() []bench.Series {
	const x = "simulated time (s)"
	mk := func(name, y string, get func(fleetSample) float64) bench.Series {
		s := bench.Series{Name: name, XLabel: x, YLabel: y}
		for _, p := range f.samples {
			s.X = append(s.X, p.at.Seconds())
			s.Y = append(s.Y, get(p))
		}
		return s
	}
	out := []bench.Series{
		mk("pods-ready", "pods with an address", func(s fleetSample) float64 { return float64(s.pods) }),
		mk("daemons-ready", "daemons serving", func(s fleetSample) float64 { return float64(s.daemons) }),
		mk("calls", "API calls (cumulative)", func(s fleetSample) float64 {
			var n int64
			for _, c := range s.calls {
				n += c
			}
			return float64(n)
		}),
		mk("throttled", "throttled calls (cumulative)", func(s fleetSample) float64 { return float64(s.throttled) }),
	}
	actions := map[string]bool{}
	for _, s := range f.samples {
		for a := range s.calls {
			actions[a] = true
		}
	}
	for _, a := range slices.Sorted(maps.Keys(actions)) {
		out = append(out, mk("calls:"+a, a+" calls (cumulative)", func(s fleetSample) float64 { return float64(s.calls[a]) }))
	}
	return append(out,
		mk("goroutines", "goroutines in the process", func(s fleetSample) float64 { return float64(s.goroutines) }),
		mk("open-files", "open files of the process", func(s fleetSample) float64 { return float64(s.files) }))
}

// fleetQuantile is the q-quantile (nearest rank) of sorted durations.
func fleetQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func fleetMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
