package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// Engine applies schedules to a lab. Each client may be nil if no step
// of the schedules it runs needs it; Run says which step would.
type Engine struct {
	Cloud    Cloud
	Lab      Lab
	Operator Operator
	// Nodes are the lab's nodes, what node targets choose from.
	Nodes []Node
	// Clock times the steps; nil is the real clock.
	Clock clock.Clock
	// Progress receives one line per event; nil discards them.
	Progress io.Writer
	// CleanupTimeout bounds the undo of what is still applied when a run
	// ends early (0: two minutes).
	CleanupTimeout time.Duration
}

// Run applies every step of s at its offset and undoes it at its end.
// Whatever happens — a failed step, a panic, ctx's end — every step that
// was applied is undone before Run returns (a panic is then raised
// again). Then each applied step must have fired, or the run fails
// naming it. The result is there also when err is not nil, except when
// the engine lacks a client s needs.
func (e *Engine) Run(ctx context.Context, s *Schedule) (res *Result, err error) {
	if err := e.preflight(s); err != nil {
		return nil, err
	}
	r := e.newRun(s)
	defer func() {
		p := recover()
		if p != nil {
			err = fmt.Errorf("panic: %v", p)
			r.event(nil, EventError, "", err)
		}
		err = errors.Join(err, r.cleanup(ctx))
		if p != nil {
			r.finish(err)
			panic(p)
		}
		err = errors.Join(err, r.prove())
		res = r.finish(err)
	}()
	return nil, r.play(ctx)
}

// Check says, without touching the lab, whether the engine has every
// client and node s needs (what Run checks first): a caller can refuse or
// skip a schedule before it sets anything up for it.
func (e *Engine) Check(s *Schedule) error { return e.preflight(s) }

// preflight checks that the engine has what every step needs.
func (e *Engine) preflight(s *Schedule) error {
	for _, st := range s.Steps {
		n := kinds[st.Kind].needs
		for _, c := range []struct {
			need, absent bool
			what         string
		}{
			{n.cloud, e.Cloud == nil, "fakecloud's admin API (Engine.Cloud)"},
			{n.lab, e.Lab == nil, "the lab supervisor's control (Engine.Lab)"},
			{n.operator, e.Operator == nil, "an operator's ECS client (Engine.Operator)"},
		} {
			if c.need && c.absent {
				return fmt.Errorf("step %s (%s) needs %s", st.Name, st.Kind, c.what)
			}
		}
		t := st.target()
		if t.scope == TargetNode && !slices.ContainsFunc(e.Nodes, func(n Node) bool { return n.Name == t.name }) {
			return fmt.Errorf("step %s (%s): no node %q in the lab", st.Name, st.Kind, t.name)
		}
		if kinds[st.Kind].class != ClassCloud && t.scope != TargetControlPlane && len(e.Nodes) == 0 {
			return fmt.Errorf("step %s (%s): the engine knows no nodes (Engine.Nodes)", st.Name, st.Kind)
		}
	}
	return nil
}

// run is one Run in progress. Only Run's goroutine touches it.
type run struct {
	e        *Engine
	s        *Schedule
	clock    clock.Clock
	start    time.Time
	steps    []*stepRun
	released map[string]bool
	res      *Result
}

func (e *Engine) newRun(s *Schedule) *run {
	c := e.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	r := &run{e: e, s: s, clock: c, start: c.Now(), released: map[string]bool{},
		res: &Result{Plan: s.Plan.Name, Seed: s.Seed, Run: s.Run}}
	r.res.Started = r.start
	for _, st := range s.Steps {
		r.steps = append(r.steps, &stepRun{ScheduledStep: st})
	}
	return r
}

// tick is one thing to do at an offset.
type tick struct {
	at   time.Duration
	op   int // opUndo, opApply, opKill: the order at equal offsets
	step *stepRun
}

const (
	opUndo = iota
	opApply
	opKill
)

// ticks orders every apply, kill and undo of the schedule; at equal
// offsets an undo comes first, so a step may start where another of its
// kind ends.
func (r *run) ticks() []tick {
	var out []tick
	for _, st := range r.steps {
		out = append(out, tick{st.Start.D(), opApply, st}, tick{st.End.D(), opUndo, st})
		for _, m := range st.Moments {
			out = append(out, tick{m.D(), opKill, st})
		}
	}
	slices.SortStableFunc(out, func(a, b tick) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.op, b.op), cmp.Compare(a.step.Index, b.step.Index))
	})
	return out
}

// play runs the ticks in order; the first failure ends it.
func (r *run) play(ctx context.Context) error {
	for _, t := range r.ticks() {
		if err := r.waitUntil(ctx, t.at); err != nil {
			return err
		}
		var err error
		switch t.op {
		case opApply:
			err = r.apply(ctx, t.step)
		case opKill:
			err = r.kill(ctx, t.step)
		case opUndo:
			err = r.undo(ctx, t.step)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// waitUntil sleeps until offset at.
func (r *run) waitUntil(ctx context.Context, at time.Duration) error {
	left := at - r.clock.Since(r.start)
	if left <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("chaos run %s stopped at +%s: %w", r.s.Run, r.since().D(), ctx.Err())
	case <-r.clock.After(left):
		return nil
	}
}

func (r *run) since() admin.Duration {
	return admin.Duration(r.clock.Since(r.start).Round(time.Millisecond))
}

func (r *run) apply(ctx context.Context, st *stepRun) error {
	st.applied, st.from = true, r.since()
	detail, err := handlers[st.Kind].apply(ctx, r, st)
	r.event(st, EventApply, detail, err)
	if err != nil {
		return fmt.Errorf("apply step %s (%s): %w", st.Name, st.Kind, err)
	}
	return nil
}

func (r *run) undo(ctx context.Context, st *stepRun) error {
	if !st.applied || st.undone {
		return nil
	}
	st.undone, st.to = true, r.since()
	h := handlers[st.Kind]
	if h.undo == nil {
		return nil
	}
	detail, err := h.undo(ctx, r, st)
	r.event(st, EventUndo, detail, err)
	if err != nil {
		return fmt.Errorf("undo step %s (%s): %w", st.Name, st.Kind, err)
	}
	return nil
}

// killGrace is the least time a kill may wait for its component, also
// at the very end of its step.
const killGrace = 10 * time.Second

// kill kills at one of the step's moments. A kill that fails does not
// end the run (the component may be restarting from the last one), but
// fails it at the end. It waits for a component that is not running
// (terwayd in the kubelet's crash back-off) only until the step's window
// ends: kills must not stretch the faults past the plan's schedule.
func (r *run) kill(ctx context.Context, st *stepRun) error {
	ctx, cancel := context.WithTimeout(ctx, max(r.start.Add(st.End.D()).Sub(r.clock.Now()), killGrace))
	defer cancel()
	detail, err := killMoment(ctx, r, st)
	r.event(st, EventKill, detail, err)
	return nil
}

// cleanup undoes, newest first, every step still applied, on a context
// that outlives ctx, then makes sure no fault of the run is left.
func (r *run) cleanup(ctx context.Context) error {
	timeout := r.e.CleanupTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var errs []error
	for _, st := range slices.Backward(r.steps) {
		if st.applied && !st.undone {
			r.event(st, EventCleanup, "undo at the run's end", nil)
			errs = append(errs, r.undo(ctx, st))
		}
	}
	return errors.Join(append(errs, r.leftFaults(ctx))...)
}

// leftFaults removes faults of this run fakecloud still has (an undo
// that failed half way) and says so.
func (r *run) leftFaults(ctx context.Context) error {
	if !slices.ContainsFunc(r.steps, func(st *stepRun) bool { return st.applied && len(st.Faults) > 0 }) {
		return nil
	}
	faults, err := r.e.Cloud.Faults(ctx)
	if err != nil {
		return fmt.Errorf("check that no fault is left: %w", err)
	}
	prefix := "chaos-" + r.s.Run + "-"
	var left []string
	for _, f := range faults {
		if strings.HasPrefix(f.Name, prefix) {
			left = append(left, f.Name)
			if err := r.e.Cloud.RemoveFault(ctx, f.Name); err != nil {
				return fmt.Errorf("remove left fault %s: %w", f.Name, err)
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("faults %v were left after the undo; removed now", left)
	}
	return nil
}

// event records one event on the timeline and in the progress output.
func (r *run) event(st *stepRun, what, detail string, err error) {
	ev := Event{At: r.since(), What: what, Detail: detail}
	if st != nil {
		ev.Step, ev.Kind = st.Name, st.Kind
	}
	if err != nil {
		ev.Error = err.Error()
	}
	r.res.Events = append(r.res.Events, ev)
	if st != nil && err != nil {
		st.errs = append(st.errs, fmt.Sprintf("%s at +%s: %v", what, ev.At.D(), err))
	}
	if w := r.e.Progress; w != nil {
		line := fmt.Sprintf("chaos: +%s %s %s", ev.At.D(), what, ev.Step)
		if detail != "" {
			line += ": " + detail
		}
		if err != nil {
			line += ": error: " + err.Error()
		}
		fmt.Fprintln(w, line)
	}
}

// prove checks that every applied step fired.
func (r *run) prove() error {
	var errs []error
	for _, st := range r.steps {
		if !st.applied {
			st.evidence = "not reached"
			continue
		}
		st.fired, st.evidence = handlers[st.Kind].proof(r, st)
		if st.fired == 0 {
			errs = append(errs, fmt.Errorf("step %s (%s) never fired: %s", st.Name, st.Kind, st.evidence))
		}
		if st.Kind.Class() == ClassProcess && len(st.errs) > 0 {
			errs = append(errs, fmt.Errorf("step %s (%s): %s", st.Name, st.Kind, strings.Join(st.errs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// finish fills in the result.
func (r *run) finish(err error) *Result {
	r.res.Ended = r.clock.Now()
	r.res.Steps = r.res.Steps[:0]
	for _, st := range r.steps {
		to := st.to
		if st.applied && !st.undone {
			to = r.since()
		}
		r.res.Steps = append(r.res.Steps, StepResult{StepRef: st.StepRef, Target: st.resolved,
			Applied: st.applied, From: st.from, To: to, Fired: st.fired, Evidence: st.evidence, Error: strings.Join(st.errs, "; ")})
	}
	r.res.Errors = nil
	for _, e := range unjoin(err) {
		r.res.Errors = append(r.res.Errors, e.Error())
	}
	return r.res
}

// unjoin lists the errors errors.Join put together.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
