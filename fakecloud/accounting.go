package fakecloud

import (
	"sort"
	"sync"
)

// CallFilter selects calls; empty fields match anything.
type CallFilter struct {
	Action      string
	AccessKeyID string
	InstanceID  string
	Outcome     string
}

type callKey struct {
	action, ak, instance, outcome string
}

// accounting keeps the call counters.
type accounting struct {
	mu     sync.Mutex
	counts map[callKey]int64
}

func newAccounting() *accounting { return &accounting{counts: map[callKey]int64{}} }

func (a *accounting) add(action, ak, instance, outcome string) {
	a.mu.Lock()
	a.counts[callKey{action, ak, instance, outcome}]++
	a.mu.Unlock()
}

// Calls returns every counter, ordered by action, caller and outcome.
func (c *Cloud) Calls() []CallStat {
	a := c.calls
	a.mu.Lock()
	out := make([]CallStat, 0, len(a.counts))
	for k, n := range a.counts {
		out = append(out, CallStat{Action: k.action, AccessKeyID: k.ak, InstanceID: k.instance, Outcome: k.outcome, Count: n})
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

// CallCount sums the counters that match f.
func (c *Cloud) CallCount(f CallFilter) int64 {
	a := c.calls
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

// ResetCalls zeroes every counter.
func (c *Cloud) ResetCalls() {
	c.calls.mu.Lock()
	c.calls.counts = map[callKey]int64{}
	c.calls.mu.Unlock()
}
