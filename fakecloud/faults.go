package fakecloud

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// validateFault checks f and fills in its defaults (the service of an
// API fault, the step of a pause, the action of a consistency fault).
func validateFault(f *Fault) error {
	switch f.Service {
	case "", ServiceAPI:
		f.Service = ""
		if f.Kind == FaultStale {
			return fmt.Errorf("fault %s: stale applies to the metadata service (service %q), not to API calls", f.Name, ServiceMetadata)
		}
	case ServiceMetadata:
		if err := validateMetadataFault(f); err != nil {
			return err
		}
	default:
		return fmt.Errorf("fault %s: service %q must be %q (or empty) or %q", f.Name, f.Service, ServiceAPI, ServiceMetadata)
	}
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
	case FaultStale:
	default:
		return fmt.Errorf("fault kind %q must be one of error, latency, lost-response, pause, consistency, stale", f.Kind)
	}
	if f.Probability < 0 || f.Probability > 1 || math.IsNaN(f.Probability) {
		return fmt.Errorf("fault %s: probability must be within [0,1]", f.Name)
	}
	if f.Count < 0 {
		return fmt.Errorf("fault %s: count must not be negative", f.Name)
	}
	return nil
}

// validateMetadataFault refuses what means nothing for a metadata read,
// which changes nothing and answers errors with an HTML page, and makes
// the path prefix relative to /latest/.
func validateMetadataFault(f *Fault) error {
	switch f.Kind {
	case FaultLostResponse, FaultConsistency:
		return fmt.Errorf("fault %s: %s applies to API calls, not to metadata reads (use error, latency, pause or stale)", f.Name, f.Kind)
	}
	if f.Code != "" || f.Message != "" || f.Lost != "" {
		return fmt.Errorf("fault %s: code, message and lost mean nothing on the metadata service, which answers an error with its HTML page for the status", f.Name)
	}
	if f.Step == StepAfter {
		return fmt.Errorf("fault %s: a metadata read changes nothing, so it can be paused only %q", f.Name, StepBefore)
	}
	f.Action = strings.TrimPrefix(strings.TrimPrefix(f.Action, "/"), "latest/")
	return nil
}

// activeFault is an installed fault with its per-caller progress.
type activeFault struct {
	Fault
	order int
	base  map[string]uint64 // caller -> its call index when first matched
	held  int
	fired int64
	gate  chan struct{} // closed when the fault is removed (pauses)
	// frozen is, for a stale fault, the metadata of each instance when
	// the fault was added. It never changes once installed.
	frozen map[string]instanceMeta
}

type faultSet struct {
	seed  int64
	mu    sync.Mutex
	cond  *sync.Cond
	rules map[string]*activeFault
	order int
	index map[string]uint64 // indexKey -> calls so far
}

func newFaultSet(seed int64) *faultSet {
	f := &faultSet{seed: seed, rules: map[string]*activeFault{}, index: map[string]uint64{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// subject is what fault decisions know of one API call or metadata read.
type subject struct {
	service string // "" for the API, or ServiceMetadata
	action  string // the API action, or the path read under /latest/
	// key is what the caller's call index counts by: the action, or the
	// path with every MAC as one (metadataKey).
	key    string
	caller string   // the caller's key
	ids    []string // what a fault's Caller may name
}

// decision is what the faults say about one call.
type decision struct {
	err     *Fault // fail before applying
	latency time.Duration
	lost    *Fault        // apply, then lose the answer
	hide    time.Duration // a new ENI stays out of Describe answers this long
	stale   *activeFault  // answer metadata as it was when this was added
	before  []*activeFault
	after   []*activeFault
}

// decide records one call and returns the faults that fire for it.
func (s *faultSet) decide(q subject) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d decision
	k := s.indexKey(q)
	idx := s.index[k]
	s.index[k] = idx + 1
	if len(s.rules) == 0 {
		return d
	}
	for _, r := range s.sorted() {
		if !r.matches(q) {
			continue
		}
		seed := r.seed(s.seed)
		if !r.fires(seed, q.key, q.caller, idx) {
			continue
		}
		r.fired++
		d.add(r, unitFloat(seed, "jitter|"+r.Name, q.key, q.caller, idx))
	}
	return d
}

// add makes fault r, which fires, part of the decision; u in [0,1) is
// how much of its jitter it adds.
func (d *decision) add(r *activeFault, u float64) {
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
		d.latency += r.Latency.D() + time.Duration(u*float64(r.Jitter.D()))
	case FaultConsistency:
		d.hide = max(d.hide, r.Latency.D()+time.Duration(u*float64(r.Jitter.D())))
	case FaultStale:
		if d.stale == nil {
			d.stale = r
		}
	case FaultPause:
		if r.Step == StepAfter {
			d.after = append(d.after, r)
		} else {
			d.before = append(d.before, r)
		}
	}
}

// indexKey is where the call index of q is kept. Metadata paths come
// from the client: past maxMetadataKeys, new ones share one index.
func (s *faultSet) indexKey(q subject) string {
	if q.service == "" {
		return q.key + "|" + q.caller
	}
	k := q.service + "|" + q.key + "|" + q.caller
	if _, ok := s.index[k]; !ok && len(s.index) >= maxMetadataKeys {
		k = q.service + "|" + otherAction + "|" + q.caller
	}
	return k
}

// matches reports whether r applies to q: the same service, the action
// (on the metadata service, a prefix of the path) and the caller.
func (r *activeFault) matches(q subject) bool {
	if r.Service != q.service || (r.Caller != "" && !slices.Contains(q.ids, r.Caller)) {
		return false
	}
	if q.service == ServiceMetadata {
		return strings.HasPrefix(q.action, r.Action)
	}
	return r.Action == "" || r.Action == q.action
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
// A fault with an existing name replaces it. A stale fault takes its
// copy of the metadata now.
func (c *Cloud) AddFault(f Fault) (string, error) {
	var frozen map[string]instanceMeta
	if f.Kind == FaultStale && f.Service == ServiceMetadata {
		frozen = c.w.metadataSnapshot(f.Caller)
		if len(frozen) == 0 {
			return "", fmt.Errorf("fault %s: no instance %q whose metadata to hold", f.Name, f.Caller)
		}
	}
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
	s.rules[f.Name] = &activeFault{Fault: f, order: s.order, base: map[string]uint64{}, gate: make(chan struct{}), frozen: frozen}
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
		out = append(out, FaultStatus{Fault: r.Fault, Held: r.held, Fired: r.fired})
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
