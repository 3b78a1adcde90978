package report

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/internal/linechart"
)

// line is one series to draw, with the axis labels its data carries
// (see axisLabel).
type line struct {
	linechart.Line
	xLabel, yLabel string
}

// chartLines are the lines as the chart draws them.
func chartLines(ls []line) []linechart.Line {
	out := make([]linechart.Line, len(ls))
	for i, l := range ls {
		out[i] = l.Line
	}
	return out
}

// findSeries returns r's series called name, or nil.
func findSeries(r *bench.Result, name string) *bench.Series {
	for i := range r.Series {
		if r.Series[i].Name == name {
			return &r.Series[i]
		}
	}
	return nil
}

// fromSeries makes a line of a series, named name.
func fromSeries(s *bench.Series, name string) line {
	return line{Line: linechart.Line{Name: name, X: s.X, Y: s.Y}, xLabel: s.XLabel, yLabel: s.YLabel}
}

// namedLines draws the series called name, if r has it with data.
func namedLines(name string) func(*bench.Result) []line {
	return func(r *bench.Result) []line {
		s := findSeries(r, name)
		if s == nil || len(s.X) == 0 {
			return nil
		}
		return []line{fromSeries(s, name)}
	}
}

// firstLine turns a lines function into an overlay function.
func firstLine(f func(*bench.Result) []line) func(*bench.Result) (line, bool) {
	return func(r *bench.Result) (line, bool) {
		ls := f(r)
		if len(ls) == 0 {
			return line{}, false
		}
		return ls[0], true
	}
}

// latencyCDFLines uses "alloc-cdf" when present, else computes a CDF
// from each latency series.
func latencyCDFLines(r *bench.Result) []line {
	if s := findSeries(r, seriesAllocCDF); s != nil && len(s.X) > 0 {
		return []line{fromSeries(s, "AllocIP")}
	}
	var out []line
	for i := range r.Series {
		s := &r.Series[i]
		if !strings.Contains(strings.ToLower(s.Name), "latency") {
			continue
		}
		x, y := cdfOf(s.Y)
		if len(x) == 0 {
			continue
		}
		out = append(out, line{Line: linechart.Line{Name: s.Name, X: x, Y: y}})
	}
	return out
}

// callLines draws one line per "calls:<Action>" series, named by action,
// in action order.
func callLines(r *bench.Result) []line {
	var out []line
	for i := range r.Series {
		s := &r.Series[i]
		action, ok := strings.CutPrefix(s.Name, seriesCallsPrefix)
		if !ok || len(s.X) == 0 {
			continue
		}
		out = append(out, fromSeries(s, action))
	}
	slices.SortStableFunc(out, func(a, b line) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// callsTotalLine sums r's per-action call series into one line for the
// comparison chart.
func callsTotalLine(r *bench.Result) (line, bool) {
	ls := callLines(r)
	if len(ls) == 0 {
		return line{}, false
	}
	x, y := sumSteps(ls)
	return line{Line: linechart.Line{Name: "all actions", X: x, Y: y}}, true
}

// cdfOf returns the empirical CDF of the finite samples as a step line.
func cdfOf(samples []float64) (x, y []float64) {
	v := make([]float64, 0, len(samples))
	for _, s := range samples {
		if !math.IsNaN(s) && !math.IsInf(s, 0) {
			v = append(v, s)
		}
	}
	if len(v) == 0 {
		return nil, nil
	}
	slices.Sort(v)
	n := float64(len(v))
	prev := 0.0
	for i, s := range v {
		// Equal samples form one vertical step.
		if i+1 < len(v) && v[i+1] == s {
			continue
		}
		frac := float64(i+1) / n
		x = append(x, s, s)
		y = append(y, prev, frac)
		prev = frac
	}
	return x, y
}

// sumSteps adds lines read as step functions (a value holds until the
// next point; 0 before the first) at the union of their X values.
func sumSteps(ls []line) (x, y []float64) {
	for _, l := range ls {
		x = append(x, l.X...)
	}
	slices.Sort(x)
	x = slices.Compact(x)
	y = make([]float64, len(x))
	for _, l := range ls {
		idx := make([]int, len(l.X))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(l.X[a], l.X[b]) })
		j := -1
		for i, t := range x {
			for j+1 < len(idx) && l.X[idx[j+1]] <= t {
				j++
			}
			if j >= 0 {
				y[i] += l.Y[idx[j]]
			}
		}
	}
	return x, y
}
