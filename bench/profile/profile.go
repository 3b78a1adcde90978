// Package profile holds the cloud latency profiles of the benchmarks:
// fakecloud's asynchronous delays and a latency with seeded jitter for
// every API action, as data (Profile) that a run applies to fakecloud
// and records by name. The built-in ones are default, fast and slow
// (bench/README.md cites where each figure comes from), and FixedDelay
// is the shape of Cilium's mock.
package profile

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/terway-sim/terway/fakecloud"
)

// Profile is a named set of cloud timings: fakecloud's asynchronous
// delays (attach, detach, delete, metadata lag, consistency window) and a
// latency, with seeded jitter, for every API action. It is data: a run
// applies it to fakecloud through Settings and per-action latency faults,
// and records its name.
type Profile struct {
	Name        string
	Description string
	// Delays are in simulated (world) time; fakecloud scales them by the
	// run's time scale.
	AttachDelay       time.Duration
	DetachDelay       time.Duration
	DeleteDelay       time.Duration
	MetadataLag       time.Duration
	ConsistencyWindow time.Duration
	// Latency is the time each API action takes before it answers, by
	// action name; DefaultAction covers every action not listed.
	Latency map[string]ActionLatency
	// Sources say where the figures come from ("assumed: …" where no
	// published figure exists), by field or action name.
	Sources map[string]string
}

// DefaultAction is the Latency key for actions without their own entry.
const DefaultAction = "*"

// ActionLatency is one action's latency: Base plus a uniform jitter in
// [0, Jitter), drawn by fakecloud from (run seed, action, caller, call
// index), so that a run with the same seed replays the same latencies.
type ActionLatency struct {
	Base   time.Duration
	Jitter time.Duration
}

// describeActions are the read-only actions of the ENI life cycle.
var describeActions = []string{"DescribeNetworkInterfaces", "DescribeNetworkInterfaceAttribute",
	"DescribeInstances", "DescribeInstanceAttribute", "DescribeVSwitches", "DescribeVSwitchAttributes", "DescribeVpcs"}

// All returns the built-in profiles: default, fast and slow.
func All() []Profile {
	return []Profile{Default(), fastProfile(), slowProfile()}
}

// ByName returns the built-in profile called name.
func ByName(name string) (Profile, error) {
	var names []string
	for _, p := range All() {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Profile{}, fmt.Errorf("unknown profile %q (%s)", name, strings.Join(names, ", "))
}

func withDescribes(m map[string]ActionLatency, l ActionLatency) map[string]ActionLatency {
	for _, a := range describeActions {
		m[a] = l
	}
	return m
}

// Default is what a node in a healthy region sees, and the profile a
// run without one uses. Alibaba
// publishes no API latency figures; the per-action figures are assumed
// (tens of milliseconds for a regional read, a few hundred for calls that
// allocate), and the delays are chosen so that the daemon's polls (first
// WaitENIStatus poll right after Attach, the next one 3–4.5 s later) fall
// clearly before or after each transition: call counts then do not depend
// on timing noise.
func Default() Profile {
	return Profile{
		Name:              "default",
		Description:       "realistic healthy region: attach 2s, metadata lag 1s, reads ~60ms, allocating calls 150-400ms",
		AttachDelay:       2 * time.Second,
		DetachDelay:       2 * time.Second,
		DeleteDelay:       time.Second,
		MetadataLag:       time.Second,
		ConsistencyWindow: 0,
		Latency: withDescribes(map[string]ActionLatency{
			DefaultAction:                {Base: 80 * time.Millisecond, Jitter: 40 * time.Millisecond},
			"DescribeInstanceTypes":      {Base: 120 * time.Millisecond, Jitter: 60 * time.Millisecond},
			"CreateNetworkInterface":     {Base: 250 * time.Millisecond, Jitter: 150 * time.Millisecond},
			"AttachNetworkInterface":     {Base: 120 * time.Millisecond, Jitter: 60 * time.Millisecond},
			"DetachNetworkInterface":     {Base: 120 * time.Millisecond, Jitter: 60 * time.Millisecond},
			"DeleteNetworkInterface":     {Base: 120 * time.Millisecond, Jitter: 60 * time.Millisecond},
			"AssignPrivateIpAddresses":   {Base: 150 * time.Millisecond, Jitter: 100 * time.Millisecond},
			"UnassignPrivateIpAddresses": {Base: 120 * time.Millisecond, Jitter: 60 * time.Millisecond},
		}, ActionLatency{Base: 40 * time.Millisecond, Jitter: 40 * time.Millisecond}),
		Sources: map[string]string{
			"attachDelay": "Alibaba's ENI-attach best practice polls first after 2 s, then every 1 s (shared/reference/instance-types.md); " +
				"fakecloud's default. AWS is slower (eniAttachTime 10 s, anchors §1.2)",
			"detachDelay":       "assumed equal to attach",
			"deleteDelay":       "assumed; fakecloud's default",
			"metadataLag":       "assumed; Terway polls metadata every 1 s for up to 10 s (terway-facts §2.3); AWS reports up to 18 s (anchors §1.9)",
			"consistencyWindow": "none: Alibaba documents CreateNetworkInterface as synchronous, the new ENI is Available at once (help.aliyun.com/document_detail/58504.html, shared/reference/instance-types.md); fakecloud's default",
			"latency":           "assumed: no public per-action figures exist; reads 40-80 ms, allocating calls 150-400 ms (the SDK allows 16 s for Create/Attach, aliyun-wire §3.6)",
		},
	}
}

func fastProfile() Profile {
	return Profile{
		Name:              "fast",
		Description:       "an idealised cloud: every call 5-10ms, attach 200ms, metadata lag 100ms",
		AttachDelay:       200 * time.Millisecond,
		DetachDelay:       200 * time.Millisecond,
		DeleteDelay:       100 * time.Millisecond,
		MetadataLag:       100 * time.Millisecond,
		ConsistencyWindow: 0,
		Latency: map[string]ActionLatency{
			DefaultAction: {Base: 5 * time.Millisecond, Jitter: 5 * time.Millisecond},
		},
		Sources: map[string]string{"*": "assumed: a lower bound on what any cloud could do, to isolate the daemon's own costs"},
	}
}

// slowProfile is a region under stress. Attach at 6 s keeps the third
// WaitENIStatus poll (7.5 s or later) clearly after it. It keeps a 2 s
// consistency window after Create, which fakecloud no longer has by
// default, so that the daemon's handling of it stays measured.
func slowProfile() Profile {
	return Profile{
		Name:              "slow",
		Description:       "a region under stress: attach 6s, metadata lag 5s, reads ~300ms, allocating calls 0.8-2.5s",
		AttachDelay:       6 * time.Second,
		DetachDelay:       6 * time.Second,
		DeleteDelay:       3 * time.Second,
		MetadataLag:       5 * time.Second,
		ConsistencyWindow: 2 * time.Second,
		Latency: withDescribes(map[string]ActionLatency{
			DefaultAction:                {Base: 400 * time.Millisecond, Jitter: 200 * time.Millisecond},
			"DescribeInstanceTypes":      {Base: 600 * time.Millisecond, Jitter: 300 * time.Millisecond},
			"CreateNetworkInterface":     {Base: 1500 * time.Millisecond, Jitter: time.Second},
			"AttachNetworkInterface":     {Base: 800 * time.Millisecond, Jitter: 400 * time.Millisecond},
			"DetachNetworkInterface":     {Base: 800 * time.Millisecond, Jitter: 400 * time.Millisecond},
			"DeleteNetworkInterface":     {Base: 800 * time.Millisecond, Jitter: 400 * time.Millisecond},
			"AssignPrivateIpAddresses":   {Base: time.Second, Jitter: 500 * time.Millisecond},
			"UnassignPrivateIpAddresses": {Base: 800 * time.Millisecond, Jitter: 400 * time.Millisecond},
		}, ActionLatency{Base: 250 * time.Millisecond, Jitter: 150 * time.Millisecond}),
		Sources: map[string]string{
			"attachDelay":       "assumed; between Alibaba's documented 2 s first poll and AWS's 10 s eniAttachTime (anchors §1.2)",
			"metadataLag":       "assumed; AWS reports new-ENI metadata after up to 18 s (anchors §1.9)",
			"consistencyWindow": "assumed: Alibaba documents Create as synchronous, but a stressed region is where a client must survive a lagging read (EC2 documents eventual consistency, anchors §1.6)",
			"latency":           "assumed: 5-10x the default profile",
		},
	}
}

// Validate checks that a profile can be applied: a name, no negative
// figures, a default latency, and only actions fakecloud serves.
func (p Profile) Validate() error {
	if p.Name == "" {
		return errors.New("profile without a name")
	}
	for k, d := range map[string]time.Duration{"attachDelay": p.AttachDelay, "detachDelay": p.DetachDelay,
		"deleteDelay": p.DeleteDelay, "metadataLag": p.MetadataLag, "consistencyWindow": p.ConsistencyWindow} {
		if d < 0 {
			return fmt.Errorf("profile %s: %s %v is negative", p.Name, k, d)
		}
	}
	if _, ok := p.Latency[DefaultAction]; !ok {
		return fmt.Errorf("profile %s: no latency for %q (every other action)", p.Name, DefaultAction)
	}
	known := actionNames()
	for a, l := range p.Latency {
		if a != DefaultAction && !slices.Contains(known, a) {
			return fmt.Errorf("profile %s: latency for unknown action %q", p.Name, a)
		}
		if l.Base < 0 || l.Jitter < 0 {
			return fmt.Errorf("profile %s: latency of %s is negative", p.Name, a)
		}
	}
	return nil
}

// actionNames lists the API actions fakecloud serves, without product.
func actionNames() []string {
	var out []string
	for _, a := range fakecloud.Actions() {
		_, name, _ := strings.Cut(a, ":")
		out = append(out, name)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// ApplySettings writes the profile's delays into s (world time).
func (p Profile) ApplySettings(s *fakecloud.Settings) {
	s.AttachDelay = fakecloud.Duration(p.AttachDelay)
	s.DetachDelay = fakecloud.Duration(p.DetachDelay)
	s.DeleteDelay = fakecloud.Duration(p.DeleteDelay)
	s.MetadataLag = fakecloud.Duration(p.MetadataLag)
	s.ConsistencyWindow = fakecloud.Duration(p.ConsistencyWindow)
}

// Faults returns one latency fault per action (the default latency
// expanded over every action without its own entry), in action order.
// Zero latencies get no fault.
func (p Profile) Faults() []fakecloud.Fault {
	var out []fakecloud.Fault
	for _, a := range actionNames() {
		l, ok := p.Latency[a]
		if !ok {
			l = p.Latency[DefaultAction]
		}
		if l.Base == 0 && l.Jitter == 0 {
			continue
		}
		out = append(out, fakecloud.Fault{Name: "profile-latency-" + a, Kind: fakecloud.FaultLatency, Action: a,
			Latency: fakecloud.Duration(l.Base), Jitter: fakecloud.Duration(l.Jitter)})
	}
	return out
}

// maxCallLatency is the longest any single call can take (world time).
func (p Profile) maxCallLatency() time.Duration {
	var m time.Duration
	for _, l := range p.Latency {
		m = max(m, l.Base+l.Jitter)
	}
	return m
}

// FixedDelay is the shape of Cilium's mock: every API call takes exactly
// d and nothing else waits (transitions and metadata are at once).
func FixedDelay(d time.Duration) Profile {
	return Profile{
		Name:        fmt.Sprintf("fixed-%s", d),
		Description: fmt.Sprintf("every API call takes %s, no asynchronous delays (Cilium's mock in BenchmarkAllocDelay*)", d),
		Latency:     map[string]ActionLatency{DefaultAction: {Base: d}},
		Sources:     map[string]string{"*": "cilium pkg/aws/ipam/node_manager_test.go BenchmarkAllocDelay{20,50} (anchors §2.4)"},
	}
}
