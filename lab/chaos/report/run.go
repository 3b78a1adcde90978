package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/chaos/timeline"
)

// Verdicts of a run.
const (
	VerdictPass = "pass"
	VerdictFail = "FAIL"
)

// Run is the record of one chaos run: what was done, what it caused and
// the verdict.
type Run struct {
	Plan string `json:"plan"`
	Seed int64  `json:"seed"`
	// Schedule is the plan's fault schedule as text, as the engine prints
	// it (faults, targets, offsets, fakecloud's fault seed).
	Schedule string    `json:"schedule"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	// Faults are the faults injected, in schedule order.
	Faults []Fault `json:"faults"`
	// PodsStarted counts the workload pods the run started.
	PodsStarted int      `json:"podsStarted"`
	Invariants  []Result `json:"invariants"`
	// Audit is the run's last audit, whose summary every violation shows.
	Audit *audit.Report `json:"audit,omitempty"`
	// Timeline is what the lab did during the run.
	Timeline *timeline.Timeline `json:"timeline,omitempty"`
	// Error says why the run could not complete, if it could not; such a
	// run fails whatever its invariants say.
	Error string `json:"error,omitempty"`
	// Notes are remarks for the reader.
	Notes []string `json:"notes,omitempty"`
}

// Fault is one fault a plan injected: the band the engine handed the
// timeline, and what the fault did.
type Fault struct {
	timeline.Band
	// Fired counts what it did: calls it failed or delayed (fakecloud's
	// accounting), processes it killed, instances it stopped.
	Fired int64 `json:"fired"`
}

// Result is one invariant's verdict.
type Result struct {
	Invariant string `json:"invariant"`
	// Skipped says why the invariant was not judged (its facts were not
	// collected); empty when it was.
	Skipped string `json:"skipped,omitempty"`
	// Detail says what was found, violated or not ("clean 3.2s after the
	// faults ended").
	Detail     string      `json:"detail,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
}

// Status is "pass", "FAIL" or "skipped".
func (r Result) Status() string {
	switch {
	case len(r.Violations) > 0:
		return VerdictFail
	case r.Skipped != "":
		return "skipped"
	}
	return VerdictPass
}

// Violation is one way an invariant did not hold.
type Violation struct {
	Invariant string `json:"invariant"`
	// At is when it was seen; zero means at the end of the run.
	At time.Time `json:"at,omitzero"`
	// Message says what broke, in one line.
	Message string `json:"message"`
}

// Violations lists the violations of every invariant, in order.
func (r *Run) Violations() []Violation {
	var out []Violation
	for _, res := range r.Invariants {
		out = append(out, res.Violations...)
	}
	return out
}

// Verdict is VerdictPass when the run completed without violations,
// VerdictFail otherwise.
func (r *Run) Verdict() string {
	if r.Error != "" || len(r.Violations()) > 0 {
		return VerdictFail
	}
	return VerdictPass
}

// Duration is how long the run took.
func (r *Run) Duration() time.Duration { return r.End.Sub(r.Start) }

// Fired sums the faults' Fired counts.
func (r *Run) Fired() int64 {
	var n int64
	for _, f := range r.Faults {
		n += f.Fired
	}
	return n
}

// Replay is the command that repeats the run's fault schedule.
func (r *Run) Replay() string {
	return fmt.Sprintf("terway-lab chaos --plan %s --seed %d", r.Plan, r.Seed)
}

// Explain prints v for people: the plan and seed to replay, the message,
// the audit summary and the timeline up to v (its last 30 samples).
func (r *Run) Explain(v Violation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "violation of %s in plan %s, seed %d: %s\n", v.Invariant, r.Plan, r.Seed, v.Message)
	fmt.Fprintf(&b, "replay: %s (the same fault schedule; outcomes can differ with timing)\n", r.Replay())
	fmt.Fprintf(&b, "audit: %s\n", AuditSummary(r.Audit))
	if r.Timeline == nil {
		b.WriteString("no timeline\n")
		return b.String()
	}
	until := r.Timeline.End.Sub(r.Timeline.Start)
	if !v.At.IsZero() {
		until = r.Timeline.Offset(v.At)
	}
	_ = r.Timeline.WriteText(&b, until, 30) // a strings.Builder does not fail
	return b.String()
}

// AuditSummary says in one line what an audit found: "clean", or the
// findings by kind and the first few of them.
func AuditSummary(a *audit.Report) string {
	if a == nil {
		return "none taken"
	}
	when := a.Time.Format(time.RFC3339)
	if a.Clean() {
		return "clean at " + when
	}
	byKind := map[audit.Kind]int{}
	for _, f := range a.Findings {
		byKind[f.Kind]++
	}
	var kinds []string
	for _, k := range a.Kinds() {
		kinds = append(kinds, fmt.Sprintf("%s ×%d", k, byKind[k]))
	}
	s := fmt.Sprintf("%d finding(s) at %s (%s)", len(a.Findings), when, strings.Join(kinds, ", "))
	const shown = 3
	for _, f := range a.Findings[:min(shown, len(a.Findings))] {
		s += fmt.Sprintf("; %s %s: %s", f.Kind, cmp.Or(f.Node, "-"), f.Object)
	}
	if len(a.Findings) > shown {
		s += fmt.Sprintf("; %d more", len(a.Findings)-shown)
	}
	return s
}

// sortedRuns returns runs by plan, then seed, without changing runs.
func sortedRuns(runs []*Run) []*Run {
	out := slices.Clone(runs)
	slices.SortStableFunc(out, func(a, b *Run) int {
		return cmp.Or(cmp.Compare(a.Plan, b.Plan), cmp.Compare(a.Seed, b.Seed))
	})
	return out
}
