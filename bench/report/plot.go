package report

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/internal/atomicfile"
	"github.com/terway-sim/terway/internal/linechart"
)

// Series names the plots understand (see Series.Name).
const (
	// seriesAllocCDF is a ready-made latency CDF: X latency in ms, Y the
	// fraction of allocations at or below it.
	seriesAllocCDF    = "alloc-cdf"
	seriesPodsReady   = "pods-ready"
	seriesIdleIPs     = "idle-ips"
	seriesThrottled   = "throttled"
	seriesCallsPrefix = "calls:"
)

// PlotsDir is where WriteMarkdown's links point, relative to the Markdown
// file: write the summary into a directory and the plots with
// WritePlots(filepath.Join(thatDir, PlotsDir), rs).
const PlotsDir = "plots"

// plotKind is one kind of chart drawn for every result that has the data.
type plotKind struct {
	id     string // file name suffix
	title  string
	xLabel string
	yLabel string
	// lines are the result's own lines on its chart.
	lines func(r *bench.Result) []line
	// overlay is the one line that stands for r on a comparison chart.
	overlay func(r *bench.Result) (line, bool)
	// latencyX: the X axis is latency, which may span orders of magnitude
	// (log axis) and need not start at 0; time axes do not.
	latencyX bool
}

// plotKinds lists the charts in the order they are written and linked.
var plotKinds = []plotKind{
	{
		id: "latency-cdf", title: "AllocIP latency CDF",
		xLabel: "AllocIP latency (ms, simulated)", yLabel: "fraction of allocations",
		lines: latencyCDFLines, overlay: firstLine(latencyCDFLines), latencyX: true,
	},
	{
		id: "pods-ready", title: "Pods with an IP over time",
		xLabel: "time (s, simulated)", yLabel: "pods with an IP",
		lines: namedLines(seriesPodsReady), overlay: firstLine(namedLines(seriesPodsReady)),
	},
	{
		id: "calls", title: "Cloud calls over time",
		xLabel: "time (s, simulated)", yLabel: "cloud calls",
		lines: callLines, overlay: callsTotalLine,
	},
	{
		id: "idle-ips", title: "Idle IPs over time",
		xLabel: "time (s, simulated)", yLabel: "idle IPs",
		lines: namedLines(seriesIdleIPs), overlay: firstLine(namedLines(seriesIdleIPs)),
	},
	{
		id: "throttled", title: "Throttled calls over time",
		xLabel: "time (s, simulated)", yLabel: "throttled calls",
		lines: namedLines(seriesThrottled), overlay: firstLine(namedLines(seriesThrottled)),
	},
}

// plannedPlot is one SVG file to write.
type plannedPlot struct {
	file  string // base name
	kind  string // plotKind.id
	chart linechart.Chart
	// result is the plotted result, nil for a comparison overlay.
	result *bench.Result
	// scenario is set for a comparison overlay.
	scenario string
}

// WritePlots renders SVG charts of rs into dir (created if needed) and
// returns the paths it wrote, in a stable order. For every result it
// draws, when the result has the series: the AllocIP latency CDF (series
// "alloc-cdf", else computed from every series whose name contains
// "latency", whose Y values are latencies in ms), pods ready over time
// ("pods-ready"), calls over time (one line per "calls:<Action>" series),
// idle IPs ("idle-ips") and throttled calls ("throttled") over time. For
// every Scenario shared by several results it also draws overlays, one
// line per result (the calls overlay sums the actions). Files are named
// <kind>-<name>-<plot>.svg and compare-<scenario>-<plot>.svg; the same
// results always give the same bytes.
func WritePlots(dir string, rs []*bench.Result) ([]string, error) {
	plan, err := planPlots(rs)
	if err != nil {
		return nil, fmt.Errorf("plan plots: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create plot directory: %w", err)
	}
	paths := make([]string, 0, len(plan))
	for _, p := range plan {
		path := filepath.Join(dir, p.file)
		if err := atomicfile.Write(path, p.chart.SVG(), 0o644); err != nil {
			return paths, fmt.Errorf("write plot: %w", err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// planPlots decides every chart for rs and its file name, without
// rendering. WriteMarkdown uses it too, so links match the files.
func planPlots(rs []*bench.Result) ([]plannedPlot, error) {
	if err := validateForPlots(rs); err != nil {
		return nil, err
	}
	var plan []plannedPlot
	for _, r := range sortedResults(rs) {
		plan = append(plan, resultPlots(r)...)
	}
	for _, g := range scenarioGroups(rs) {
		plan = append(plan, overlayPlots(g)...)
	}
	seen := map[string]bool{}
	for _, p := range plan {
		if seen[p.file] {
			return nil, fmt.Errorf("two plots would both be written to %s: make result names (or scenarios) differ in more than punctuation", p.file)
		}
		seen[p.file] = true
	}
	return plan, nil
}

// validateForPlots refuses what would draw a wrong chart rather than
// drawing it: nil results, duplicated Kind/Name, series whose X and Y
// lengths differ.
func validateForPlots(rs []*bench.Result) error {
	ids := map[string]bool{}
	for i, r := range rs {
		if r == nil {
			return fmt.Errorf("result %d is nil", i)
		}
		if ids[resultID(r)] {
			return fmt.Errorf("result %s appears twice", resultID(r))
		}
		ids[resultID(r)] = true
		for _, s := range r.Series {
			if len(s.X) != len(s.Y) {
				return fmt.Errorf("result %s series %q has %d x values but %d y values", resultID(r), s.Name, len(s.X), len(s.Y))
			}
		}
	}
	return nil
}

// resultPlots plans the charts of one result.
func resultPlots(r *bench.Result) []plannedPlot {
	var out []plannedPlot
	for _, k := range plotKinds {
		lines := k.lines(r)
		if len(lines) == 0 {
			continue
		}
		c := linechart.Chart{
			Title:    resultID(r) + ": " + k.title,
			Subtitle: resultSubtitle(r),
			XLabel:   axisLabel(k.xLabel, lines, true),
			YLabel:   axisLabel(k.yLabel, lines, false),
			Lines:    chartLines(lines),
			LogX:     k.latencyX,
		}
		out = append(out, plannedPlot{
			file:   fileSafe(r.Kind) + "-" + fileSafe(r.Name) + "-" + k.id + ".svg",
			kind:   k.id,
			chart:  c,
			result: r,
		})
	}
	return out
}

// overlayPlots plans the comparison charts of one scenario group: a kind
// is drawn when at least two of the results have its data.
func overlayPlots(g scenarioGroup) []plannedPlot {
	var out []plannedPlot
	for _, k := range plotKinds {
		var lines []line
		for _, r := range g.results {
			l, ok := k.overlay(r)
			if !ok {
				continue
			}
			l.Name = g.label(r)
			lines = append(lines, l)
		}
		if len(lines) < 2 {
			continue
		}
		title := k.title
		if k.id == "calls" {
			title = "Cloud calls over time (all actions)"
		}
		out = append(out, plannedPlot{
			file: "compare-" + fileSafe(g.scenario) + "-" + k.id + ".svg",
			kind: k.id,
			chart: linechart.Chart{
				Title:    "Scenario " + g.scenario + ": " + title,
				Subtitle: fmt.Sprintf("%d results compared", len(lines)),
				XLabel:   axisLabel(k.xLabel, lines, true),
				YLabel:   axisLabel(k.yLabel, lines, false),
				Lines:    chartLines(lines),
				LogX:     k.latencyX,
			},
			scenario: g.scenario,
		})
	}
	return out
}

// scenarioGroup is several results of one scenario, compared side by side.
type scenarioGroup struct {
	scenario string
	results  []*bench.Result
}

// label names r inside its group: the Name, qualified by the Kind when
// two kinds share a name.
func (g scenarioGroup) label(r *bench.Result) string {
	for _, o := range g.results {
		if o != r && o.Name == r.Name {
			return resultID(r)
		}
	}
	return r.Name
}

// scenarioGroups returns the scenarios that have several results, sorted
// by scenario, each with its results sorted by Kind/Name.
func scenarioGroups(rs []*bench.Result) []scenarioGroup {
	by := map[string][]*bench.Result{}
	for _, r := range sortedResults(rs) {
		if r.Scenario != "" {
			by[r.Scenario] = append(by[r.Scenario], r)
		}
	}
	var out []scenarioGroup
	for _, s := range sortedKeys(by) {
		if len(by[s]) >= 2 {
			out = append(out, scenarioGroup{scenario: s, results: by[s]})
		}
	}
	return out
}

// sortedResults returns rs sorted by Kind/Name without changing rs.
func sortedResults(rs []*bench.Result) []*bench.Result {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b *bench.Result) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// resultSubtitle says what produced a chart, so a plot read on its own
// is still attributable.
func resultSubtitle(r *bench.Result) string {
	parts := []string{}
	if r.Scenario != "" {
		parts = append(parts, "scenario "+r.Scenario)
	}
	if r.Run.Profile != "" {
		parts = append(parts, "profile "+r.Run.Profile)
	}
	parts = append(parts, fmt.Sprintf("seed %d", r.Run.Seed))
	if r.Run.TimeScale != 0 {
		parts = append(parts, "time scale "+describeScale(r.Run.TimeScale))
	}
	return strings.Join(parts, " · ")
}

// axisLabel uses the label the series carry when they all agree (the
// calls chart's series each name their own action) and the chart's
// default otherwise.
func axisLabel(def string, lines []line, x bool) string {
	label := ""
	for i, l := range lines {
		ll := l.yLabel
		if x {
			ll = l.xLabel
		}
		if i > 0 && ll != label {
			return def
		}
		label = ll
	}
	if label == "" {
		return def
	}
	return label
}

// fileSafe maps a name to lower-case letters, digits, '.', '_' and '-'
// so that it is a portable file name component.
func fileSafe(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if ok {
			b.WriteRune(c)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-.")
	if out == "" {
		return "unnamed"
	}
	return out
}
