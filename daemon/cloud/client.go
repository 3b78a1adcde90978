// Package cloud is the daemon's client of ECS, VPC and the instance
// metadata service. It wraps the unmodified alibaba-cloud-sdk-go with what
// a node agent needs: one endpoint setting for the real cloud (HTTPS) or an
// emulator (HTTP), credentials that refresh themselves, per-API rate
// limits that slow down when the cloud throttles, one backoff mechanism,
// retries only of retryable outcomes, ClientTokens recorded before a
// mutating call and reused when it is retried, and operator switches that
// stop mutating calls.
package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"
	"k8s.io/utils/clock"

	"github.com/terway-sim/terway/daemon/backoff"
)

// Observer receives the measurements the daemon exports as metrics.
type Observer interface {
	// APICall is one call of an ECS/VPC action and how it ended
	// ("Success", an error code, "TransportError", "Degraded", "Canceled"
	// when the caller's context ended, ...).
	APICall(action string, took time.Duration, outcome string)
	// RateLimitWait is how long a call waited for its rate limiter.
	RateLimitWait(action string, waited time.Duration)
	// MetadataCall is one metadata read.
	MetadataCall(path string, took time.Duration, err error)
}

// NopObserver ignores every measurement.
type NopObserver struct{}

// APICall implements Observer.
func (NopObserver) APICall(string, time.Duration, string) {}

// RateLimitWait implements Observer.
func (NopObserver) RateLimitWait(string, time.Duration) {}

// MetadataCall implements Observer.
func (NopObserver) MetadataCall(string, time.Duration, error) {}

// Degradation switches off classes of mutating calls, for operators who
// need the daemon to stop touching the cloud.
type Degradation string

// Degradation levels.
const (
	DegradationNone Degradation = ""
	// DegradationNoMutation refuses every mutating call.
	DegradationNoMutation Degradation = "no_mutation"
	// DegradationNoRelease refuses calls that give resources back
	// (Unassign*, Detach, Delete); allocation continues.
	DegradationNoRelease Degradation = "no_release"
)

// ErrDegraded is returned for calls refused by the degradation switch.
var ErrDegraded = errors.New("refused by the degradation switch")

// Options configure a Client.
type Options struct {
	RegionID string
	// ECSEndpoint and VPCEndpoint: empty means the real cloud over HTTPS;
	// "http://host:port" (or a bare host) an emulator.
	ECSEndpoint string
	VPCEndpoint string
	Credentials credentials.CredentialsProvider
	// RateLimits overrides calls per minute per action
	// (DefaultRateLimitKey: every action without an entry).
	RateLimits map[string]int
	Backoff    *backoff.Set
	Clock      clock.Clock
	Observer   Observer
	// Journal records ClientTokens before mutating calls; nil keeps them
	// in memory only.
	Journal Journal
	// Timeout bounds one HTTP exchange with the API (default 20s).
	Timeout time.Duration
	// MaxConcurrentCalls bounds SDK clients in use at once (default 8).
	MaxConcurrentCalls int
	// ThrottleWindow is the cloud's flow-control window
	// (DefaultThrottleWindow when 0): a throttled call's error says when
	// the next one opens (ThrottledError).
	ThrottleWindow time.Duration
}

// Client calls ECS and VPC. It is safe for concurrent use: every call
// borrows an SDK client of its own (the SDK's clients are not safe to
// share) from a small pool, so unrelated calls are not serialised.
type Client struct {
	region  string
	creds   credentials.CredentialsProvider
	ecsEP   endpoint
	vpcEP   endpoint
	timeout time.Duration
	// throttleWindow is the cloud's flow-control window.
	throttleWindow time.Duration
	clock          clock.Clock
	backoff        *backoff.Set
	obs            Observer
	limits         *rateLimits
	journal        Journal
	degrade        atomic.Value // Degradation

	ecsPool *sdkPool[*ecs.Client]
	vpcPool *sdkPool[*vpc.Client]
	// limits caches instance-type limits; types do not change.
	limitsCache sync.Map
}

// New returns a Client.
func New(o Options) (*Client, error) {
	if o.RegionID == "" {
		return nil, errors.New("cloud: region is required")
	}
	if o.Credentials == nil {
		return nil, errors.New("cloud: credentials are required")
	}
	ecsEP, err := parseEndpoint(o.ECSEndpoint)
	if err != nil {
		return nil, fmt.Errorf("cloud: ECS %w", err)
	}
	vpcEP, err := parseEndpoint(o.VPCEndpoint)
	if err != nil {
		return nil, fmt.Errorf("cloud: VPC %w", err)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Backoff == nil {
		o.Backoff = backoff.NewSet(o.Clock, nil)
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.Journal == nil {
		o.Journal = &memoryJournal{}
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultSDKTimeout
	}
	if o.ThrottleWindow <= 0 {
		o.ThrottleWindow = DefaultThrottleWindow
	}
	if o.MaxConcurrentCalls <= 0 {
		o.MaxConcurrentCalls = 8
	}
	c := &Client{region: o.RegionID, creds: o.Credentials, ecsEP: ecsEP, vpcEP: vpcEP, timeout: o.Timeout,
		clock: o.Clock, backoff: o.Backoff, obs: o.Observer, limits: newRateLimits(o.Clock, o.RateLimits),
		journal: o.Journal, throttleWindow: o.ThrottleWindow}
	c.degrade.Store(DegradationNone)
	c.ecsPool = newSDKPool(o.MaxConcurrentCalls, func(tr http.RoundTripper) (*ecs.Client, error) {
		return newECSClient(c.region, c.ecsEP, c.creds, c.timeout, "", tr)
	})
	c.vpcPool = newSDKPool(o.MaxConcurrentCalls, func(tr http.RoundTripper) (*vpc.Client, error) {
		return newVPCClient(c.region, c.vpcEP, c.creds, c.timeout, "", tr)
	})
	return c, nil
}

// SetDegradation switches classes of mutating calls off or on again.
func (c *Client) SetDegradation(d Degradation) { c.degrade.Store(d) }

// Degradation returns the current switch.
func (c *Client) Degradation() Degradation { return c.degrade.Load().(Degradation) }

// callClass says what a call does, for the degradation switch.
type callClass int

const (
	readCall callClass = iota
	allocCall
	releaseCall
)

// call runs one API call: degradation check, rate limit, the call,
// measurements, and throttling feedback to the limiter. It does not retry.
func (c *Client) call(ctx context.Context, action string, class callClass, fn func() error) error {
	if class != readCall {
		d := c.Degradation()
		if d == DegradationNoMutation || (d == DegradationNoRelease && class == releaseCall) {
			c.obs.APICall(action, 0, "Degraded")
			return fmt.Errorf("%s: %w (%s)", action, ErrDegraded, d)
		}
	}
	lim := c.limits.get(action)
	waited, err := lim.wait(ctx)
	c.obs.RateLimitWait(action, waited)
	if err != nil {
		return fmt.Errorf("%s: waiting for the rate limiter: %w", action, err)
	}
	start := c.clock.Now()
	err = fn()
	res := outcome(err)
	if err != nil && ctx.Err() != nil {
		res = "Canceled" // the caller gave up (or stopped), whatever the SDK made of it
	}
	c.obs.APICall(action, c.clock.Since(start), res)
	switch {
	case IsThrottling(err):
		lim.throttled()
		err = throttled(err, c.clock.Now(), c.throttleWindow)
	case err == nil:
		lim.succeeded()
	}
	return err
}

// ecsCall borrows an ECS client for fn.
func (c *Client) ecsCall(ctx context.Context, action string, class callClass, fn func(*ecs.Client) error) error {
	return c.call(ctx, action, class, func() error { return c.ecsPool.with(ctx, fn) })
}

// vpcCall borrows a VPC client for fn.
func (c *Client) vpcCall(ctx context.Context, action string, class callClass, fn func(*vpc.Client) error) error {
	return c.call(ctx, action, class, func() error { return c.vpcPool.with(ctx, fn) })
}

// sdkPool lends SDK clients, creating up to max of them on demand. A
// client is lent to one call at a time (the SDK's clients are not safe
// for concurrent use), and its requests carry that call's context.
type sdkPool[T any] struct {
	mk      func(http.RoundTripper) (T, error)
	idle    chan lent[T]
	tickets chan struct{}
}

// lent is an SDK client and the transport that gives its requests the
// borrower's context.
type lent[T any] struct {
	sdk T
	tr  *callTransport
}

func newSDKPool[T any](max int, mk func(http.RoundTripper) (T, error)) *sdkPool[T] {
	p := &sdkPool[T]{mk: mk, idle: make(chan lent[T], max), tickets: make(chan struct{}, max)}
	for i := 0; i < max; i++ {
		p.tickets <- struct{}{}
	}
	return p
}

// get lends a client to the call of ctx until put.
func (p *sdkPool[T]) get(ctx context.Context) (lent[T], error) {
	l, err := p.take(ctx)
	if err == nil {
		l.tr.bind(ctx)
	}
	return l, err
}

func (p *sdkPool[T]) take(ctx context.Context) (lent[T], error) {
	select {
	case l := <-p.idle:
		return l, nil
	default:
	}
	select {
	case l := <-p.idle:
		return l, nil
	case <-p.tickets:
		tr := newCallTransport()
		cl, err := p.mk(tr)
		if err != nil {
			p.tickets <- struct{}{}
			return lent[T]{}, fmt.Errorf("create SDK client: %w", err)
		}
		return lent[T]{sdk: cl, tr: tr}, nil
	case <-ctx.Done():
		return lent[T]{}, ctx.Err()
	}
}

// with lends a client to fn for the length of the call.
func (p *sdkPool[T]) with(ctx context.Context, fn func(T) error) error {
	l, err := p.get(ctx)
	if err != nil {
		return err
	}
	defer p.put(l)
	return fn(l.sdk)
}

func (p *sdkPool[T]) put(l lent[T]) {
	l.tr.unbind()
	p.idle <- l
}

// retry runs a call with the backoff policy key, retrying retryable
// outcomes only; a throttled one at the cloud's next window.
func (c *Client) retry(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	return c.retryWith(ctx, key, true, fn)
}

// retryHint is retry for a read whose answer is only a preference (how
// many addresses a vSwitch has left): a throttle ends it at once rather
// than holding up, for up to a window, the work that wanted the hint.
func (c *Client) retryHint(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	return c.retryWith(ctx, key, false, fn)
}

func (c *Client) retryWith(ctx context.Context, key string, waitWindow bool, fn func(ctx context.Context) error) error {
	return c.backoff.Retry(ctx, key, func(ctx context.Context) (bool, error) {
		err := fn(ctx)
		var again errRetry
		switch {
		case err == nil:
			return true, nil
		case errors.As(err, &again):
			return false, err
		case errors.Is(err, ErrDegraded) || !IsRetryable(err):
			return false, backoff.Permanent(err)
		}
		if d, ok := ThrottleWait(err, c.clock.Now()); ok {
			// Not before the next window; and not at all when that opens
			// after the caller's deadline: waiting would only spend the
			// time the caller has left for what comes after (a rollback).
			if dl, has := ctx.Deadline(); !waitWindow || has && c.clock.Now().Add(d).After(dl) {
				return false, backoff.Permanent(err)
			}
			return false, backoff.After(err, d)
		}
		return false, err
	})
}
