package timeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/workload"
)

// DefaultInterval is how often a Sampler samples unless told otherwise:
// the "each second".
const DefaultInterval = time.Second

// CallCounter reads fakecloud's call counters; *admin.Client is one.
type CallCounter interface {
	Calls(ctx context.Context) ([]admin.CallStat, error)
}

// Config says what a Sampler reads.
type Config struct {
	// Calls reads fakecloud's counters; nil leaves the calls out.
	Calls CallCounter
	// Kube is the API server; nil leaves pods and restarts out.
	Kube kubernetes.Interface
	// Namespace holds the workload's pods (required with Kube); Selector,
	// if set, narrows them (a label selector).
	Namespace, Selector string
	// DaemonNamespace and DaemonSet locate terway; empty means
	// workload.TerwayNamespace and workload.TerwayDaemonSet.
	DaemonNamespace, DaemonSet string
	// Interval is the time between samples; 0 means DefaultInterval.
	Interval time.Duration
	// Timeout bounds each source's read; 0 means twice Interval, and at
	// least 2 s: a busy API server on a small machine takes more than a
	// second to list the pods, and a sample that waits only drops a tick
	// where one that gives up reads nothing.
	Timeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.Calls == nil && out.Kube == nil {
		return out, errors.New("timeline: nothing to sample: give Calls, Kube or both")
	}
	if out.Kube != nil && out.Namespace == "" {
		return out, errors.New("timeline: Namespace (the workload's) is required with Kube")
	}
	out.DaemonNamespace = cmp.Or(out.DaemonNamespace, workload.TerwayNamespace)
	out.DaemonSet = cmp.Or(out.DaemonSet, workload.TerwayDaemonSet)
	if out.Interval <= 0 {
		out.Interval = DefaultInterval
	}
	if out.Timeout <= 0 {
		out.Timeout = max(2*out.Interval, 2*time.Second)
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out, nil
}

// Sampler samples a lab into a Timeline until Stop.
type Sampler struct {
	cfg Config
	ctx context.Context

	// sampling serialises samples (ticks, SampleNow, Stop's last one)
	// and guards the read state below.
	sampling sync.Mutex
	calls    callState
	daemon   daemonState

	mu sync.Mutex // guards tl
	tl Timeline

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// Start takes the first sample (the baseline of the call counters and of
// the restart counts) and samples every Interval in the background until
// Stop or until ctx ends. The error is only for an invalid Config.
func Start(ctx context.Context, cfg Config) (*Sampler, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Sampler{cfg: c, ctx: ctx, stop: make(chan struct{}), done: make(chan struct{})}
	now := c.Now()
	s.tl = Timeline{Start: now, Interval: admin.Duration(c.Interval)}
	s.sample(now)
	go s.loop()
	return s, nil
}

func (s *Sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.sample(time.Time{})
		}
	}
}

// AddBand records a fault the engine applied; a band whose End is zero
// is still active, and Stop closes it.
func (s *Sampler) AddBand(b Band) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tl.Bands = append(s.tl.Bands, b)
}

// Begin records a fault starting now and returns the function that ends
// it (now, when called; later calls change nothing).
func (s *Sampler) Begin(name, kind, target string) (end func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.tl.Bands)
	s.tl.Bands = append(s.tl.Bands, Band{Name: name, Kind: kind, Target: target, Start: s.cfg.Now()})
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.tl.Bands[i].End.IsZero() {
			s.tl.Bands[i].End = s.cfg.Now()
		}
	}
}

// SampleNow takes a sample at once, between ticks: a caller about to
// change what the sampler watches (deleting the workload) puts the state
// before the change on the timeline.
func (s *Sampler) SampleNow() { s.sample(time.Time{}) }

// Snapshot returns a copy of the timeline so far (open bands still
// open), for a violation found while the run goes on.
func (s *Sampler) Snapshot() *Timeline {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copyLocked()
}

// Stop ends the sampling, takes a last sample, closes the bands still
// open and returns the timeline. Calling it again returns the same.
func (s *Sampler) Stop() *Timeline {
	s.stopOnce.Do(func() {
		close(s.stop)
		<-s.done
		end := s.sample(time.Time{})
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tl.End = end
		for i := range s.tl.Bands {
			if s.tl.Bands[i].End.IsZero() {
				s.tl.Bands[i].End = s.tl.End
			}
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copyLocked()
}

// copyLocked copies the timeline's slices; samples and restarts are
// never changed once appended, so their maps are shared.
func (s *Sampler) copyLocked() *Timeline {
	tl := s.tl
	tl.Samples = slices.Clone(s.tl.Samples)
	tl.Bands = slices.Clone(s.tl.Bands)
	tl.Restarts = slices.Clone(s.tl.Restarts)
	return &tl
}

// sample reads every source at once, each within Timeout, and appends
// what they show as the sample of when, or of now when it is zero, and
// returns its time. Now is read once the sample has its turn: a tick that
// waited behind SampleNow must not append a sample older than the one
// before it (the call counters' span would be negative, and so
// unreadable in run.json).
func (s *Sampler) sample(when time.Time) time.Time {
	s.sampling.Lock()
	defer s.sampling.Unlock()
	now := when
	if now.IsZero() {
		now = s.cfg.Now()
	}
	if last := s.tl.Start.Add(s.lastAt()); now.Before(last) {
		now = last // a clock that went back: keep the samples in order
	}
	at := admin.Duration(now.Sub(s.tl.Start).Round(time.Millisecond))
	smp := Sample{At: at, Errors: map[string]string{}}
	var restarts []Restart
	var wg sync.WaitGroup
	var callsErr, podsErr, daemonErr error
	if s.cfg.Calls != nil {
		wg.Add(1)
		go func() { defer wg.Done(); callsErr = s.readCalls(&smp, now) }()
	}
	if s.cfg.Kube != nil {
		wg.Add(2)
		go func() { defer wg.Done(); podsErr = s.readPods(&smp) }()
		go func() { defer wg.Done(); restarts, daemonErr = s.readDaemon(at) }()
	}
	wg.Wait()
	for src, err := range map[string]error{SourceCalls: callsErr, SourcePods: podsErr, SourceDaemon: daemonErr} {
		if err != nil {
			smp.Errors[src] = err.Error()
		}
	}
	if len(smp.Errors) == 0 {
		smp.Errors = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tl.Restarts = append(s.tl.Restarts, restarts...)
	for _, r := range s.tl.Restarts {
		smp.Restarts += r.Count
	}
	s.tl.Samples = append(s.tl.Samples, smp)
	return now
}

// lastAt is the offset of the last sample (0 before the first); only
// sample calls it, under sampling, the only writer of Samples.
func (s *Sampler) lastAt() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.tl.Samples); n > 0 {
		return s.tl.Samples[n-1].At.D()
	}
	return 0
}

// readCtx bounds one source's read. It outlives the Sampler's context so
// that Stop's last sample is taken even when the run was cancelled.
func (s *Sampler) readCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(s.ctx), s.cfg.Timeout)
}

// wrap names the source of a read error.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
