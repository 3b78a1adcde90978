package fakecloud

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// validateFault checks f and fills in its defaults (the step of a pause,
// the action of a consistency fault).
func validateFault(f *Fault) error {
	switch f.Kind {
	case FaultError, FaultLostResponse:
		if f.Lost != "" && f.Lost != "error" && f.Lost != "timeout" {
			return fmt.Errorf("fault %s: lost must be \"error\" or \"timeout\"", f.Name)
		}
		if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
			return fmt.Errorf("fault %s: status %d must be 4xx or 5xx", f.Name, f.Status)
		}
	case FaultLatency:
		if f.Latency == 0 && f.Jitter == 0 {
			return fmt.Errorf("fault %s: latency needs latency or jitter", f.Name)
		}
	case FaultConsistency:
		if f.Latency <= 0 && f.Jitter <= 0 {
			return fmt.Errorf("fault %s: consistency needs latency or jitter (how long a new ENI stays hidden)", f.Name)
		}
		if f.Action == "" {
			f.Action = "CreateNetworkInterface"
		}
		if f.Action != "CreateNetworkInterface" {
			return fmt.Errorf("fault %s: consistency applies to CreateNetworkInterface, not %s", f.Name, f.Action)
		}
	case FaultPause:
		if f.Step == "" {
			f.Step = StepBefore
		}
		if f.Step != StepBefore && f.Step != StepAfter {
			return fmt.Errorf("fault %s: step must be %q or %q", f.Name, StepBefore, StepAfter)
		}
	default:
		return fmt.Errorf("fault kind %q must be one of error, latency, lost-response, pause, consistency", f.Kind)
	}
	if f.Probability < 0 || f.Probability > 1 || math.IsNaN(f.Probability) {
		return fmt.Errorf("fault %s: probability must be within [0,1]", f.Name)
	}
	if f.Count < 0 {
		return fmt.Errorf("fault %s: count must not be negative", f.Name)
	}
	return nil
}

// activeFault is an installed fault with its per-caller progress.
type activeFault struct {
	Fault
	order int
	base  map[string]uint64 // caller -> its call index when first matched
	held  int
	gate  chan struct{} // closed when the fault is removed (pauses)
}

type faultSet struct {
	seed  int64
	mu    sync.Mutex
	cond  *sync.Cond
	rules map[string]*activeFault
	order int
	index map[string]uint64 // action|caller -> calls so far
}

func newFaultSet(seed int64) *faultSet {
	f := &faultSet{seed: seed, rules: map[string]*activeFault{}, index: map[string]uint64{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// decision is what the faults say about one call.
type decision struct {
	err     *Fault // fail before applying
	latency time.Duration
	lost    *Fault        // apply, then lose the answer
	hide    time.Duration // a new ENI stays out of Describe answers this long
	before  []*activeFault
	after   []*activeFault
}

// decide records one call of action by caller and returns the faults that
// fire for it.
func (s *faultSet) decide(action, callerKey string, callerIDs ...string) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d decision
	k := action + "|" + callerKey
	idx := s.index[k]
	s.index[k] = idx + 1
	if len(s.rules) == 0 {
		return d
	}
	for _, r := range s.sorted() {
		if r.Action != "" && r.Action != action {
			continue
		}
		if r.Caller != "" && !slices.Contains(callerIDs, r.Caller) {
			continue
		}
		seed := r.seed(s.seed)
		if !r.fires(seed, action, callerKey, idx) {
			continue
		}
		switch r.Kind {
		case FaultError:
			if d.err == nil {
				f := r.Fault
				d.err = &f
			}
		case FaultLostResponse:
			if d.lost == nil {
				f := r.Fault
				d.lost = &f
			}
		case FaultLatency:
			u := unitFloat(seed, "jitter|"+r.Name, action, callerKey, idx)
			d.latency += r.Latency.D() + time.Duration(u*float64(r.Jitter.D()))
		case FaultConsistency:
			u := unitFloat(seed, "jitter|"+r.Name, action, callerKey, idx)
			d.hide = max(d.hide, r.Latency.D()+time.Duration(u*float64(r.Jitter.D())))
		case FaultPause:
			if r.Step == StepAfter {
				d.after = append(d.after, r)
			} else {
				d.before = append(d.before, r)
			}
		}
	}
	return d
}

// seed is what the fault's decisions are drawn from: its own seed if it
// has one, else the emulator's.
func (r *activeFault) seed(emulator int64) int64 {
	if r.Seed != 0 {
		return r.Seed
	}
	return emulator
}

func (r *activeFault) fires(seed int64, action, caller string, idx uint64) bool {
	if r.Count > 0 {
		key := action + "|" + caller
		base, ok := r.base[key]
		if !ok {
			base = idx
			r.base[key] = idx
		}
		return idx-base < uint64(r.Count)
	}
	p := r.Probability
	if p == 0 {
		return true
	}
	return unitFloat(seed, r.Name, action, caller, idx) < p
}

func (s *faultSet) sorted() []*activeFault {
	out := make([]*activeFault, 0, len(s.rules))
	for _, r := range s.rules {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}

// unitFloat maps the decision key to [0,1).
func unitFloat(seed int64, name, action, caller string, idx uint64) float64 {
	h := mix64(uint64(seed) ^ strHash(name) ^ mix64(strHash(action)^mix64(strHash(caller)^mix64(idx))))
	return float64(h>>11) / (1 << 53)
}

// hold blocks a call at a pause until the pause is removed or done
// closes.
func (s *faultSet) hold(r *activeFault, done <-chan struct{}) {
	s.mu.Lock()
	r.held++
	s.cond.Broadcast()
	gate := r.gate
	s.mu.Unlock()
	select {
	case <-gate:
	case <-done:
	}
	s.mu.Lock()
	r.held--
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *faultSet) releaseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, r := range s.rules {
		close(r.gate)
		delete(s.rules, name)
	}
}

// AddFault installs a fault and returns its name (generated when empty).
// A fault with an existing name replaces it.
func (c *Cloud) AddFault(f Fault) (string, error) {
	s := c.faults
	s.mu.Lock()
	defer s.mu.Unlock()
	s.order++
	if f.Name == "" {
		f.Name = fmt.Sprintf("fault-%d", s.order)
	}
	if err := validateFault(&f); err != nil {
		return "", err
	}
	if old, ok := s.rules[f.Name]; ok {
		close(old.gate)
	}
	s.rules[f.Name] = &activeFault{Fault: f, order: s.order, base: map[string]uint64{}, gate: make(chan struct{})}
	return f.Name, nil
}

// RemoveFault uninstalls a fault; calls held by a pause continue.
func (c *Cloud) RemoveFault(name string) bool {
	s := c.faults
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rules[name]
	if ok {
		close(r.gate)
		delete(s.rules, name)
		s.cond.Broadcast()
	}
	return ok
}

// ClearFaults removes every fault and releases every held call.
func (c *Cloud) ClearFaults() { c.faults.releaseAll() }

// Faults lists the installed faults in the order they were added.
func (c *Cloud) Faults() []FaultStatus {
	s := c.faults
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []FaultStatus
	for _, r := range s.sorted() {
		out = append(out, FaultStatus{Fault: r.Fault, Held: r.held})
	}
	return out
}

// WaitHeld blocks until the pause fault name holds at least n calls.
func (c *Cloud) WaitHeld(ctx context.Context, name string, n int) error {
	s := c.faults
	stop := context.AfterFunc(ctx, s.cond.Broadcast)
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		r, ok := s.rules[name]
		if !ok {
			return fmt.Errorf("no fault named %q", name)
		}
		if r.held >= n {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wait for %d calls held by %s (holding %d): %w", n, name, r.held, err)
		}
		s.cond.Wait()
	}
}
