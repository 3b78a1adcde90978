package chaos

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

func TestPlanJSONRoundTrip(t *testing.T) {
	for _, p := range Catalogue() {
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePlan(data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", p.Name, err, data)
		}
		if !reflect.DeepEqual(back, p) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", p.Name, back, p)
		}
	}
}

func TestParsePlanFromFile(t *testing.T) {
	const file = `{"name": "mine", "steps": [
		{"start": "10s", "duration": "1m", "kind": "cloud-errors", "target": "node:lab-1",
		 "params": {"actions": ["AttachNetworkInterface"], "percent": 50, "code": "Throttling"}}]}`
	p, err := ParsePlan([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := Step{Start: admin.Duration(10 * time.Second), Duration: admin.Duration(time.Minute), Kind: CloudErrors,
		Target: "node:lab-1", Params: Params{Actions: []string{"AttachNetworkInterface"}, Percent: 50, Code: "Throttling"}}
	if !reflect.DeepEqual(p.Steps, []Step{want}) {
		t.Fatalf("steps %+v, want %+v", p.Steps, want)
	}
}

// Every refusal names what is wrong (and the step, where there is one).
func TestPlanRefusals(t *testing.T) {
	const ok = `"start": "0s", "duration": "1m"`
	for _, c := range []struct{ name, json, want string }{
		{"unknown plan field", `{"name": "p", "stepz": []}`, `unknown field "stepz"`},
		{"unknown param", `{"name": "p", "steps": [{` + ok + `, "kind": "cloud-errors", "params": {"percnt": 5}}]}`, `unknown field "percnt"`},
		{"trailing data", `{"name": "p", "steps": [{` + ok + `, "kind": "slow-async"}]} {}`, "data after"},
		{"bad name", `{"name": "My Plan", "steps": [{` + ok + `, "kind": "slow-async"}]}`, `plan name "My Plan"`},
		{"no steps", `{"name": "p", "steps": []}`, "no steps"},
		{"unknown kind", `{"name": "p", "steps": [{` + ok + `, "kind": "meteor"}]}`, `step 1 (meteor): unknown kind`},
		{"zero duration", `{"name": "p", "steps": [{"start": "1s", "duration": "0s", "kind": "slow-async"}]}`, "duration > 0"},
		{"negative duration", `{"name": "p", "steps": [{"start": "1s", "duration": "-1s", "kind": "slow-async"}]}`, "must not be negative"},
		{"param of another kind", `{"name": "p", "steps": [{` + ok + `, "kind": "kill-terwayd", "params": {"percent": 5}}]}`,
			`step 1 (kill-terwayd): param "percent" does not apply`},
		{"target of another kind", `{"name": "p", "steps": [{` + ok + `, "kind": "slow-async", "target": "random-node"}]}`,
			`target "random-node": slow-async takes all`},
		{"target without name", `{"name": "p", "steps": [{` + ok + `, "kind": "kill-terwayd", "target": "node"}]}`, "node:NAME"},
		{"percent", `{"name": "p", "steps": [{` + ok + `, "kind": "cloud-errors", "params": {"percent": 150}}]}`, "percent 150"},
		{"lost", `{"name": "p", "steps": [{` + ok + `, "kind": "lost-answers", "params": {"lost": "maybe"}}]}`, `lost "maybe"`},
		{"mode", `{"name": "p", "steps": [{` + ok + `, "kind": "metadata-outage", "params": {"mode": "slow"}}]}`, `mode "slow"`},
		{"action", `{"name": "p", "steps": [{` + ok + `, "kind": "cloud-errors", "params": {"actions": ["attach"]}}]}`, `action "attach"`},
		{"star not alone", `{"name": "p", "steps": [{` + ok + `, "kind": "cloud-errors", "params": {"actions": ["*", "A"]}}]}`, "stands alone"},
		{"kills", `{"name": "p", "steps": [{` + ok + `, "kind": "kill-terwayd", "params": {"kills": 3000}}]}`, "kills 3000"},
		{"same name", `{"name": "p", "steps": [{"name": "x", ` + ok + `, "kind": "slow-async"}, {"name": "x", "start": "2m", "duration": "1m", "kind": "consistency"}]}`,
			`name "x" used twice`},
		{"overlap", `{"name": "p", "steps": [{` + ok + `, "kind": "slow-async"}, {"start": "30s", "duration": "1m", "kind": "slow-async"}]}`,
			"steps 1 and 2 (slow-async) overlap"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePlan([]byte(c.json))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// Steps of an exclusive kind may follow each other back to back.
func TestPlanBackToBack(t *testing.T) {
	p := plan("p", "", 1, 1, step(SlowAsync, 0, 60, "", Params{}), step(SlowAsync, 60, 60, "", Params{}))
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
}

// The catalogue's plans are valid, uniquely named, state their
// invariants, and cover every fault kind.
func TestCatalogue(t *testing.T) {
	covered := map[Kind]bool{}
	seen := map[string]bool{}
	for _, p := range Catalogue() {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if seen[p.Name] || p.Description == "" || p.Invariants.AuditClean == 0 || p.Invariants.PodsReady == 0 || p.Workload.Pods < 30 {
			t.Errorf("%s: duplicate, or no description, invariant limits or rollout of 30 pods: %+v", p.Name, p)
		}
		seen[p.Name] = true
		for _, s := range p.Steps {
			covered[s.Kind] = true
		}
	}
	for _, k := range Kinds() {
		if !covered[k] {
			t.Errorf("no plan in the catalogue uses %s", k)
		}
	}
	if _, err := Lookup("kill-terwayd"); err != nil {
		t.Fatal(err)
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "cloud-errors") {
		t.Fatalf("Lookup(nope): %v, want an error listing the plans", err)
	}
}

// The plans whose faults are on the allocation path start on cold pools,
// where a warm lab's pools would answer the rollout without a call
// (vswitch-exhaustion's too: three nodes with max_pool_size 10 served its
// 30 pods from idle addresses); the lost-answers-timeout plan loses
// enough answers to be seen.
func TestCatalogueColdPools(t *testing.T) {
	cold := map[string]bool{"cloud-errors": true, "lost-answers": true, "lost-answers-timeout": true, "consistency": true,
		"slow-async": true, "throttle-storm": true, "storm": true, "vswitch-exhaustion": true}
	for _, p := range Catalogue() {
		if p.Workload.ColdPools != cold[p.Name] {
			t.Errorf("%s: cold pools %v, want %v", p.Name, p.Workload.ColdPools, cold[p.Name])
		}
	}
	p, err := Lookup("lost-answers-timeout")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Steps[0].Params.Percent; got != 50 {
		t.Errorf("lost-answers-timeout loses %v%%, want 50%%", got)
	}
	s, err := Resolve(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "on cold pools") {
		t.Errorf("the schedule does not say the pools start cold:\n%s", b.String())
	}
	p.Workload.Restarts = -1
	if err := p.Validate(); err == nil {
		t.Error("negative restarts accepted")
	}
}
