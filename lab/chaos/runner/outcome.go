package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/report"
	"github.com/terway-sim/terway/lab/chaos/timeline"
)

// RestartCauses are the kinds that explain a daemon restart on their
// target while they are active.
var RestartCauses = []string{string(chaos.KillTerwayd), string(chaos.RestartContainerd), string(chaos.RestartKubelet),
	string(chaos.NodeStopStart), string(chaos.NodeRelease)}

// RestartGrace is how long after such a fault a restart it caused may
// still be seen: the kubelet's back-off after repeated kills.
const RestartGrace = time.Minute

// Outcome is a run that happened: its schedule, what the engine did, and
// the report with the verdict.
type Outcome struct {
	Schedule *chaos.Schedule
	Result   *chaos.Result
	Run      *report.Run
}

// Passed says whether the run completed with every invariant held.
func (o *Outcome) Passed() bool { return o.Run.Verdict() == report.VerdictPass }

// Err is nil for a run that passed, else one line: the violations'
// count, and whether the run did not complete (the details are in the
// result and the report, not repeated here).
func (o *Outcome) Err() error {
	if o.Passed() {
		return nil
	}
	msg := fmt.Sprintf("chaos: %d invariant violation(s) in plan %s, seed %d", len(o.Run.Violations()), o.Run.Plan, o.Run.Seed)
	if o.Run.Error != "" {
		msg += "; the run did not complete (its errors are above)"
	}
	return errors.New(msg)
}

// WriteViolations prints each violation for people (report.Run.Explain:
// plan and seed to replay, the audit, the timeline up to it).
func (o *Outcome) WriteViolations(w io.Writer) error {
	for _, v := range o.Run.Violations() {
		if _, err := io.WriteString(w, o.Run.Explain(v)); err != nil {
			return err
		}
	}
	return nil
}

// WriteReport writes the report with report.WriteRun under
// out/<plan>-<seed>, and schedule.json and result.json beside it, and
// returns the run's directory.
func (o *Outcome) WriteReport(out string) (string, error) {
	dir, err := report.WriteRun(out, o.Run)
	if err != nil {
		return "", err
	}
	for name, write := range map[string]func(io.Writer) error{"schedule.json": o.Schedule.WriteJSON, "result.json": o.Result.WriteJSON} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return "", fmt.Errorf("write %s: %w", name, err)
		}
	}
	return dir, nil
}

// faultBands are the applied steps as the report's faults.
func faultBands(res *chaos.Result) []report.Fault {
	var out []report.Fault
	for _, st := range res.Steps {
		if !st.Applied {
			continue
		}
		b := timeline.Band{Name: st.Name, Kind: string(st.Kind), Target: st.Target,
			Start: res.Started.Add(st.From.D()), End: res.Started.Add(st.To.D())}
		out = append(out, report.Fault{Band: b, Fired: st.Fired})
	}
	return out
}

// buildRun builds the report of a run and judges its invariants; runErr
// is what kept the run from completing (the engine's errors, a workload
// that would not go), which fails it whatever the invariants say.
func buildRun(s *chaos.Schedule, res *chaos.Result, f report.Facts, notes []string, runErr error) *report.Run {
	var sched bytes.Buffer
	_ = s.WriteText(&sched) // a bytes.Buffer does not fail
	f.Faults = faultBands(res)
	for _, fl := range f.Faults {
		if fl.End.After(f.FaultsEnd) {
			f.FaultsEnd = fl.End
		}
	}
	if f.FaultsEnd.IsZero() {
		f.FaultsEnd = res.Ended
	}
	iv := report.Invariants{AuditWithin: s.Plan.Invariants.AuditClean.D(), ReadyWithin: s.Plan.Invariants.PodsReady.D(),
		RestartCauses: RestartCauses, RestartGrace: RestartGrace}
	run := &report.Run{Plan: s.Plan.Name, Seed: s.Seed, Schedule: sched.String(), Start: res.Started, End: time.Now(),
		Faults: f.Faults, PodsStarted: s.Plan.Workload.Pods, Invariants: iv.Check(f), Timeline: f.Timeline, Notes: notes}
	if n := len(f.Audits); n > 0 {
		run.Audit = f.Audits[n-1]
	}
	if runErr != nil {
		run.Error = runErr.Error()
	}
	return run
}
