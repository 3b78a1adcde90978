// Package backoff is the daemon's one retry mechanism: named policies
// (Terway's keys and defaults, overridable through backoff_override) and
// a Retry loop on an injected clock.
package backoff

import (
	"context"
	"errors"
	"fmt"
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

// Defaults returns Terway's policies (terway-facts.md §2.3, main branch),
// plus ours: metadata (500ms ×1.2, 4 steps, as Terway's metadata client),
// throttled (how long to wait after a Throttling answer before retrying)
// and kubernetes.
func Defaults() map[string]wait.Backoff {
	return map[string]wait.Backoff{
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
}

// Set holds the policies in force.
type Set struct {
	clock    clock.Clock
	policies map[string]wait.Backoff
}

// NewSet returns the defaults with overrides applied (whole policies by
// key). A nil clock means the real one.
func NewSet(c clock.Clock, overrides map[string]wait.Backoff) *Set {
	if c == nil {
		c = clock.RealClock{}
	}
	p := Defaults()
	for k, v := range overrides {
		p[k] = v
	}
	return &Set{clock: c, policies: p}
}

// Get returns the policy for key, or the default policy.
func (s *Set) Get(key string) wait.Backoff {
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
// context ends, or the policy's steps run out. It waits the policy's next
// step between attempts. The error returned wraps the last attempt's.
func (s *Set) Retry(ctx context.Context, key string, fn func(ctx context.Context) (done bool, err error)) error {
	return s.retry(ctx, key, s.Get(key), false, fn)
}

// Poll is Retry without a step limit: it waits the policy's intervals
// until fn is done or ctx ends (callers bound ctx).
func (s *Set) Poll(ctx context.Context, key string, fn func(ctx context.Context) (done bool, err error)) error {
	b := s.Get(key)
	b.Steps = math.MaxInt32
	if b.Cap == 0 {
		b.Cap = time.Duration(float64(b.Duration) * math.Max(1, b.Factor) * 4)
	}
	return s.retry(ctx, key, b, true, fn)
}

// retry runs the loop of Retry and Poll. A growing interval that reaches
// the policy's cap ends wait.Backoff's steps; Poll then keeps waiting the
// cap instead of giving up.
func (s *Set) retry(ctx context.Context, key string, b wait.Backoff, poll bool, fn func(ctx context.Context) (done bool, err error)) error {
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
		if err != nil {
			last = err
		}
		if b.Steps <= 0 {
			if last == nil {
				return fmt.Errorf("%w after %d attempts (policy %q)", ErrExhausted, attempt, key)
			}
			return fmt.Errorf("%w after %d attempts (policy %q): %w", ErrExhausted, attempt, key, last)
		}
		t := s.clock.NewTimer(b.Step())
		if poll {
			b.Steps = math.MaxInt32
		}
		select {
		case <-ctx.Done():
			t.Stop()
			if last != nil {
				return fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-t.C():
		}
	}
}
