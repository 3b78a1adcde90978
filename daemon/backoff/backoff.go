// Package backoff is the daemon's one retry mechanism: named policies
// (Terway's keys and defaults, overridable through backoff_override) and
// a Retry loop on an injected clock. It owns the policy type and the
// built-in table; daemon/config decodes backoff_override into [Policy]
// and starts each entry from [DefaultFor], so the schedule an operator
// reads in the docs, the one config returns and the one the daemon waits
// are the same value.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// Policy names, as Terway's backoff_override keys.
const (
	Default            = ""
	ENICreate          = "eni_create"
	ENIOps             = "eni_ops"
	ENIRelease         = "eni_release"
	ENIIPOps           = "eni_ip_ops"
	ENIDeleteConfirm   = "eni_delete_confirm"
	WaitENIStatus      = "wait_eni_status"
	MetaAssignIP       = "meta_assign_private_ip"
	MetaUnassignIP     = "meta_unassign_private_ip"
	WaitSTSTokenReady  = "wait_sts_token_ready"
	Metadata           = "metadata"
	ThrottledAPIRetry  = "throttled"
	KubernetesAPIRetry = "kubernetes"
	// PoolGrowth is the pools' pause after a failed growth: Duration,
	// doubled per failure in a row, up to Cap.
	PoolGrowth = "pool_growth"
)

// Policy is one retry schedule, in the shape of Terway main's backoff
// entries (its ExtendedBackoff): Kubernetes' wait.Backoff fields plus
// InitialDelay. Wait i (0-based) between attempts is min(Duration ×
// Factor^i, Cap), stretched by up to Jitter × itself at random; at most
// Steps attempts are made (Retry; Poll has no step limit). InitialDelay is
// waited once before the first attempt, for calls whose first answer is
// known to be "not yet" (Terway main waits 3 s before polling a new ENI).
//
// It marshals to JSON with durations as integer nanoseconds, the form
// Terway reads; daemon/config's Parse also accepts Go duration strings.
type Policy struct {
	// InitialDelay is waited once before the first attempt (0: none).
	InitialDelay time.Duration
	// Duration is the first wait between attempts.
	Duration time.Duration
	// Factor multiplies the wait after each attempt (0 or 1: constant).
	Factor float64
	// Jitter adds up to Jitter × wait at random (0: none).
	Jitter float64
	// Steps is the maximum number of attempts.
	Steps int
	// Cap bounds the wait (0: no bound).
	Cap time.Duration
}

// Backoff returns the waits between attempts as a wait.Backoff, for
// consumers of Kubernetes' machinery (the pod-ips workqueue). InitialDelay
// has no place there; Retry and Poll wait it themselves.
func (p Policy) Backoff() wait.Backoff {
	return wait.Backoff{Duration: p.Duration, Factor: p.Factor, Jitter: p.Jitter, Steps: p.Steps, Cap: p.Cap}
}

// defaults is the one built-in table (terway-facts.md §2.3, main branch),
// plus ours: metadata (500ms ×1.2, 4 steps, as Terway's metadata client),
// throttled (how long to wait after a Throttling answer before retrying),
// kubernetes (the daemon's API server patches) and pool_growth.
//
// InitialDelay is 0 everywhere, also for eni_delete_confirm and
// wait_eni_status where Terway main waits 1 s and 3 s first: the daemon
// has always polled at once (the value was documented but never applied),
// its WaitENIStatus also settles ENIs at restore and in the stray sync
// that are usually done already, and adding Terway main's delays would
// move the benchmark's call counts and timings; operators who want them
// set InitialDelay in backoff_override.
var defaults = map[string]Policy{
	Default:            {Duration: 2 * time.Second, Factor: 1.5, Jitter: 0.3, Steps: 6},
	ENICreate:          {Duration: 10 * time.Second, Factor: 2, Jitter: 0.3, Steps: 2},
	ENIOps:             {Duration: 5 * time.Second, Factor: 2, Jitter: 0.3, Steps: 6},
	ENIRelease:         {Duration: 4 * time.Second, Factor: 2, Jitter: 0.5, Steps: 8},
	ENIIPOps:           {Duration: 5 * time.Second, Factor: 1, Jitter: 1.3, Steps: 6},
	ENIDeleteConfirm:   {Duration: 2 * time.Second, Factor: 1.5, Steps: 4, Cap: 4 * time.Second},
	WaitENIStatus:      {Duration: 3 * time.Second, Factor: 1.5, Jitter: 0.5, Steps: 8},
	MetaAssignIP:       {Duration: 1100 * time.Millisecond, Factor: 1, Jitter: 0.2, Steps: 10},
	MetaUnassignIP:     {Duration: 1100 * time.Millisecond, Factor: 1, Jitter: 0.2, Steps: 10},
	WaitSTSTokenReady:  {Duration: time.Second, Factor: 1, Jitter: 0.2, Steps: 60},
	Metadata:           {Duration: 500 * time.Millisecond, Factor: 1.2, Jitter: 0.1, Steps: 4},
	ThrottledAPIRetry:  {Duration: 5 * time.Second, Factor: 2, Jitter: 0.5, Steps: 5, Cap: time.Minute},
	KubernetesAPIRetry: {Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5},
	PoolGrowth:         {Duration: 5 * time.Second, Factor: 2, Steps: 1, Cap: time.Minute},
}

// Defaults returns a copy of the built-in policies by key.
func Defaults() map[string]Policy { return maps.Clone(defaults) }

// DefaultFor returns the built-in policy of key, or the one of Default
// when key has none of its own.
func DefaultFor(key string) Policy {
	if p, ok := defaults[key]; ok {
		return p
	}
	return defaults[Default]
}

// Set holds the policies in force.
type Set struct {
	clock    clock.Clock
	policies map[string]Policy
}

// NewSet returns the defaults with overrides applied (whole policies by
// key: daemon/config has already merged a partial backoff_override entry
// over its key's default). A nil clock means the real one.
func NewSet(c clock.Clock, overrides map[string]Policy) *Set {
	if c == nil {
		c = clock.RealClock{}
	}
	p := Defaults()
	for k, v := range overrides {
		p[k] = v
	}
	return &Set{clock: c, policies: p}
}

// Get returns the policy for key: the override or built-in policy of key,
// else that of Default (overridden or not).
func (s *Set) Get(key string) Policy {
	if b, ok := s.policies[key]; ok {
		return b
	}
	return s.policies[Default]
}

// ErrExhausted is wrapped by Retry when the policy's steps ran out.
var ErrExhausted = errors.New("retries exhausted")

// Permanent marks an error that must not be retried.
func Permanent(err error) error { return &permanent{err} }

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Retry calls fn until it returns done or an error marked Permanent, the
// context ends, or the policy's steps run out. It waits the policy's
// InitialDelay before the first attempt and its next step between
// attempts. The error returned wraps the last attempt's.
func (s *Set) Retry(ctx context.Context, key string, fn func(ctx context.Context) (done bool, err error)) error {
	return s.retry(ctx, key, s.Get(key), false, fn)
}

// After marks err, returned by a Retry or Poll function, as worth trying
// again no sooner than d from now: the loop waits d instead of the
// policy's step, which it still counts. A throttled call waits for the
// cloud's next window so, instead of retrying into refusals.
func After(err error, d time.Duration) error { return &retryAfter{err: err, after: d} }

type retryAfter struct {
	err   error
	after time.Duration
}

func (r *retryAfter) Error() string { return r.err.Error() }
func (r *retryAfter) Unwrap() error { return r.err }

// Poll is Retry without a step limit: after the policy's InitialDelay it
// waits the policy's intervals until fn is done or ctx ends (callers
// bound ctx).
func (s *Set) Poll(ctx context.Context, key string, fn func(ctx context.Context) (done bool, err error)) error {
	b := s.Get(key)
	b.Steps = math.MaxInt32
	if b.Cap == 0 {
		b.Cap = time.Duration(float64(b.Duration) * math.Max(1, b.Factor) * 4)
	}
	return s.retry(ctx, key, b, true, fn)
}

// sleep waits d on the set's clock, or until ctx ends.
func (s *Set) sleep(ctx context.Context, d time.Duration) error {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// retry runs the loop of Retry and Poll. A growing interval that reaches
// the policy's cap ends wait.Backoff's steps; Poll then keeps waiting the
// cap instead of giving up.
func (s *Set) retry(ctx context.Context, key string, p Policy, poll bool, fn func(ctx context.Context) (done bool, err error)) error {
	if p.InitialDelay > 0 {
		if err := s.sleep(ctx, p.InitialDelay); err != nil {
			return fmt.Errorf("%w (waiting the initial delay of policy %q)", err, key)
		}
	}
	b := p.Backoff()
	var last error
	for attempt := 1; ; attempt++ {
		done, err := fn(ctx)
		var perm *permanent
		if errors.As(err, &perm) {
			return perm.err
		}
		if done {
			return err
		}
		var ra *retryAfter
		if errors.As(err, &ra) {
			last = ra.err // the wait is this loop's, not its caller's
		} else if err != nil {
			last = err
		}
		if b.Steps <= 0 {
			if last == nil {
				return fmt.Errorf("%w after %d attempts (policy %q)", ErrExhausted, attempt, key)
			}
			return fmt.Errorf("%w after %d attempts (policy %q): %w", ErrExhausted, attempt, key, last)
		}
		d := b.Step()
		if poll {
			b.Steps = math.MaxInt32
		}
		if ra != nil {
			d = ra.after
		}
		if err := s.sleep(ctx, d); err != nil {
			if last != nil {
				return fmt.Errorf("%w (last error: %w)", err, last)
			}
			return err
		}
	}
}
