package fakecloud

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
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
	// replayed; a fault with its own Seed uses that instead.
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
//
// A Cloud is the API layer around its world (the model): it
// authenticates, throttles, injects faults and counts calls, decodes each
// action's request, makes one call to the world and renders the answer.
type Cloud struct {
	w *world
	// region, account and created never change; the API layer reads them
	// without asking the world.
	region, account string
	created         time.Time
	mux             *http.ServeMux
	// adminToken guards the admin API; empty disables it.
	adminToken string

	busy     *busySet
	throttle *throttler
	faults   *faultSet
	calls    *accounting
	// metaCalls counts metadata reads apart from API calls.
	metaCalls *accounting
	nonces    *nonceCache
	tokens    *metadataTokens

	closeOnce sync.Once
}

// New builds a Cloud and starts its background work (async transitions,
// hypervisor delivery). Call Close when done.
func New(opts Options) (*Cloud, error) {
	w, err := openWorld(opts.Spec, opts.StatePath, opts.Seed,
		worldDeps{clock: opts.Clock, log: opts.Logger, timeScale: opts.TimeScale, hv: opts.Hypervisor})
	if err != nil {
		return nil, err
	}
	c := &Cloud{w: w, region: w.st.Spec.RegionID, account: w.st.Spec.AccountID, created: w.st.Created,
		adminToken: opts.AdminToken, busy: newBusySet(), throttle: newThrottler(), faults: newFaultSet(opts.Seed),
		calls: newAccounting("", 0), metaCalls: newAccounting(ServiceMetadata, maxMetadataKeys), nonces: newNonceCache(), tokens: newMetadataTokens()}
	c.mux = c.adminMux()
	return c, nil
}

// Close stops background work, waits for queued hypervisor calls and
// writes a final snapshot when persistence is on.
func (c *Cloud) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.faults.releaseAll()
		err = c.w.close()
	})
	return err
}

// Settings returns the current behaviour knobs.
func (c *Cloud) Settings() Settings { return c.w.currentSettings() }

// UpdateSettings replaces the behaviour knobs (validated as a world file's
// would be) and persists them.
func (c *Cloud) UpdateSettings(s Settings) error { return c.w.updateSettings(s) }

// World returns the admin view of the world.
func (c *Cloud) World() WorldView { return c.w.worldView() }

// InstanceTypes returns the instance-type table in use.
func (c *Cloud) InstanceTypes() []InstanceType { return c.w.instanceTypes(nil, nil) }

// ENI returns a view of one ENI.
func (c *Cloud) ENI(id string) (ENIView, bool) { return c.w.eniView(id) }

// ENIs returns views of all ENIs, ordered by ID.
func (c *Cloud) ENIs() []ENIView { return c.w.eniViews() }

// VSwitches returns views of all vSwitches, ordered by ID.
func (c *Cloud) VSwitches() []VSwitchView { return c.w.vswitchViews() }

// DrainVSwitch takes free IPv4 addresses of vSwitch id away, so that
// only leave stay free (an exhausted vSwitch, as a chaos plan needs it),
// and returns its view. The emulator holds them: no ENI gets them and no
// call hands them out (an explicit one is IpAssigned) until
// RefillVSwitch. Draining again moves the level, giving back held
// addresses if leave is higher; addresses ENIs release meanwhile become
// free as usual. The drain is persisted with the world.
func (c *Cloud) DrainVSwitch(id string, leave int) (VSwitchView, error) {
	if leave < 0 {
		return VSwitchView{}, fmt.Errorf("drain %s: leave %d must not be negative", id, leave)
	}
	return c.w.drainVSwitch(id, leave)
}

// RefillVSwitch gives back every address a drain of vSwitch id holds.
func (c *Cloud) RefillVSwitch(id string) (VSwitchView, error) { return c.w.refillVSwitch(id) }

// Instance returns a view of one instance.
func (c *Cloud) Instance(id string) (InstanceInfo, bool) { return c.w.instanceView(id) }

// Instances returns views of all instances, ordered by ID.
func (c *Cloud) Instances() []InstanceInfo { return c.w.instanceViews() }

// StopInstance stops a running instance. Its ENIs stay attached, as in
// ECS; the hypervisor is told.
func (c *Cloud) StopInstance(id string) error {
	return c.w.setInstanceStatus(id, StatusRunning, StatusStopped)
}

// StartInstance starts a stopped instance.
func (c *Cloud) StartInstance(id string) error {
	return c.w.setInstanceStatus(id, StatusStopped, StatusRunning)
}

// ReleaseInstance releases an instance as ECS does: secondary ENIs are
// detached to Available, or deleted when DeleteOnRelease is set; the
// primary ENI is deleted with the instance.
func (c *Cloud) ReleaseInstance(id string) error { return c.w.releaseInstance(id) }

// AddInstance creates a running (or stopped) instance with its primary
// ENI, as RunInstances would; the hypervisor is told it started.
func (c *Cloud) AddInstance(spec InstanceSpec) (InstanceInfo, error) { return c.w.addInstance(spec) }

// Resync tells the hypervisor the whole current state: every running
// instance with its ENIs and every route table. A lab calls it after it
// (re)connects.
func (c *Cloud) Resync() { c.w.resync() }

// WaitHypervisor blocks until every hypervisor call queued so far has
// returned.
func (c *Cloud) WaitHypervisor(ctx context.Context) error { return c.w.hooks.wait(ctx) }

// waitOrDone sleeps d of real time unless ctx ends or the cloud closes.
func (c *Cloud) waitOrDone(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := c.w.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.w.done:
		return errClosed
	}
}
