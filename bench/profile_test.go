package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud"
)

func TestProfilesValid(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Profiles() {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if seen[p.Name] || p.Description == "" || len(p.Sources) == 0 {
			t.Errorf("%s: duplicate, or without description or sources", p.Name)
		}
		seen[p.Name] = true
		got, err := ProfileByName(p.Name)
		if err != nil || got.Name != p.Name {
			t.Errorf("ProfileByName(%s) = %v, %v", p.Name, got.Name, err)
		}
	}
	for _, name := range []string{"default", "fast", "slow"} {
		if !seen[name] {
			t.Errorf("no %s profile", name)
		}
	}
	if _, err := ProfileByName("nope"); err == nil || !strings.Contains(err.Error(), "default, fast, slow") {
		t.Errorf("unknown profile: %v", err)
	}
	d, f, s := defaultProfile(), fastProfile(), slowProfile()
	if !(f.AttachDelay < d.AttachDelay && d.AttachDelay < s.AttachDelay) || !(f.maxCallLatency() < d.maxCallLatency() && d.maxCallLatency() < s.maxCallLatency()) {
		t.Errorf("fast < default < slow does not hold: attach %v %v %v", f.AttachDelay, d.AttachDelay, s.AttachDelay)
	}
	for _, k := range []string{"attachDelay", "metadataLag", "latency"} {
		if d.Sources[k] == "" {
			t.Errorf("default profile does not say where %s comes from", k)
		}
	}
}

func TestProfileValidateRejects(t *testing.T) {
	ok := func() Profile { return fastProfile() }
	for name, mut := range map[string]func(*Profile){
		"no name":        func(p *Profile) { p.Name = "" },
		"negative delay": func(p *Profile) { p.AttachDelay = -time.Second },
		"no default":     func(p *Profile) { p.Latency = map[string]ActionLatency{"CreateNetworkInterface": {Base: 1}} },
		"unknown action": func(p *Profile) { p.Latency["CreateNetworkInterfaces"] = ActionLatency{Base: 1} },
		"negative jitter": func(p *Profile) {
			p.Latency[DefaultAction] = ActionLatency{Base: time.Millisecond, Jitter: -time.Millisecond}
		},
	} {
		p := ok()
		mut(&p)
		if err := p.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestProfileFaults checks that every action gets its latency: its own
// entry or the default one.
func TestProfileFaults(t *testing.T) {
	p := defaultProfile()
	faults := p.faults()
	if len(faults) != len(actionNames()) {
		t.Fatalf("%d faults for %d actions", len(faults), len(actionNames()))
	}
	by := map[string]fakecloud.Fault{}
	for _, f := range faults {
		by[f.Action] = f
	}
	if f := by["CreateNetworkInterface"]; f.Latency.D() != p.Latency["CreateNetworkInterface"].Base || f.Jitter.D() != p.Latency["CreateNetworkInterface"].Jitter {
		t.Errorf("CreateNetworkInterface: %+v", f)
	}
	if f := by["ModifyNetworkInterfaceAttribute"]; f.Latency.D() != p.Latency[DefaultAction].Base || f.Kind != fakecloud.FaultLatency {
		t.Errorf("an action without an entry gets %+v, want the default", f)
	}
	if n := len(fixedDelayProfile(0).faults()); n != 0 {
		t.Errorf("a zero latency installs %d faults", n)
	}
}

// TestHarnessAppliesProfile checks the world of a harness: the profile's
// delays in the settings, its latencies as faults, the throttle window
// scaled with the run.
func TestHarnessAppliesProfile(t *testing.T) {
	h, err := NewHarness(context.Background(), HarnessOptions{Profile: slowProfile(), Seed: 3, TimeScale: 0.5,
		ThrottleWindow: 10 * time.Second, Throttle: map[string]int{"*": 7}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	s := h.Cloud.Settings()
	if s.AttachDelay.D() != 6*time.Second || s.MetadataLag.D() != 5*time.Second || s.ConsistencyWindow.D() != 2*time.Second {
		t.Errorf("delays not applied (fakecloud scales them itself): %+v", s)
	}
	if s.ThrottleWindow.D() != 5*time.Second || s.Throttle["*"] != 7 {
		t.Errorf("throttle window %v (want 10s × 0.5), budgets %v", s.ThrottleWindow, s.Throttle)
	}
	if n := len(h.Cloud.Faults()); n != len(actionNames()) {
		t.Errorf("%d latency faults installed, want %d", n, len(actionNames()))
	}
	if h.Real(10*time.Second) != 5*time.Second || h.Sim(time.Second) != 2*time.Second {
		t.Errorf("time conversion: %v %v", h.Real(10*time.Second), h.Sim(time.Second))
	}
}
