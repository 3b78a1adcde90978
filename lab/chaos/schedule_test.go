package chaos

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// mixed has a step of every kind that draws something at random.
func mixed() Plan {
	return plan("mixed", "every random choice", 1, 1,
		step(CloudErrors, 0, 60, TargetRandomNode, Params{}),
		step(KillTerwayd, 10, 120, TargetRandomNode, Params{Kills: 4}),
		step(VSwitchExhaustion, 20, 60, TargetRandomVSwitch, Params{}),
		step(ENIDetachOOB, 30, 60, TargetRandomENI, Params{}),
		step(MetadataOutage, 40, 60, "", Params{Mode: "hang"}))
}

func TestResolveReplays(t *testing.T) {
	a, err := Resolve(mixed(), 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Resolve(mixed(), 42)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed resolved two different schedules")
	}
	c, _ := Resolve(mixed(), 43)
	if c.Run == a.Run {
		t.Error("different seeds, same run ID")
	}
	for i := range a.Steps {
		x, y := a.Steps[i], c.Steps[i]
		if x.Pick != 0 && x.Pick == y.Pick {
			t.Errorf("step %s: seeds 42 and 43 drew the same pick", x.Name)
		}
		if len(x.Moments) > 0 && reflect.DeepEqual(x.Moments, y.Moments) {
			t.Errorf("step %s: seeds 42 and 43 drew the same kill moments", x.Name)
		}
		for j := range x.Faults {
			if x.Faults[j].Seed == y.Faults[j].Seed {
				t.Errorf("fault %s: seeds 42 and 43 drew the same fakecloud seed", x.Faults[j].Name)
			}
		}
	}
}

// Adding a step leaves the choices of the others as they were.
func TestResolveStepsIndependent(t *testing.T) {
	p := mixed()
	a, _ := Resolve(p, 7)
	p.Steps = append(p.Steps, step(KillTerwayd, 0, 10, "", Params{}))
	b, _ := Resolve(p, 7)
	if !reflect.DeepEqual(a.Steps, b.Steps[:len(a.Steps)]) {
		t.Fatal("adding a step changed the others' choices")
	}
}

func TestResolveChoices(t *testing.T) {
	s, err := Resolve(mixed(), 1)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, st := range s.Steps {
		for _, f := range st.Faults {
			if names[f.Name] || !strings.HasPrefix(f.Name, "chaos-"+s.Run+"-") || f.Seed <= 0 {
				t.Errorf("fault %q: duplicate name, not of run %s, or seed %d", f.Name, s.Run, f.Seed)
			}
			names[f.Name] = true
		}
		if st.Duration() <= 0 {
			t.Errorf("step %s: duration %s", st.Name, st.Duration())
		}
		for _, m := range st.Moments {
			if m < st.Start || m >= st.End {
				t.Errorf("step %s: kill moment %s outside [%s, %s)", st.Name, m.D(), st.Start.D(), st.End.D())
			}
		}
	}
	if len(names) != 4 {
		t.Errorf("%d faults, want 3 (cloud-errors' actions) + 1 (metadata)", len(names))
	}
	if got := len(s.Steps[1].Moments); got != 4 {
		t.Errorf("kill-terwayd: %d moments, want 4", got)
	}
	if s.Plan.Workload.Pods != DefaultPods || s.Steps[0].Params.Percent != 30 || s.Steps[3].Params.Count != 1 {
		t.Errorf("defaults not filled in: %+v", s)
	}
}

func TestScheduleOutput(t *testing.T) {
	s, _ := Resolve(mixed(), 5)
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"plan mixed, seed 5", "30 pods", "1-cloud-errors", "random-node (pick ", "kills at ",
		"chaos-" + s.Run + "-1-{1..3}", "metadata hang"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := s.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Schedule
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, s) {
		t.Fatalf("JSON round trip changed the schedule:\n%s", js.String())
	}
}
