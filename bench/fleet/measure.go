package fleet

import (
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/terway-sim/terway/fakecloud"
)

// fleetSample is the fleet's state at one instant.
type fleetSample struct {
	at         time.Duration // simulated, since t0
	pods       int64
	daemons    int64
	calls      map[string]int64 // by action, every outcome
	throttled  int64
	goroutines int
	files      int
}

// sample records the fleet every SampleEvery until stop. Its last sample
// is the fleet at the end of the measurement, with the calls the result
// reports.
func (f *fleet) sample(stop <-chan struct{}) {
	t := time.NewTicker(max(f.scale(f.o.SampleEvery), time.Millisecond))
	defer t.Stop()
	f.samples = append(f.samples, f.snapshot(time.Now(), f.fc.Calls()))
	for {
		select {
		case <-stop:
			end := f.sim(f.finalAt)
			for len(f.samples) > 0 && f.samples[len(f.samples)-1].at > end {
				f.samples = f.samples[:len(f.samples)-1]
			}
			f.samples = append(f.samples, f.snapshot(f.finalAt, f.final))
			return
		case now := <-t.C:
			f.samples = append(f.samples, f.snapshot(now, f.fc.Calls()))
		}
	}
}

func (f *fleet) snapshot(at time.Time, stats []fakecloud.CallStat) fleetSample {
	calls, throttled := fleetAggregate(stats)
	var th int64
	for _, n := range throttled {
		th += n
	}
	return fleetSample{at: f.sim(at), pods: f.podsReady.Load(), daemons: f.daemonsUp.Load(),
		calls: calls, throttled: th, goroutines: runtime.NumGoroutine(), files: fleetOpenFiles()}
}

// fleetAggregate sums call counters by action: all calls, and those the
// cloud refused for flow control (Throttling*).
func fleetAggregate(stats []fakecloud.CallStat) (calls, throttled map[string]int64) {
	calls, throttled = map[string]int64{}, map[string]int64{}
	for _, s := range stats {
		calls[s.Action] += s.Count
		if strings.HasPrefix(s.Outcome, "Throttling") {
			throttled[s.Action] += s.Count
		}
	}
	return calls, throttled
}

// fleetLowerBound is the shortest time the API budgets allow for the
// calls a run made, under fakecloud's (and ECS's) throttling: a budget of
// B calls per fixed window of length W, windows aligned to the clock, a
// call over budget refused at once, and the run starting at the start of
// a window (newFleet aligns fakecloud's clock so that it does). A call the
// cloud admitted (every call not refused with Throttling*) used one unit
// of its window's budget, so the N-th admitted call of an action falls in
// window ⌈N/B⌉−1 or later: the run needs at least (⌈N/B⌉−1) × W. The bound
// is the largest of these over the actions with a budget (0 = unlimited
// has none), and bound names that action; it is 0 when no action needed
// more than one window's budget. Throttled calls cost no budget and are
// not counted.
//
// fluid is the formula, N ÷ B × W, the long-run rate bound. With
// fixed windows it is not a lower bound for a single burst: a fleet that
// needs 1.7 windows' worth of calls gets a full budget at once and the
// rest one window later, at 1 W, not 1.7 W (or in an instant, if the burst
// straddles a window boundary). The two agree within one window when N ≫ B.
func fleetLowerBound(calls, throttled map[string]int64, s fakecloud.Settings, window time.Duration) (lb, fluid time.Duration, bound string) {
	for _, a := range slices.Sorted(maps.Keys(calls)) {
		b := s.Throttle["*"]
		if v, ok := s.Throttle[a]; ok {
			b = v
		}
		n := calls[a] - throttled[a]
		if b <= 0 || n <= 0 {
			continue
		}
		fluid = max(fluid, time.Duration(float64(n)/float64(b)*float64(window)))
		if d := time.Duration((n+int64(b)-1)/int64(b)-1) * window; d > lb {
			lb, bound = d, a
		}
	}
	return lb, fluid, bound
}

// idleAddresses counts the addresses the fleet's nodes hold in the cloud
// (secondary ENIs' primary and secondary IPv4) that no pod uses.
func (f *fleet) idleAddresses() int {
	ours := map[string]bool{}
	for _, n := range f.nodes {
		ours[n.id] = true
	}
	held := 0
	for _, e := range f.fc.ENIs() {
		if ours[e.InstanceID] && e.Type != fakecloud.ENITypePrimary {
			held += 1 + len(e.IPv4)
		}
	}
	return held - int(f.podsReady.Load())
}
