package chaos

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// testEngine is an engine on fakes.
type testEngine struct {
	*Engine
	cloud *fakeCloud
	lab   *fakeLab
	op    *fakeOperator
}

func newTestEngine() *testEngine {
	e := &testEngine{cloud: newFakeCloud(), lab: &fakeLab{}, op: &fakeOperator{}}
	e.Engine = &Engine{Cloud: e.cloud, Lab: e.lab, Operator: e.op, Nodes: testNodes}
	return e
}

// run resolves p with seed and runs it in a bubble, where time is virtual.
func (e *testEngine) run(t *testing.T, p Plan, seed int64) (*Result, error) {
	t.Helper()
	s, err := Resolve(p, seed)
	if err != nil {
		t.Fatal(err)
	}
	var res *Result
	synctest.Test(t, func(t *testing.T) { res, err = e.Run(context.Background(), s) })
	return res, err
}

// checkRestored fails unless the fakes are as before the run: no fault,
// the settings back, no vSwitch drained, every stopped node started.
func (e *testEngine) checkRestored(t *testing.T) {
	t.Helper()
	c := e.cloud
	if len(c.faults) != 0 || len(c.drained) != 0 {
		t.Errorf("left behind: faults %v, drained vSwitches %v", c.faults, c.drained)
	}
	if want := newFakeCloud().settings; !reflect.DeepEqual(c.settings, want) {
		t.Errorf("settings after the run %+v, want exactly %+v", c.settings, want)
	}
	stops := 0
	for _, l := range e.lab.log {
		switch {
		case strings.HasPrefix(l, "stop "):
			stops++
		case strings.HasPrefix(l, "start "):
			stops--
		}
	}
	if stops != 0 {
		t.Errorf("stopped nodes not started again: %v", e.lab.log)
	}
}

// Every catalogue plan runs on the fakes: each step is applied at its
// offset, undone at its end, and proven.
func TestRunCatalogue(t *testing.T) {
	for _, p := range Catalogue() {
		t.Run(p.Name, func(t *testing.T) {
			e := newTestEngine()
			res, err := e.run(t, p, 3)
			e.checkRestored(t)
			for i, st := range res.Steps {
				ps := p.Steps[i]
				if !st.Applied || st.From.D() != ps.Start.D() || (st.To.D() != ps.End()) {
					t.Errorf("step %s: band %s..%s (applied %v), want %s..%s", st.Name, st.From.D(), st.To.D(), st.Applied, ps.Start.D(), ps.End())
				}
				if st.Fired == 0 || st.Evidence == "" {
					t.Errorf("step %s: fired %d (%s)", st.Name, st.Fired, st.Evidence)
				}
			}
			if err != nil {
				t.Errorf("run: %v\n%+v", err, res)
			}
		})
	}
}

// The same seed replays the same actions on the same lab; another seed
// chooses other targets.
func TestRunReplays(t *testing.T) {
	// run returns what the cloud saw and which targets were hit.
	run := func(seed int64) (cloud, targets []string) {
		e := newTestEngine()
		if _, err := e.run(t, mixed(), seed); err != nil {
			t.Fatal(err)
		}
		return e.cloud.log, slices.Concat(e.lab.log, e.op.log)
	}
	c1, t1 := run(11)
	c2, t2 := run(11)
	if !reflect.DeepEqual(c1, c2) || !reflect.DeepEqual(t1, t2) {
		t.Fatalf("seed 11 twice:\n%v %v\n%v %v", c1, t1, c2, t2)
	}
	for seed := int64(12); seed < 20; seed++ {
		if _, t3 := run(seed); !reflect.DeepEqual(t1, t3) {
			return
		}
	}
	t.Fatal("eight other seeds all chose the targets seed 11 chose")
}

// The timeline says what was done when.
func TestRunTimeline(t *testing.T) {
	e := newTestEngine()
	res, err := e.run(t, plan("t", "", 1, 1, step(KillTerwayd, 10, 60, "node:lab-1", Params{Kills: 2}),
		step(SlowAsync, 30, 60, "", Params{})), 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range res.Events {
		got = append(got, ev.What+" "+ev.Step)
		if ev.Step == "2-slow-async" && ((ev.What == EventApply && ev.At.D() != 30*time.Second) || (ev.What == EventUndo && ev.At.D() != 90*time.Second)) {
			t.Errorf("%s of %s at %s", ev.What, ev.Step, ev.At.D())
		}
	}
	want := []string{"apply 1-kill-terwayd", "kill 1-kill-terwayd", "kill 1-kill-terwayd", "apply 2-slow-async", "undo 2-slow-async"}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	slices.Sort(want)
	if !reflect.DeepEqual(sorted, want) {
		t.Fatalf("events %v, want %v in time order", got, want)
	}
	if res.Steps[0].Target != "lab-1" || res.Steps[0].Fired != 2 || !strings.Contains(res.Steps[0].Evidence, "killed terwayd on lab-1") {
		t.Errorf("kill step: %+v", res.Steps[0])
	}
	if e.lab.log[0] != `kill terwayd "lab-1" 0s` {
		t.Errorf("lab log %v", e.lab.log)
	}
}

// A kill waits for a terwayd in the kubelet's back-off only until its
// step's window ends: the run keeps to its schedule, the kills that could
// not happen are said and not counted as fired.
func TestRunKillWaitsOnlyInItsWindow(t *testing.T) {
	e := newTestEngine()
	e.lab.backoff = map[string]bool{"lab-1": true}
	res, err := e.run(t, plan("t", "", 1, 1, step(KillTerwayd, 10, 60, "node:lab-1", Params{Kills: 2})), 1)
	if err == nil || !strings.Contains(err.Error(), "never fired") {
		t.Fatalf("error %v, want the step named as never fired", err)
	}
	for _, ev := range res.Events {
		if ev.At.D() > 70*time.Second+killGrace {
			t.Errorf("%s of %s at %s: after the window (70s) and the grace", ev.What, ev.Step, ev.At.D())
		}
	}
	if st := res.Steps[0]; st.Fired != 0 || !strings.Contains(st.Evidence, "no terwayd ran on lab-1 to kill before the step's window ended") {
		t.Errorf("kill step: %+v", st)
	}
}

// twoSteps changes settings first, then installs faults while the first
// step is in place.
func twoSteps() Plan {
	return plan("two", "", 1, 1, step(SlowAsync, 0, 120, "", Params{}), step(CloudErrors, 10, 60, "", Params{}))
}

func TestRunUndoesOnFailure(t *testing.T) {
	e := newTestEngine()
	s, _ := Resolve(twoSteps(), 1)
	e.cloud.failAdd = s.Steps[1].Faults[1].Name
	res, err := e.run(t, twoSteps(), 1)
	if err == nil || !strings.Contains(err.Error(), "apply step 2-cloud-errors") {
		t.Fatalf("error %v, want the failed apply named", err)
	}
	e.checkRestored(t)
	if res.Steps[1].Error == "" || res.Steps[0].To.D() != 10*time.Second {
		t.Errorf("steps %+v: want the failure recorded and the first undone at 10s", res.Steps)
	}
	if !slices.Contains(e.cloud.log, "remove "+s.Steps[1].Faults[0].Name) {
		t.Errorf("the fault installed before the failure was not removed: %v", e.cloud.log)
	}
}

func TestRunUndoesOnPanic(t *testing.T) {
	e := newTestEngine()
	s, _ := Resolve(twoSteps(), 1)
	e.cloud.panicAdd = s.Steps[1].Faults[2].Name
	synctest.Test(t, func(t *testing.T) {
		defer func() {
			if p := recover(); p == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		e.Run(context.Background(), s)
	})
	e.checkRestored(t)
}

func TestRunUndoesOnCancel(t *testing.T) {
	e := newTestEngine()
	p := plan("c", "", 1, 1, step(NodeStopStart, 0, 120, "", Params{}), step(ThrottleStorm, 10, 60, "", Params{}),
		step(CloudErrors, 100, 60, "", Params{}))
	s, _ := Resolve(p, 1)
	var res *Result
	var err error
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err = e.Run(ctx, s)
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
	e.checkRestored(t)
	if res.Steps[2].Applied || res.Steps[2].Evidence != "not reached" || res.Steps[0].To.D() != 30*time.Second {
		t.Errorf("steps %+v", res.Steps)
	}
}

// A step whose fault never fired fails the run, named.
func TestRunUnfiredStepFails(t *testing.T) {
	e := newTestEngine()
	e.cloud.quiet = true
	res, err := e.run(t, twoSteps(), 1)
	for _, name := range []string{"1-slow-async", "2-cloud-errors"} {
		if err == nil || !strings.Contains(err.Error(), "step "+name) || !strings.Contains(err.Error(), "never fired") {
			t.Errorf("error %v, want %s named as never fired", err, name)
		}
	}
	if res.OK() || !strings.Contains(res.Steps[1].Evidence, "0 calls hit by faults chaos-") {
		t.Errorf("result %+v", res.Steps)
	}
	e.checkRestored(t)
}

// An out-of-band step with nothing to act on did not fire.
func TestRunNothingToActOn(t *testing.T) {
	e := newTestEngine()
	e.cloud.world.ENIs = nil
	_, err := e.run(t, plan("o", "", 1, 1, step(IPUnassignOOB, 0, 10, "", Params{})), 1)
	if err == nil || !strings.Contains(err.Error(), "no secondary address on any node") {
		t.Fatalf("error %v", err)
	}
}

func TestRunPreflight(t *testing.T) {
	e := newTestEngine()
	e.Lab = nil
	s, _ := Resolve(plan("k", "", 1, 1, step(KillTerwayd, 0, 10, "", Params{})), 1)
	if _, err := e.Run(context.Background(), s); err == nil || !strings.Contains(err.Error(), "Engine.Lab") {
		t.Fatalf("error %v, want the missing client named", err)
	}
	e = newTestEngine()
	s, _ = Resolve(plan("k", "", 1, 1, step(KillTerwayd, 0, 10, "node:lab-9", Params{})), 1)
	if _, err := e.Run(context.Background(), s); err == nil || !strings.Contains(err.Error(), `no node "lab-9"`) {
		t.Fatalf("error %v, want the unknown node named", err)
	}
}

// Released nodes are not chosen again; out-of-band steps act on the
// chosen ENIs and addresses only.
func TestRunTargets(t *testing.T) {
	e := newTestEngine()
	res, err := e.run(t, plan("r", "", 1, 1, step(NodeRelease, 0, 10, "node:lab-1", Params{}),
		step(KillTerwayd, 10, 10, TargetAll, Params{Kills: 1}),
		step(ENIDetachOOB, 20, 10, TargetRandomENI, Params{Count: 5}),
		step(IPUnassignOOB, 30, 10, "eni:eni-a", Params{Count: 2})), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.lab.log; !reflect.DeepEqual(got, []string{"release lab-1", `kill terwayd "lab-2" 0s`}) {
		t.Errorf("lab log %v", got)
	}
	wantOp := []string{"detach eni-b i-2", "unassign eni-a [192.168.0.10 192.168.0.11]"}
	if !reflect.DeepEqual(e.op.log, wantOp) {
		t.Errorf("operator log %v, want %v", e.op.log, wantOp)
	}
	if res.Steps[2].Fired != 1 || res.Steps[3].Fired != 2 {
		t.Errorf("steps %+v", res.Steps)
	}
}
