package profile

import (
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud"
)

func TestProfilesValid(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All() {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if seen[p.Name] || p.Description == "" || len(p.Sources) == 0 {
			t.Errorf("%s: duplicate, or without description or sources", p.Name)
		}
		seen[p.Name] = true
		got, err := ByName(p.Name)
		if err != nil || got.Name != p.Name {
			t.Errorf("ByName(%s) = %v, %v", p.Name, got.Name, err)
		}
	}
	for _, name := range []string{"default", "fast", "slow"} {
		if !seen[name] {
			t.Errorf("no %s profile", name)
		}
	}
	if _, err := ByName("nope"); err == nil || !strings.Contains(err.Error(), "default, fast, slow") {
		t.Errorf("unknown profile: %v", err)
	}
	d, f, s := Default(), fastProfile(), slowProfile()
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
	p := Default()
	faults := p.Faults()
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
	if n := len(FixedDelay(0).Faults()); n != 0 {
		t.Errorf("a zero latency installs %d faults", n)
	}
}
