package timeline

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// Sources a Sample reads, as keys of Sample.Errors.
const (
	SourceCalls  = "calls"
	SourcePods   = "pods"
	SourceDaemon = "daemon"
)

// Timeline is what a Sampler recorded between Start and Stop.
type Timeline struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Interval is the time between samples asked for.
	Interval admin.Duration `json:"interval"`
	Samples  []Sample       `json:"samples"`
	// Bands are the faults the engine handed in, in the order given.
	Bands []Band `json:"bands,omitempty"`
	// Restarts are the daemon restarts seen, in the order seen.
	Restarts []Restart `json:"restarts,omitempty"`
}

// Sample is the lab at one moment.
type Sample struct {
	// At is the time since Timeline.Start, to the millisecond.
	At admin.Duration `json:"at"`
	// Calls are the calls fakecloud answered since the previous read of
	// its counters, by outcome; CallsOver is the time they span.
	Calls     map[string]int64 `json:"calls,omitempty"`
	CallsOver admin.Duration   `json:"callsOver,omitempty"`
	// Throttled are those of Calls whose outcome is a Throttling code.
	Throttled int64 `json:"throttled"`
	// PodsReady are the workload's pods Ready with an IP; Pods all that
	// are not terminating; PodsTerminating the others.
	PodsReady       int `json:"podsReady"`
	Pods            int `json:"pods"`
	PodsTerminating int `json:"podsTerminating"`
	// Restarts counts the daemon restarts seen since Start.
	Restarts int `json:"restarts"`
	// Errors says, by source (SourceCalls, SourcePods, SourceDaemon),
	// why it could not be read; that source's fields are then zero.
	Errors map[string]string `json:"errors,omitempty"`
}

// Rate is n calls of s.Calls per second of CallsOver (0 when the sample
// spans no time).
func (s *Sample) Rate(n int64) float64 {
	if s.CallsOver <= 0 {
		return 0
	}
	return float64(n) / s.CallsOver.D().Seconds()
}

// Band is a fault as the engine applied it.
type Band struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Target is what the fault hit (a node, an instance, an action), or
	// empty for the whole lab.
	Target string    `json:"target,omitempty"`
	Start  time.Time `json:"start"`
	// End is when the fault was removed; Stop closes bands still open.
	End time.Time `json:"end"`
}

// Label names the band for charts and text: its name, and the target
// when there is one.
func (b Band) Label() string {
	if b.Target == "" {
		return b.Name
	}
	return b.Name + " (" + b.Target + ")"
}

// Restart is a daemon container seen restarted, or a daemon pod seen
// replaced by another on its node.
type Restart struct {
	// At is when the Sampler saw it, since Timeline.Start.
	At        admin.Duration `json:"at"`
	Node      string         `json:"node"`
	Pod       string         `json:"pod"`
	Container string         `json:"container,omitempty"`
	// Count is how many restarts this one sighting stands for (more than
	// one when the container restarted twice between two samples).
	Count int `json:"count"`
	// Cause is what the kubelet recorded of the last termination
	// ("Error, exit code 137"), "pod replaced …", or empty when unknown.
	Cause string `json:"cause,omitempty"`
	// FinishedAt is when the last termination happened, when known: a
	// better time for the restart than At.
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// When is the restart's best known time: FinishedAt, else when seen.
func (r Restart) When(start time.Time) time.Time {
	if !r.FinishedAt.IsZero() {
		return r.FinishedAt
	}
	return start.Add(r.At.D())
}

// Offset is t's time since the timeline's start.
func (t *Timeline) Offset(at time.Time) time.Duration { return at.Sub(t.Start) }

// Outcomes lists every call outcome in the samples: admin.OutcomeSuccess
// first, then the error codes in order.
func (t *Timeline) Outcomes() []string {
	seen := map[string]bool{}
	for _, s := range t.Samples {
		for o := range s.Calls {
			seen[o] = true
		}
	}
	return slices.SortedFunc(maps.Keys(seen), func(a, b string) int {
		return cmp.Or(-cmp.Compare(boolInt(a == admin.OutcomeSuccess), boolInt(b == admin.OutcomeSuccess)), cmp.Compare(a, b))
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BandsAt returns the bands active at offset at.
func (t *Timeline) BandsAt(at time.Duration) []Band {
	var out []Band
	for _, b := range t.Bands {
		if t.Offset(b.Start) <= at && (b.End.IsZero() || at <= t.Offset(b.End)) {
			out = append(out, b)
		}
	}
	return out
}

// WriteText prints the timeline up to offset until for people, as a
// violation shows it: the faults and restarts so far, then one row per
// sample (the last rows of them; all when rows <= 0).
func (t *Timeline) WriteText(w io.Writer, until time.Duration, rows int) error {
	var upTo []Sample
	for _, s := range t.Samples {
		if s.At.D() <= until {
			upTo = append(upTo, s)
		}
	}
	fmt.Fprintf(w, "timeline from %s, a sample every %s, up to %s:\n", t.Start.Format(time.RFC3339), t.Interval.D(), fmtOffset(until))
	for _, b := range t.Bands {
		if t.Offset(b.Start) <= until {
			fmt.Fprintf(w, "  fault %s, %s: %s → %s\n", b.Label(), b.Kind, fmtOffset(t.Offset(b.Start)), t.bandEnd(b))
		}
	}
	for _, r := range t.Restarts {
		if r.At.D() <= until {
			fmt.Fprintf(w, "  restart at %s: %s\n", fmtOffset(r.At.D()), r.describe())
		}
	}
	if rows > 0 && len(upTo) > rows {
		fmt.Fprintf(w, "  (%d earlier samples left out)\n", len(upTo)-rows)
		upTo = upTo[len(upTo)-rows:]
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "at\tready/pods\tthrottled/s\trestarts\t calls/s by outcome; faults active\n")
	for _, s := range upTo {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t %s\n", fmtOffset(s.At.D()), s.podsText(), fmtRate(s.Rate(s.Throttled)), s.Restarts, t.rowNotes(s))
	}
	return tw.Flush()
}

// bandEnd prints when b ended, or that it had not.
func (t *Timeline) bandEnd(b Band) string {
	if b.End.IsZero() {
		return "open"
	}
	return fmtOffset(t.Offset(b.End))
}

func (s *Sample) podsText() string {
	if _, failed := s.Errors[SourcePods]; failed {
		return "?"
	}
	return fmt.Sprintf("%d/%d", s.PodsReady, s.Pods)
}

// rowNotes lists a sample's call rates by outcome, its active faults and
// its read errors.
func (t *Timeline) rowNotes(s Sample) string {
	var parts []string
	for _, o := range slices.Sorted(maps.Keys(s.Calls)) {
		parts = append(parts, fmtRate(s.Rate(s.Calls[o]))+" "+o)
	}
	notes := strings.Join(parts, ", ")
	if notes == "" {
		notes = "-"
	}
	var active []string
	for _, b := range t.BandsAt(s.At.D()) {
		active = append(active, b.Label())
	}
	if len(active) > 0 {
		notes += "; " + strings.Join(active, ", ")
	}
	for _, src := range slices.Sorted(maps.Keys(s.Errors)) {
		notes += "; " + src + " unread: " + s.Errors[src]
	}
	return notes
}

// describe prints a restart on one line.
func (r Restart) describe() string {
	s := r.Pod
	if r.Container != "" {
		s += "/" + r.Container
	}
	s += " on " + r.Node
	if r.Count > 1 {
		s += fmt.Sprintf(" (%d times)", r.Count)
	}
	if r.Cause != "" {
		s += ": " + r.Cause
	}
	return s
}

// String prints the restart on one line, as WriteText does.
func (r Restart) String() string { return fmtOffset(r.At.D()) + " " + r.describe() }

func fmtOffset(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}

func fmtRate(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
