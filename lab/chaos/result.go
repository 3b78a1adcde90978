package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// Result is what a run did: per step when it was applied and undone (the
// fault bands of a report) and whether it fired, the timeline of every
// action, and the errors.
type Result struct {
	Plan    string       `json:"plan"`
	Seed    int64        `json:"seed"`
	Run     string       `json:"run"`
	Started time.Time    `json:"started"`
	Ended   time.Time    `json:"ended"`
	Steps   []StepResult `json:"steps"`
	Events  []Event      `json:"events"`
	// Errors are the run's failures, unproven steps included.
	Errors []string `json:"errors,omitempty"`
}

// StepResult is one step of a run.
type StepResult struct {
	StepRef
	// Target is what the step's target meant when it started: node
	// names, vSwitch or ENI IDs, addresses.
	Target string `json:"target,omitempty"`
	// Applied says whether the step started; From and To are its band,
	// from the run's start (To is when it was undone, or the run ended).
	Applied bool           `json:"applied"`
	From    admin.Duration `json:"from"`
	To      admin.Duration `json:"to"`
	// Fired counts what proves the step fired: calls answered with the
	// fault's outcome, calls held, kills, ENIs detached, ...
	Fired int64 `json:"fired"`
	// Evidence says where Fired comes from, or why there is none.
	Evidence string `json:"evidence"`
	Error    string `json:"error,omitempty"`
}

// Event is one thing the engine did.
type Event struct {
	// At is from the run's start.
	At   admin.Duration `json:"at"`
	Step string         `json:"step,omitempty"`
	Kind Kind           `json:"kind,omitempty"`
	// What is apply, undo, kill, cleanup or error.
	What   string `json:"what"`
	Detail string `json:"detail,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Events' What.
const (
	EventApply   = "apply"
	EventUndo    = "undo"
	EventKill    = "kill"
	EventCleanup = "cleanup"
	EventError   = "error"
)

// OK says whether the run applied, undid and proved every step.
func (r *Result) OK() bool { return len(r.Errors) == 0 }

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the steps' bands and evidence, then the errors.
func (r *Result) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "plan %s, seed %d (run %s): %s\n", r.Plan, r.Seed, r.Run, r.Ended.Sub(r.Started).Round(time.Millisecond))
	fmt.Fprintln(tw, "STEP\tKIND\tFROM\tTO\tTARGET\tFIRED\tEVIDENCE")
	for _, s := range r.Steps {
		from, to := "-", "-"
		if s.Applied {
			from, to = s.From.D().String(), s.To.D().String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name, s.Kind, from, to, s.Target, s.Fired, s.Evidence)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(tw, "error: %s\n", e)
	}
	return tw.Flush()
}
