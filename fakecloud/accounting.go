package fakecloud

import (
	"sort"
	"sync"
)

// CallFilter selects calls; empty fields match anything, except Service:
// "" selects API calls, ServiceMetadata metadata reads.
type CallFilter struct {
	Service     string
	Action      string
	AccessKeyID string
	InstanceID  string
	Outcome     string
}

type callKey struct {
	action, ak, instance, outcome string
}

// accounting keeps the call counters of one service. The API's are
// counted apart from metadata reads, so that what tests, benchmarks and
// the demo report as cloud calls stays the API's.
type accounting struct {
	service string
	// maxKeys bounds the distinct counters (0: no bound). Metadata paths
	// come from the client, so a client asking for made-up paths would
	// otherwise grow the map without end; past the bound new paths are
	// counted as otherAction.
	maxKeys int
	mu      sync.Mutex
	counts  map[callKey]int64
}

// otherAction is where counters past an accounting's bound go.
const otherAction = "{other}"

// maxMetadataKeys bounds the metadata read counters and call indexes;
// a lab reads a few dozen paths per instance.
const maxMetadataKeys = 1 << 16

func newAccounting(service string, maxKeys int) *accounting {
	return &accounting{service: service, maxKeys: maxKeys, counts: map[callKey]int64{}}
}

func (a *accounting) add(action, ak, instance, outcome string) {
	k := callKey{action, ak, instance, outcome}
	a.mu.Lock()
	if _, ok := a.counts[k]; !ok && a.maxKeys > 0 && len(a.counts) >= a.maxKeys {
		k.action = otherAction
	}
	a.counts[k]++
	a.mu.Unlock()
}

// stats returns every counter, ordered by action, caller and outcome.
func (a *accounting) stats() []CallStat {
	a.mu.Lock()
	out := make([]CallStat, 0, len(a.counts))
	for k, n := range a.counts {
		out = append(out, CallStat{Service: a.service, Action: k.action, AccessKeyID: k.ak, InstanceID: k.instance, Outcome: k.outcome, Count: n})
	}
	a.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.Action != y.Action {
			return x.Action < y.Action
		}
		if x.InstanceID != y.InstanceID {
			return x.InstanceID < y.InstanceID
		}
		if x.AccessKeyID != y.AccessKeyID {
			return x.AccessKeyID < y.AccessKeyID
		}
		return x.Outcome < y.Outcome
	})
	return out
}

func (a *accounting) reset() {
	a.mu.Lock()
	a.counts = map[callKey]int64{}
	a.mu.Unlock()
}

// Calls returns every API call counter, ordered by action, caller and
// outcome.
func (c *Cloud) Calls() []CallStat { return c.calls.stats() }

// MetadataCalls returns every metadata read counter, ordered by path,
// instance and outcome.
func (c *Cloud) MetadataCalls() []CallStat { return c.metaCalls.stats() }

// CallCount sums the counters that match f.
func (c *Cloud) CallCount(f CallFilter) int64 {
	a := c.calls
	if f.Service == ServiceMetadata {
		a = c.metaCalls
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	for k, v := range a.counts {
		if (f.Action == "" || f.Action == k.action) && (f.AccessKeyID == "" || f.AccessKeyID == k.ak) &&
			(f.InstanceID == "" || f.InstanceID == k.instance) && (f.Outcome == "" || f.Outcome == k.outcome) {
			n += v
		}
	}
	return n
}

// ResetCalls zeroes every counter, metadata reads' included.
func (c *Cloud) ResetCalls() {
	c.calls.reset()
	c.metaCalls.reset()
}
