package cloud

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// DefaultRateLimitKey is the key of DefaultRateLimits (and of eni_conf's
// rate_limit) whose budget applies to every API without an entry.
const DefaultRateLimitKey = "*"

// DefaultRateLimits returns Terway main's client-side budgets in calls per
// minute (terway-facts.md §2.1), a fresh map per call; DefaultRateLimitKey
// covers the APIs not listed. A budget of N allows N/60 calls per second
// with a burst of N. This is the one table: daemon/config's rate_limit
// defaults are these.
func DefaultRateLimits() map[string]int {
	return map[string]int{
		DefaultRateLimitKey:                 500,
		"DescribeNetworkInterfaceAttribute": 2000,
		"DescribeNetworkInterfaces":         800,
		"CreateNetworkInterface":            500,
		"AttachNetworkInterface":            500,
		"DeleteNetworkInterface":            500,
		"DetachNetworkInterface":            400,
		"AssignPrivateIpAddresses":          400,
		"UnassignPrivateIpAddresses":        400,
		"AssignIpv6Addresses":               400,
		"UnassignIpv6Addresses":             400,
		"DescribeInstanceTypes":             400,
		"DescribeVSwitches":                 300,
	}
}

// limiter is one API's token bucket (rate N/60 per second, burst N). When
// the cloud answers Throttling the rate is halved (down to a sixteenth);
// each success raises it by a twentieth of the base until the base is
// reached again, so that a fleet backs off together and recovers.
type limiter struct {
	clock clock.Clock
	base  rate.Limit
	mu    sync.Mutex
	lim   *rate.Limiter
}

func newLimiter(c clock.Clock, perMinute int) *limiter {
	if perMinute <= 0 {
		return &limiter{clock: c, base: rate.Inf, lim: rate.NewLimiter(rate.Inf, 0)}
	}
	base := rate.Limit(float64(perMinute) / 60)
	return &limiter{clock: c, base: base, lim: rate.NewLimiter(base, perMinute)}
}

// wait blocks until a call may go out and returns how long it waited.
func (l *limiter) wait(ctx context.Context) (time.Duration, error) {
	now := l.clock.Now()
	r := l.lim.ReserveN(now, 1)
	if !r.OK() {
		return 0, context.DeadlineExceeded
	}
	d := r.DelayFrom(now)
	if d <= 0 {
		return 0, nil
	}
	t := l.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return d, nil
	case <-ctx.Done():
		r.CancelAt(l.clock.Now())
		return l.clock.Since(now), ctx.Err()
	}
}

func (l *limiter) throttled() {
	if l.base == rate.Inf {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.lim.Limit() / 2
	if floor := l.base / 16; next < floor {
		next = floor
	}
	l.lim.SetLimitAt(l.clock.Now(), next)
}

func (l *limiter) succeeded() {
	if l.base == rate.Inf {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.lim.Limit(); cur < l.base {
		l.lim.SetLimitAt(l.clock.Now(), min(l.base, cur+l.base/20))
	}
}

// rateLimits holds a limiter per API.
type rateLimits struct {
	clock   clock.Clock
	budgets map[string]int
	mu      sync.Mutex
	by      map[string]*limiter
}

func newRateLimits(c clock.Clock, overrides map[string]int) *rateLimits {
	b := DefaultRateLimits()
	for k, v := range overrides {
		b[k] = v
	}
	return &rateLimits{clock: c, budgets: b, by: map[string]*limiter{}}
}

func (r *rateLimits) get(api string) *limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.by[api]
	if l == nil {
		n, ok := r.budgets[api]
		if !ok {
			n = r.budgets[DefaultRateLimitKey]
		}
		l = newLimiter(r.clock, n)
		r.by[api] = l
	}
	return l
}
