package fakecloud

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Options configure a Cloud. The zero value is a usable in-memory default
// world on the real clock.
type Options struct {
	// Spec is the world; the zero Spec means DefaultSpec().
	Spec *Spec
	// StatePath persists the world (snapshot at StatePath, journal at
	// StatePath+".journal"); empty keeps it in memory only. An existing
	// state file wins over Spec.
	StatePath string
	// Seed drives IDs, MACs and fault decisions, so that a run can be
	// replayed.
	Seed int64
	// TimeScale multiplies every fakecloud delay (attach, detach, delete,
	// metadata lag, consistency window, injected latency); 0 means 1.
	TimeScale float64
	// Clock is the time source; nil means the real clock.
	Clock clock.WithDelayedExecution
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Hypervisor is told about instance, ENI, address and route changes,
	// starting with every running instance and route table; nil means
	// none.
	Hypervisor Hypervisor
	// AdminToken enables the admin API under /fakecloud/ for requests
	// bearing it; empty disables the admin API.
	AdminToken string
}

// Cloud is one emulated Alibaba Cloud account in one region: the ECS and
// VPC APIs, the instance metadata service and the admin API, all over
// http.Handler, plus a Go API for tests. Many Clouds can live in one
// process.
type Cloud struct {
	clock     clock.WithDelayedExecution
	region    string
	log       *slog.Logger
	seed      int64
	timeScale float64
	hv        Hypervisor
	mux       *http.ServeMux
	// adminToken guards the admin API; empty disables it.
	adminToken string

	mu    sync.Mutex // guards everything below
	st    *state
	busy  map[string]string
	sched *scheduler
	jr    *journal
	dirty dirtySet

	throttle *throttler
	faults   *faultSet
	calls    *accounting
	nonces   *nonceCache
	tokens   *metadataTokens
	hooks    *dispatcher

	// settings mirrors st.Spec.Settings for lock-free reads on the hot
	// path.
	settings atomic.Pointer[Settings]

	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
}

// New builds a Cloud and starts its background work (async transitions,
// hypervisor delivery). Call Close when done.
func New(opts Options) (*Cloud, error) {
	c := &Cloud{
		clock:      opts.Clock,
		log:        opts.Logger,
		seed:       opts.Seed,
		timeScale:  opts.TimeScale,
		hv:         opts.Hypervisor,
		adminToken: opts.AdminToken,
		busy:       map[string]string{},
		done:       make(chan struct{}),
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.timeScale <= 0 {
		c.timeScale = 1
	}
	if c.hv == nil {
		c.hv = NopHypervisor{}
	}
	spec := DefaultSpec()
	if opts.Spec != nil {
		spec = *opts.Spec
		if err := spec.Validate(); err != nil {
			return nil, fmt.Errorf("invalid world: %w", err)
		}
	}
	st, jr, err := openState(opts.StatePath, spec, c.seed, c.clock.Now(), c.log)
	if err != nil {
		return nil, err
	}
	c.st, c.jr = st, jr
	c.region = st.Spec.RegionID
	s := st.Spec.Settings.clone()
	c.settings.Store(&s)
	c.calls = newAccounting()
	c.throttle = newThrottler()
	c.faults = newFaultSet(c.seed)
	c.nonces = newNonceCache()
	c.tokens = newMetadataTokens()
	c.hooks = newDispatcher(c.log)
	_, c.hooks.nop = c.hv.(NopHypervisor)
	c.sched = newScheduler(c.clock)
	c.mux = c.adminMux()
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.hooks.run(c.done) }()
	go func() { defer c.wg.Done(); c.sched.run(c.done, c.fire) }()
	c.mu.Lock()
	c.rescheduleLocked()
	c.mu.Unlock()
	if !c.hooks.nop {
		// The machines of a (restored) world exist from the start.
		c.Resync()
	}
	return c, nil
}

// Close stops background work, waits for queued hypervisor calls and
// writes a final snapshot when persistence is on.
func (c *Cloud) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.faults.releaseAll()
		close(c.done)
		c.wg.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.jr != nil {
			err = c.jr.close(c.st)
		}
	})
	return err
}

// scale converts a world-time delay into real waiting time.
func (c *Cloud) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.timeScale)
}

func (c *Cloud) now() time.Time { return c.clock.Now() }

// Settings returns the current behaviour knobs.
func (c *Cloud) Settings() Settings {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.Spec.Settings.clone()
}

// UpdateSettings replaces the behaviour knobs (validated as a world file's
// would be) and persists them.
func (c *Cloud) UpdateSettings(s Settings) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	spec := c.st.Spec
	spec.Settings = s.clone()
	if err := spec.Validate(); err != nil {
		return err
	}
	c.st.Spec.Settings = spec.Settings
	snap := spec.Settings.clone()
	c.settings.Store(&snap)
	c.dirty.settings = true
	return c.commitLocked()
}

// settingsSnapshot returns the current settings; callers must not modify
// them.
func (c *Cloud) settingsSnapshot() *Settings { return c.settings.Load() }

func (s Settings) clone() Settings {
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
// journal. Callers hold c.mu.
func (c *Cloud) commitLocked() error {
	if c.jr == nil {
		c.dirty.reset()
		return nil
	}
	err := c.jr.write(c.st, &c.dirty)
	c.dirty.reset()
	if err != nil {
		c.log.Error("persist state", "err", err)
		return fmt.Errorf("persist state: %w", err)
	}
	return nil
}

// errClosed is returned by calls made after Close.
var errClosed = errors.New("fakecloud: closed")

// waitOrDone sleeps d of real time unless ctx ends or the cloud closes.
func (c *Cloud) waitOrDone(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return errClosed
	}
}

// instanceTypeLocked returns the type of an instance.
func (c *Cloud) instanceTypeLocked(id string) (InstanceType, bool) {
	t, ok := c.st.types[id]
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
