package report

import (
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/internal/markdown"
)

// WriteMarkdown writes a summary of rs for people: an index of all
// results, a side-by-side table (and overlay plots) for every scenario
// several results share, then per result the command that made it, how
// it ran (profile, seed, time scale, machine), its metrics, its calls by
// action and links to its plots. Plot links point into PlotsDir next to
// the Markdown file, with the names WritePlots gives them.
func WriteMarkdown(w io.Writer, rs []*bench.Result) error {
	plan, err := planPlots(rs)
	if err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	sorted := sortedResults(rs)
	var b strings.Builder
	writeIndex(&b, sorted)
	if groups := scenarioGroups(sorted); len(groups) > 0 {
		b.WriteString("## Comparisons\n\n")
		for _, g := range groups {
			writeComparison(&b, g, plan)
		}
	}
	if len(sorted) > 0 {
		b.WriteString("## Results\n\n")
	}
	for _, r := range sorted {
		writeResult(&b, r, plan)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	return nil
}

// writeIndex writes the heading, how to read the figures, and one line
// per result.
func writeIndex(b *strings.Builder, rs []*bench.Result) {
	b.WriteString("# Allocation benchmark results\n\n")
	fmt.Fprintf(b, "%d result(s). Durations are simulated time: what the real cloud would have taken, "+
		"whatever time scale the run used. Figures marked † depend on the speed of the machine that ran them; "+
		"the regression gate compares only the others (calls, throttling, ratio to the lower bound, failures) "+
		"and reports † figures as ratios.\n\n", len(rs))
	if len(rs) == 0 {
		return
	}
	b.WriteString("| Result | Scenario | Pods | Failed | Time to all † | AllocIP p99 † | Calls per pod | Mutating per pod | Throttled |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		m := &r.Metrics
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %s | %s | %s | %d |\n",
			markdown.Text(resultID(r)), markdown.Text(r.Scenario), m.Pods, m.PodsFailed,
			optional(m.TimeToAllMs, fmtMs), optional(m.AllocP99Ms, fmtMs),
			fmtPerPod(m.CallsPerPod), fmtPerPod(m.MutatingPerPod), m.Throttled)
	}
	b.WriteString("\n")
}

// optional prints v, or a dash when the figure was not measured.
func optional(v float64, f func(float64) string) string {
	if v == 0 {
		return "—"
	}
	return f(v)
}

// writeComparison writes one scenario's results side by side: first the
// settings that differ between them, then every figure that applies to
// any of them, then calls by action, then the overlay plots.
func writeComparison(b *strings.Builder, g scenarioGroup, plan []plannedPlot) {
	fmt.Fprintf(b, "### Scenario %s\n\n", markdown.Code(g.scenario))
	b.WriteString("| |")
	for _, r := range g.results {
		b.WriteString(" " + markdown.Text(g.label(r)) + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(g.results)) + "\n")
	for _, row := range differingSettings(g.results) {
		writeRow(b, "**"+markdown.Text(row.label)+"**", row.values)
	}
	for _, d := range metricDefs {
		if !d.appliesToAny(g.results) {
			continue
		}
		vals := make([]string, len(g.results))
		for i, r := range g.results {
			vals[i] = d.fmt(d.get(r))
		}
		writeRow(b, markdown.Text(d.label+dagger(d.timing)), vals)
	}
	for _, a := range actionsOf(g.results) {
		vals := make([]string, len(g.results))
		for i, r := range g.results {
			vals[i] = fmtCount(float64(r.Metrics.CallsByAction[a]))
		}
		writeRow(b, "calls: "+markdown.Text(a), vals)
	}
	for _, a := range warmupActionsOf(g.results) {
		vals := make([]string, len(g.results))
		for i, r := range g.results {
			vals[i] = fmtCount(float64(r.Metrics.WarmupCallsByAction[a]))
		}
		writeRow(b, "warm-up calls: "+markdown.Text(a), vals)
	}
	b.WriteString("\n")
	for _, p := range plan {
		if p.scenario == g.scenario && p.result == nil {
			fmt.Fprintf(b, "![%s](%s)\n\n", markdown.Text(p.chart.Title), plotLink(p.file))
		}
	}
}

// settingRow is one parameter whose value differs between compared results.
type settingRow struct {
	label  string
	values []string
}

// differingSettings lists the run settings (seed, profile, time scale,
// parameters, daemon configuration) whose values differ between rs:
// that is what the comparison is about, e.g. the pool sizes.
func differingSettings(rs []*bench.Result) []settingRow {
	var rows []settingRow
	add := func(label string, get func(i int) string) {
		vals := make([]string, len(rs))
		for i := range rs {
			vals[i] = get(i)
		}
		if slices.ContainsFunc(vals, func(v string) bool { return v != vals[0] }) {
			rows = append(rows, settingRow{label, vals})
		}
	}
	add("seed", func(i int) string { return fmt.Sprint(rs[i].Run.Seed) })
	add("profile", func(i int) string { return rs[i].Run.Profile })
	add("time scale", func(i int) string { return describeScale(rs[i].Run.TimeScale) })
	params := make([]map[string]string, len(rs))
	daemon := make([]map[string]string, len(rs))
	for i, r := range rs {
		params[i], daemon[i] = flattenSettings(r.Params), flattenSettings(r.Run.Daemon)
	}
	for _, k := range unionKeys(params) {
		add(k, func(i int) string { return lookupValue(params[i], k) })
	}
	for _, k := range unionKeys(daemon) {
		add("daemon "+k, func(i int) string { return lookupValue(daemon[i], k) })
	}
	return rows
}

// unionKeys returns the keys of all ms, sorted.
func unionKeys(ms []map[string]string) []string {
	set := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			set[k] = true
		}
	}
	return sortedKeys(set)
}

// lookupValue returns m[k], or a dash when m has no such key.
func lookupValue(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return "—"
}

// writeRow writes one table row with already-formatted values.
func writeRow(b *strings.Builder, label string, vals []string) {
	b.WriteString("| " + label + " |")
	for _, v := range vals {
		b.WriteString(" " + markdown.Text(v) + " |")
	}
	b.WriteString("\n")
}

// writeResult writes one result's section.
func writeResult(b *strings.Builder, r *bench.Result, plan []plannedPlot) {
	fmt.Fprintf(b, "### %s\n\n", markdown.Text(resultID(r)))
	if r.Command == "" {
		b.WriteString("Command: not recorded.\n\n")
	} else {
		fence := markdown.Fence(r.Command)
		fmt.Fprintf(b, "Command:\n\n%ssh\n%s\n%s\n\n", fence, r.Command, fence)
	}
	writeRunTable(b, r)
	writeSettings(b, r)
	writeMetricsTable(b, r)
	writeCallsTable(b, r)
	var links []string
	for _, p := range plan {
		if p.result == r {
			links = append(links, fmt.Sprintf("[%s](%s)", markdown.Text(plotTitle(p.kind)), plotLink(p.file)))
		}
	}
	if len(links) > 0 {
		b.WriteString("Plots: " + strings.Join(links, " · ") + "\n\n")
	}
}

// writeRunTable says how the result was produced.
func writeRunTable(b *strings.Builder, r *bench.Result) {
	b.WriteString("| Run | |\n|---|---|\n")
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(b, "| %s | %s |\n", k, v)
		}
	}
	row("scenario", markdown.Text(r.Scenario))
	row("profile", markdown.Text(r.Run.Profile))
	row("seed", fmt.Sprint(r.Run.Seed))
	row("time scale", markdown.Text(describeScale(r.Run.TimeScale)))
	if !r.Run.Started.IsZero() {
		row("started", r.Run.Started.UTC().Format(time.RFC3339))
	}
	row("machine", markdown.Text(describeMachine(r.Run.Machine)))
	if r.Run.GitCommit != "" {
		row("commit", markdown.Code(r.Run.GitCommit))
	}
	row("parameters", scalarKeyValues(r.Params))
	b.WriteString("\n")
}

// scalarKeyValues prints the top-level scalar entries of a map as sorted
// key=value code spans: the parameters a reader wants at a glance.
// Nested values go to the settings table.
func scalarKeyValues(m map[string]any) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		if _, nested := m[k].(map[string]any); !nested {
			parts = append(parts, markdown.Code(k+"="+fmtValue(m[k])))
		}
	}
	return strings.Join(parts, " ")
}

// writeSettings writes every parameter and daemon configuration key,
// nested maps flattened to dotted keys, in a collapsed block: complete
// for reproduction, out of the way for reading.
func writeSettings(b *strings.Builder, r *bench.Result) {
	params := flattenSettings(r.Params)
	daemon := flattenSettings(r.Run.Daemon)
	if len(params)+len(daemon) == 0 {
		return
	}
	fmt.Fprintf(b, "<details><summary>All settings: %d parameters, %d daemon configuration keys</summary>\n\n", len(params), len(daemon))
	b.WriteString("| Setting | Value |\n|---|---|\n")
	for _, k := range sortedKeys(params) {
		fmt.Fprintf(b, "| %s | %s |\n", markdown.Text(k), markdown.Text(params[k]))
	}
	for _, k := range sortedKeys(daemon) {
		fmt.Fprintf(b, "| daemon %s | %s |\n", markdown.Text(k), markdown.Text(daemon[k]))
	}
	b.WriteString("\n</details>\n\n")
}

// flattenSettings prints a settings map with nested maps flattened to
// dotted keys ("backoff_override.eni_create.Duration"), so that tables
// stay narrow and comparisons show only the leaf that differs.
func flattenSettings(m map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if k == "" {
				k = `""`
			}
			key := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(key+".", sub)
				continue
			}
			out[key] = fmtValue(v)
		}
	}
	walk("", m)
	return out
}

// describeMachine prints the machine on one line.
func describeMachine(m bench.Machine) string {
	var parts []string
	if m.OS != "" || m.Arch != "" {
		parts = append(parts, m.OS+"/"+m.Arch)
	}
	if m.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", m.CPUs))
	}
	if m.CPUModel != "" {
		parts = append(parts, m.CPUModel)
	}
	if m.MemoryMiB > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB", m.MemoryMiB))
	}
	if m.Kernel != "" {
		parts = append(parts, "kernel "+m.Kernel)
	}
	if m.GoVersion != "" {
		parts = append(parts, m.GoVersion)
	}
	return strings.Join(parts, ", ")
}

// writeMetricsTable writes the figures that apply to r.
func writeMetricsTable(b *strings.Builder, r *bench.Result) {
	b.WriteString("| Metric | Value |\n|---|---:|\n")
	for _, d := range metricDefs {
		if d.applies != nil && !d.applies(r) {
			continue
		}
		fmt.Fprintf(b, "| %s | %s |\n", markdown.Text(d.label+dagger(d.timing)), markdown.Text(d.fmt(d.get(r))))
	}
	b.WriteString("\n")
}

// writeCallsTable writes r's cloud calls by action, with a total, and
// the calls of the pool's warm-up beside them when the run counted those.
func writeCallsTable(b *strings.Builder, r *bench.Result) {
	m := &r.Metrics
	actions := sortedKeys(m.CallsByAction)
	for a := range m.WarmupCallsByAction {
		if _, ok := m.CallsByAction[a]; !ok {
			actions = append(actions, a)
		}
	}
	slices.Sort(actions)
	if len(actions) == 0 {
		return
	}
	perPod := func(n int64) string {
		if m.Pods == 0 {
			return "—"
		}
		return fmtPerPod(float64(n) / float64(m.Pods))
	}
	warm := hasWarmup(r)
	b.WriteString("| Action | Calls | Per pod |")
	if warm {
		b.WriteString(" Warm-up calls |")
	}
	b.WriteString("\n|---|---:|---:|")
	if warm {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	row := func(label string, n, w int64) {
		fmt.Fprintf(b, "| %s | %d | %s |", label, n, perPod(n))
		if warm {
			fmt.Fprintf(b, " %d |", w)
		}
		b.WriteString("\n")
	}
	for _, a := range actions {
		row(markdown.Text(a), m.CallsByAction[a], m.WarmupCallsByAction[a])
	}
	row("**total**", totalCalls(m), sumCalls(m.WarmupCallsByAction))
	b.WriteString("\n")
}

// plotTitle is the link text of a plot kind.
func plotTitle(kind string) string {
	for _, k := range plotKinds {
		if k.id == kind {
			return k.title
		}
	}
	return kind
}

// plotLink is the Markdown link target of a plot file.
func plotLink(file string) string { return path.Join(PlotsDir, file) }

func dagger(timing bool) string {
	if timing {
		return " †"
	}
	return ""
}
