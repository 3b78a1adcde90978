package report

import (
	"cmp"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/terway-sim/terway/internal/markdown"
)

// replayNote says what a seed promises, in every report.
const replayNote = "Replaying a run with its `--plan` and `--seed` repeats its fault schedule (faults, targets, offsets, fakecloud's fault seed); outcomes can differ with timing."

// WriteMarkdown writes one run for people: the verdict and figures, how
// to replay it, the schedule, the faults with how often each fired, every
// invariant's result, each violation explained (Run.Explain), the
// timeline chart (TimelineFile next to the Markdown), the calls by
// outcome and the last audit.
func WriteMarkdown(w io.Writer, r *Run) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Chaos run %s, seed %d\n\n", markdown.Text(r.Plan), r.Seed)
	v := r.Violations()
	fmt.Fprintf(&b, "**Verdict: %s** — %d violation(s).", r.Verdict(), len(v))
	if r.Error != "" {
		fmt.Fprintf(&b, " The run did not complete: %s", markdown.Text(r.Error))
	}
	b.WriteString("\n\n| | |\n|---|---|\n")
	for _, row := range runFacts(r) {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	fmt.Fprintf(&b, "\nReplay: %s. %s\n\n", markdown.Code(r.Replay()), replayNote)
	fence := markdown.Fence(r.Schedule)
	fmt.Fprintf(&b, "## Schedule\n\n%stext\n%s\n%s\n\n", fence, strings.TrimRight(r.Schedule, "\n"), fence)
	writeFaults(&b, r)
	writeInvariants(&b, r)
	for i, viol := range v {
		if i == 0 {
			b.WriteString("## Violations\n\n")
		}
		text := r.Explain(viol)
		f := markdown.Fence(text)
		fmt.Fprintf(&b, "### %d. %s\n\n%s\n%s%s\n\n", i+1, markdown.Text(viol.Invariant), f, text, f)
	}
	writeTimeline(&b, r)
	fmt.Fprintf(&b, "## Audit\n\n%s\n\n", markdown.Text(AuditSummary(r.Audit)))
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", markdown.Text(n))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write run %s: %w", RunDir(r), err)
	}
	return nil
}

// runFacts are the figures at the top of a run's page.
func runFacts(r *Run) [][2]string {
	restarts := "—"
	if r.Timeline != nil {
		n := 0
		for _, rs := range r.Timeline.Restarts {
			n += rs.Count
		}
		restarts = fmt.Sprint(n)
	}
	return [][2]string{
		{"Plan", markdown.Code(r.Plan)},
		{"Seed", fmt.Sprint(r.Seed)},
		{"Start", r.Start.Format(time.RFC3339)},
		{"Duration", fmtDuration(r.Duration())},
		{"Faults injected", faultsInjected(r)},
		{"Pods started", fmt.Sprint(r.PodsStarted)},
		{"Daemon restarts", restarts},
	}
}

func writeFaults(b *strings.Builder, r *Run) {
	b.WriteString("## Faults\n\n")
	if len(r.Faults) == 0 {
		b.WriteString("None.\n\n")
		return
	}
	b.WriteString("| Fault | Kind | Target | From | To | Fired |\n|---|---|---|---:|---:|---:|\n")
	for _, f := range r.Faults {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d |\n", markdown.Text(f.Name), markdown.Text(f.Kind),
			markdown.Text(cmp.Or(f.Target, "—")), fmtDuration(f.Start.Sub(r.Start)), fmtDuration(f.End.Sub(r.Start)), f.Fired)
	}
	b.WriteString("\n")
}

func writeInvariants(b *strings.Builder, r *Run) {
	b.WriteString("## Invariants\n\n| Invariant | Result | Detail |\n|---|---|---|\n")
	for _, res := range r.Invariants {
		detail := cmp.Or(res.Skipped, res.Detail)
		if n := len(res.Violations); n > 0 && detail == "" {
			detail = fmt.Sprintf("%d violation(s), below", n)
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", markdown.Text(res.Invariant), res.Status(), markdown.Text(detail))
	}
	b.WriteString("\n")
}

// writeTimeline links the chart and sums the calls by outcome.
func writeTimeline(b *strings.Builder, r *Run) {
	b.WriteString("## Timeline\n\n")
	tl := r.Timeline
	if tl == nil {
		b.WriteString("No timeline was recorded.\n\n")
		return
	}
	fmt.Fprintf(b, "![timeline of %s, seed %d](%s)\n\n", markdown.Text(r.Plan), r.Seed, TimelineFile)
	total := map[string]int64{}
	for _, s := range tl.Samples {
		for o, n := range s.Calls {
			total[o] += n
		}
	}
	if len(total) == 0 {
		return
	}
	b.WriteString("| Cloud calls by outcome | Calls |\n|---|---:|\n")
	for _, o := range tl.Outcomes() {
		fmt.Fprintf(b, "| %s | %d |\n", markdown.Text(o), total[o])
	}
	b.WriteString("\n")
}

// WriteSummary writes a table of runs, sorted by plan and seed, each
// linked to its page (RunDir/run.md), then the damaged runs: why each
// run directory that could not be read was left out.
func WriteSummary(w io.Writer, runs []*Run, damaged ...string) error {
	var b strings.Builder
	failed := 0
	for _, r := range runs {
		if r.Verdict() != VerdictPass {
			failed++
		}
	}
	fmt.Fprintf(&b, "# Chaos runs\n\n%d run(s), %d failed. %s\n\n", len(runs), failed, replayNote)
	if len(runs) > 0 {
		b.WriteString("| Plan | Seed | Duration | Faults injected | Pods started | Violations | Verdict |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
	}
	for _, r := range sortedRuns(runs) {
		fmt.Fprintf(&b, "| [%s](%s) | %d | %s | %s | %d | %d | %s |\n",
			markdown.Text(r.Plan), path.Join(RunDir(r), MarkdownFile), r.Seed, fmtDuration(r.Duration()),
			faultsInjected(r), r.PodsStarted, len(r.Violations()), r.Verdict())
	}
	if len(damaged) > 0 {
		fmt.Fprintf(&b, "\n%d damaged run(s), left out above:\n\n", len(damaged))
		for _, d := range damaged {
			fmt.Fprintf(&b, "- %s\n", markdown.Text(d))
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// faultsInjected prints how many faults a run injected and how often
// they fired.
func faultsInjected(r *Run) string {
	return fmt.Sprintf("%d (fired %d)", len(r.Faults), r.Fired())
}

// fmtDuration prints d to the tenth of a second.
func fmtDuration(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
