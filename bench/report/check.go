package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/terway-sim/terway/bench"
)

// CheckReport is the outcome of the regression gate: every compared
// figure, the timing figures side by side, and which results were missing
// or extra.
type CheckReport struct {
	// Tolerance is the relative change allowed on gated figures (0.10 is
	// 10 %).
	Tolerance float64
	// Figures are the machine-independent figures, compared against the
	// tolerance; failures are never tolerated.
	Figures []CheckFigure
	// Timings are the machine-dependent figures, reported as
	// current/baseline ratios and never failing.
	Timings []CheckFigure
	// Missing are baseline results (Kind/Name) absent from current: a
	// failure, since a configuration the gate covers stopped running.
	Missing []string
	// Extra are current results without a baseline: noted, not failed.
	Extra []string
	// Notes are differences that make a comparison questionable without
	// failing it, e.g. a different seed or parameters.
	Notes []string
}

// CheckFigure is one figure of one result in both runs.
type CheckFigure struct {
	Result   string // Kind/Name
	Figure   string
	Baseline float64
	Current  float64
	// Failed is set on gated figures outside the tolerance (and on any
	// failed pod); Reason says why.
	Failed bool
	Reason string
}

// Ratio is Current/Baseline, NaN when the baseline is 0 (no ratio).
func (f CheckFigure) Ratio() float64 {
	if f.Baseline == 0 {
		return math.NaN()
	}
	return f.Current / f.Baseline
}

// Failed reports whether the gate failed: a gated figure moved more than
// the tolerance, a pod failed, or a baseline result did not run.
func (c *CheckReport) Failed() bool {
	if len(c.Missing) > 0 {
		return true
	}
	return slices.ContainsFunc(c.Figures, func(f CheckFigure) bool { return f.Failed })
}

// gatedFigure is one machine-independent figure the gate compares.
type gatedFigure struct {
	name string
	get  func(*bench.Metrics) float64
	// always compares the figure even when both runs report 0; others
	// are left out when they do not apply to either run.
	always bool
}

// gatedFigures are compared with the tolerance. Call counts are the same
// for the same seed whatever the machine, so they pass exactly then;
// throttling and the ratio to the lower bound are what the budgets allow,
// not how fast this machine is.
var gatedFigures = []gatedFigure{
	{name: "calls per pod", get: func(m *bench.Metrics) float64 { return m.CallsPerPod }, always: true},
	{name: "mutating per pod", get: func(m *bench.Metrics) float64 { return m.MutatingPerPod }, always: true},
	{name: "calls per node", get: func(m *bench.Metrics) float64 { return m.CallsPerNode }},
	{name: "throttled calls", get: func(m *bench.Metrics) float64 { return float64(m.Throttled) }, always: true},
	{name: "mutating calls to shrink back", get: func(m *bench.Metrics) float64 { return float64(releaseMutating(m)) }},
	{name: "ratio to lower bound", get: func(m *bench.Metrics) float64 { return m.RatioToLowerBound }},
}

// timingFigures depend on the machine's speed or on timing; the gate
// only reports them.
var timingFigures = []gatedFigure{
	{name: "time to all pods (ms)", get: func(m *bench.Metrics) float64 { return m.TimeToAllMs }},
	{name: "AllocIP p99 (ms)", get: func(m *bench.Metrics) float64 { return m.AllocP99Ms }},
	{name: "wall time (s)", get: func(m *bench.Metrics) float64 { return m.WallSeconds }},
	// Retries depend on when a retry lands relative to the recovery.
	{name: "failed AllocIP attempts", get: func(m *bench.Metrics) float64 { return float64(m.FailedAllocs) }},
}

// Check compares current results against the baseline, matching them by
// Kind and Name. Gated figures (calls per pod and per node, mutating
// calls per pod, calls of every action, measured and during warm-up,
// throttled calls, ratio to the lower bound) fail
// when they change by more than tolerance relative to the baseline, in
// either direction: a drop in calls also means the behaviour changed and
// the baseline must be regenerated on purpose. A figure that was 0 fails
// on any change. Failed pods fail whatever the tolerance. Timing figures
// are listed as ratios and never fail. An error means the inputs cannot
// be compared (nil or duplicated results, a bad tolerance).
func Check(baseline, current []*bench.Result, tolerance float64) (*CheckReport, error) {
	if math.IsNaN(tolerance) || math.IsInf(tolerance, 0) || tolerance < 0 {
		return nil, fmt.Errorf("check: tolerance %v is not a finite non-negative fraction", tolerance)
	}
	base, err := indexResults("baseline", baseline)
	if err != nil {
		return nil, err
	}
	cur, err := indexResults("current", current)
	if err != nil {
		return nil, err
	}
	rep := &CheckReport{Tolerance: tolerance}
	for _, b := range sortedResults(baseline) {
		id := resultID(b)
		c, ok := cur[id]
		if !ok {
			rep.Missing = append(rep.Missing, id)
			continue
		}
		rep.compare(b, c)
	}
	for _, c := range sortedResults(current) {
		if _, ok := base[resultID(c)]; !ok {
			rep.Extra = append(rep.Extra, resultID(c))
		}
	}
	return rep, nil
}

// indexResults maps results by Kind/Name, refusing ambiguity.
func indexResults(which string, rs []*bench.Result) (map[string]*bench.Result, error) {
	m := make(map[string]*bench.Result, len(rs))
	for i, r := range rs {
		if r == nil {
			return nil, fmt.Errorf("check: %s result %d is nil", which, i)
		}
		id := resultID(r)
		if _, dup := m[id]; dup {
			return nil, fmt.Errorf("check: %s has result %s twice; cannot tell which to compare", which, id)
		}
		m[id] = r
	}
	return m, nil
}

// compare adds the figures of one matched pair of results.
func (c *CheckReport) compare(b, cur *bench.Result) {
	id := resultID(b)
	c.Notes = append(c.Notes, settingNotes(b, cur)...)
	// Failed pods are judged on the current run alone: a baseline that
	// had failures does not excuse them.
	pf := CheckFigure{Result: id, Figure: "pods failed", Baseline: float64(b.Metrics.PodsFailed), Current: float64(cur.Metrics.PodsFailed)}
	if cur.Metrics.PodsFailed != 0 {
		pf.Failed, pf.Reason = true, "pods failed: must be 0"
	}
	c.Figures = append(c.Figures, pf)
	for _, g := range gatedFigures {
		bv, cv := g.get(&b.Metrics), g.get(&cur.Metrics)
		if g.always || bv != 0 || cv != 0 {
			c.Figures = append(c.Figures, c.gate(id, g.name, bv, cv))
		}
	}
	for _, a := range actionsOf([]*bench.Result{b, cur}) {
		bv, cv := float64(b.Metrics.CallsByAction[a]), float64(cur.Metrics.CallsByAction[a])
		c.Figures = append(c.Figures, c.gate(id, "calls: "+a, bv, cv))
	}
	for _, a := range warmupActionsOf([]*bench.Result{b, cur}) {
		bv, cv := float64(b.Metrics.WarmupCallsByAction[a]), float64(cur.Metrics.WarmupCallsByAction[a])
		c.Figures = append(c.Figures, c.gate(id, "warm-up calls: "+a, bv, cv))
	}
	for _, t := range timingFigures {
		bv, cv := t.get(&b.Metrics), t.get(&cur.Metrics)
		if bv != 0 || cv != 0 {
			c.Timings = append(c.Timings, CheckFigure{Result: id, Figure: t.name, Baseline: bv, Current: cv})
		}
	}
}

// gate compares one figure against the tolerance.
func (c *CheckReport) gate(id, name string, bv, cv float64) CheckFigure {
	f := CheckFigure{Result: id, Figure: name, Baseline: bv, Current: cv}
	switch {
	case bv == cv:
	case bv == 0:
		f.Failed, f.Reason = true, "baseline was 0"
	default:
		if change := math.Abs(cv-bv) / math.Abs(bv); change > c.Tolerance {
			f.Failed = true
			f.Reason = fmt.Sprintf("changed %s, beyond %s", fmtChange(bv, cv), fmtPercent(c.Tolerance))
		}
	}
	return f
}

// settingNotes lists what differs in how the two runs were configured:
// figures of runs with another seed or parameters are not expected to
// match, which the reader of a failed gate should know.
func settingNotes(b, cur *bench.Result) []string {
	var notes []string
	rows := differingSettings([]*bench.Result{b, cur})
	for _, r := range rows {
		if r.label == "time scale" {
			continue // changes timings, which are only reported
		}
		notes = append(notes, fmt.Sprintf("%s: %s differs (baseline %s, current %s)", resultID(b), r.label, r.values[0], r.values[1]))
	}
	return notes
}

// WriteTo writes the report as aligned tables: the verdict, the gated
// figures, the timing ratios, then missing and extra results and notes.
func (c *CheckReport) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	verdict := "PASS"
	if c.Failed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(cw, "bench check: %s (tolerance %s on machine-independent figures)\n\n", verdict, fmtPercent(c.Tolerance))
	if len(c.Figures) > 0 {
		tw := tabwriter.NewWriter(cw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RESULT\tFIGURE\tBASELINE\tCURRENT\tCHANGE\tSTATUS")
		for _, f := range c.Figures {
			status := "ok"
			if f.Failed {
				status = "FAIL: " + f.Reason
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Result, f.Figure, fmtFigure(f.Baseline), fmtFigure(f.Current), fmtChange(f.Baseline, f.Current), status)
		}
		_ = tw.Flush() // errors surface through cw
		fmt.Fprintln(cw)
	}
	if len(c.Timings) > 0 {
		fmt.Fprintln(cw, "Timing figures (depend on the machine's speed; reported, never failed):")
		tw := tabwriter.NewWriter(cw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RESULT\tFIGURE\tBASELINE\tCURRENT\tCURRENT/BASELINE")
		for _, f := range c.Timings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Result, f.Figure, fmtFigure(f.Baseline), fmtFigure(f.Current), fmtCheckRatio(f.Ratio()))
		}
		_ = tw.Flush()
		fmt.Fprintln(cw)
	}
	for _, id := range c.Missing {
		fmt.Fprintf(cw, "FAIL: %s is in the baseline but did not run\n", id)
	}
	for _, id := range c.Extra {
		fmt.Fprintf(cw, "note: %s has no baseline (not compared)\n", id)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(cw, "note: %s\n", n)
	}
	return cw.n, cw.err
}

// countingWriter counts bytes for WriteTo and keeps the first error, so
// the report code need not check every write.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		c.err = fmt.Errorf("write check report: %w", err)
	}
	return n, c.err
}

// fmtFigure prints a compared value compactly.
func fmtFigure(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// fmtChange prints the relative change from b to c.
func fmtChange(b, c float64) string {
	switch {
	case b == c:
		return "0%"
	case b == 0:
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", (c-b)/math.Abs(b)*100)
}

func fmtPercent(f float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(f*100, 'f', 1, 64), ".0") + "%"
}

func fmtCheckRatio(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "×"
}
