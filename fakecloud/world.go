package fakecloud

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// world is the model of the emulated account: the state and its indexes,
// the invariants every change keeps, persistence, the pending halves of
// asynchronous operations and the hypervisor events that changes cause.
//
// Its methods take and return domain values (decoded requests, copies of
// records, views) and never see a wire request or build a response: the
// API layer (the action handlers, the admin and metadata routes) decodes
// and validates a request, makes one call here and renders what it gets
// back. Methods named ...Locked expect mu held; the others take it.
type world struct {
	worldDeps

	mu    sync.Mutex // guards everything below
	st    *state
	sched *scheduler
	jr    *journal
	dirty dirtySet
	hooks *dispatcher

	// settings mirrors st.Spec.Settings for lock-free reads on the hot
	// path.
	settings atomic.Pointer[Settings]

	// done closes when the world shuts down; wg counts its goroutines.
	done chan struct{}
	wg   sync.WaitGroup
}

// worldDeps are what a world runs on: its clock, its logger, the scale
// of its delays and the hypervisor it tells about changes.
type worldDeps struct {
	clock     clock.WithDelayedExecution
	log       *slog.Logger
	timeScale float64
	hv        Hypervisor
}

// openWorld builds the world of spec (nil: the default world), restoring
// it from the state file at statePath when there is one, and starts its
// background work: async transitions and hypervisor delivery.
func openWorld(spec *Spec, statePath string, seed int64, deps worldDeps) (*world, error) {
	w := &world{worldDeps: deps, done: make(chan struct{})}
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.timeScale <= 0 {
		w.timeScale = 1
	}
	if w.hv == nil {
		w.hv = NopHypervisor{}
	}
	s := DefaultSpec()
	if spec != nil {
		s = *spec
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("invalid world: %w", err)
		}
	}
	st, jr, err := openState(statePath, s, seed, w.clock.Now(), w.log)
	if err != nil {
		return nil, err
	}
	w.st, w.jr = st, jr
	settings := cloneSettings(st.Spec.Settings)
	w.settings.Store(&settings)
	w.start()
	return w, nil
}

// start runs the scheduler and the hypervisor dispatcher, re-arms pending
// transitions and tells the hypervisor about the machines that exist.
func (w *world) start() {
	w.hooks = newDispatcher(w.log)
	_, w.hooks.nop = w.hv.(NopHypervisor)
	w.sched = newScheduler(w.clock)
	w.wg.Add(2)
	go func() { defer w.wg.Done(); w.hooks.run(w.done) }()
	go func() { defer w.wg.Done(); w.sched.run(w.done, w.fire) }()
	w.mu.Lock()
	w.rescheduleLocked()
	w.mu.Unlock()
	if !w.hooks.nop {
		// The machines of a (restored) world exist from the start.
		w.resync()
	}
}

// close stops background work, waits for queued hypervisor calls and
// writes a final snapshot when persistence is on.
func (w *world) close() error {
	close(w.done)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.jr == nil {
		return nil
	}
	return w.jr.close(w.st)
}

// scale converts a world-time delay into real waiting time.
func (w *world) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * w.timeScale)
}

func (w *world) now() time.Time { return w.clock.Now() }

// settingsNow returns the current settings without locking; callers must
// not modify them.
func (w *world) settingsNow() *Settings { return w.settings.Load() }

// currentSettings returns a copy of the behaviour knobs.
func (w *world) currentSettings() Settings {
	w.mu.Lock()
	defer w.mu.Unlock()
	return cloneSettings(w.st.Spec.Settings)
}

// updateSettings replaces the behaviour knobs (validated as a world
// file's would be) and persists them.
func (w *world) updateSettings(s Settings) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	spec := w.st.Spec
	spec.Settings = cloneSettings(s)
	if err := spec.Validate(); err != nil {
		return err
	}
	w.st.Spec.Settings = spec.Settings
	snap := cloneSettings(spec.Settings)
	w.settings.Store(&snap)
	w.dirty.settings = true
	return w.commitLocked()
}

// cloneSettings returns a copy of s that shares no map with it.
func cloneSettings(s Settings) Settings {
	th := make(map[string]int, len(s.Throttle))
	for k, v := range s.Throttle {
		th[k] = v
	}
	s.Throttle = th
	if s.ThrottleCodes != nil {
		codes := make(map[string]string, len(s.ThrottleCodes))
		for k, v := range s.ThrottleCodes {
			codes[k] = v
		}
		s.ThrottleCodes = codes
	}
	return s
}

// commitLocked appends what the current locked section changed to the
// journal.
func (w *world) commitLocked() error {
	if w.jr == nil {
		w.dirty.reset()
		return nil
	}
	err := w.jr.write(w.st, &w.dirty)
	w.dirty.reset()
	if err != nil {
		w.log.Error("persist state", "err", err)
		return fmt.Errorf("persist state: %w", err)
	}
	return nil
}

// errClosed is returned by waits cut short by Close.
var errClosed = errors.New("fakecloud: closed")

// instanceTypeLocked returns the type of an instance.
func (w *world) instanceTypeLocked(id string) (InstanceType, bool) {
	t, ok := w.st.types[id]
	return t, ok
}

// addrsOf lists the addresses of recs.
func addrsOf(recs []addrRec) []netip.Addr {
	out := make([]netip.Addr, len(recs))
	for i, r := range recs {
		out[i] = r.Addr
	}
	return out
}
