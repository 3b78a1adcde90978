package report

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/terway-sim/terway/internal/linechart"
	"github.com/terway-sim/terway/lab/chaos/timeline"
)

// TimelineSVG draws the run's timeline as four panels over the same time
// axis, each with the faults as shaded bands behind its lines: workload
// pods Ready (and all pods), cloud calls per second by outcome (and in
// all), throttled calls per second, and daemon restarts so far (in all
// and per node). A sample whose source could not be read is left out of
// the lines it feeds. It returns nil when the run has no timeline.
func TimelineSVG(r *Run) []byte {
	tl := r.Timeline
	if tl == nil {
		return nil
	}
	x := make([]float64, len(tl.Samples))
	for i, s := range tl.Samples {
		x[i] = s.At.D().Seconds()
	}
	bands := make([]linechart.Band, len(tl.Bands))
	for i, b := range tl.Bands {
		bands[i] = linechart.Band{Name: b.Label(), From: tl.Offset(b.Start).Seconds(), To: tl.Offset(b.End).Seconds()}
	}
	subtitle := fmt.Sprintf("plan %s · seed %d · %s · verdict %s", r.Plan, r.Seed, tl.Start.Format("2006-01-02 15:04:05 MST"), r.Verdict())
	panel := func(title, yLabel string, lines []linechart.Line) linechart.Chart {
		return linechart.Chart{Title: title, Subtitle: subtitle, XLabel: "time since the run started (s)", YLabel: yLabel, Lines: lines, Bands: bands}
	}
	return linechart.Stack(fmt.Sprintf("Chaos run %s, seed %d", r.Plan, r.Seed), []linechart.Chart{
		panel("Workload pods", "pods", podLines(tl, x)),
		panel("Cloud calls by outcome", "calls per second", callLines(tl, x)),
		panel("Throttled cloud calls", "calls per second", []linechart.Line{
			sampleLine("throttled", tl, x, timeline.SourceCalls, func(s *timeline.Sample) float64 { return s.Rate(s.Throttled) }),
		}),
		panel("Daemon restarts", "restarts so far", restartLines(tl, x)),
	})
}

// sampleLine is one value of every sample, NaN (left out by the chart)
// where src could not be read.
func sampleLine(name string, tl *timeline.Timeline, x []float64, src string, value func(*timeline.Sample) float64) linechart.Line {
	l := linechart.Line{Name: name, X: x, Y: make([]float64, len(x))}
	for i := range tl.Samples {
		s := &tl.Samples[i]
		if _, failed := s.Errors[src]; failed {
			l.Y[i] = math.NaN()
		} else {
			l.Y[i] = value(s)
		}
	}
	return l
}

func podLines(tl *timeline.Timeline, x []float64) []linechart.Line {
	return []linechart.Line{
		sampleLine("Ready", tl, x, timeline.SourcePods, func(s *timeline.Sample) float64 { return float64(s.PodsReady) }),
		sampleLine("pods (not terminating)", tl, x, timeline.SourcePods, func(s *timeline.Sample) float64 { return float64(s.Pods) }),
	}
}

// callLines is the calls per second in all, then per outcome
// (successes first).
func callLines(tl *timeline.Timeline, x []float64) []linechart.Line {
	lines := []linechart.Line{sampleLine("all calls", tl, x, timeline.SourceCalls, func(s *timeline.Sample) float64 {
		var n int64
		for _, c := range s.Calls {
			n += c
		}
		return s.Rate(n)
	})}
	for _, o := range tl.Outcomes() {
		lines = append(lines, sampleLine(o, tl, x, timeline.SourceCalls, func(s *timeline.Sample) float64 { return s.Rate(s.Calls[o]) }))
	}
	return lines
}

// restartLines is the restarts seen up to each sample, in all and per
// node.
func restartLines(tl *timeline.Timeline, x []float64) []linechart.Line {
	nodes := map[string]bool{}
	for _, rs := range tl.Restarts {
		nodes[rs.Node] = true
	}
	upTo := func(node string) func(*timeline.Sample) float64 {
		return func(s *timeline.Sample) float64 {
			n := 0
			for _, rs := range tl.Restarts {
				if rs.At <= s.At && (node == "" || rs.Node == node) {
					n += rs.Count
				}
			}
			return float64(n)
		}
	}
	lines := []linechart.Line{sampleLine("all nodes", tl, x, "", upTo(""))}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		lines = append(lines, sampleLine(n, tl, x, "", upTo(n)))
	}
	return lines
}
