package cloud

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

// vSwitch selection policies.
const (
	// SelectRandom shuffles the candidates (Terway's default).
	SelectRandom = "random"
	// SelectMostFree orders candidates by free addresses, most first
	// (Terway's "ordered").
	SelectMostFree = "most"
	// SelectOrdered keeps the configured order.
	SelectOrdered = "ordered"
)

// unknownAvailable is VSwitch.Available when the cloud could not say
// (a throttled Describe): Pick still offers the vSwitch, after those
// known to have addresses.
const unknownAvailable = -1

// ErrNoVSwitch is returned when every candidate vSwitch is dry or blocked.
var ErrNoVSwitch = errors.New("no vSwitch with free addresses")

// VSwitchPool picks the vSwitch for a new ENI among the configured ones of
// the node's zone. A vSwitch the cloud reported dry is blocked for a
// while; it comes back by itself when the block expires or when the daemon
// releases an address in it, so a node never stays wedged (Terway #100).
type VSwitchPool struct {
	api        *Client
	clock      clock.Clock
	policy     string
	candidates []string
	ttl        time.Duration
	blockFor   time.Duration

	// flight shares one Describe among the picks that miss the cache
	// together: a node creating two ENIs at once asked twice, and a
	// fleet starting together thereby doubled its DescribeVSwitches into
	// the throttle.
	flight singleflight.Group

	mu      sync.Mutex
	cache   map[string]cachedVSwitch
	blocked map[string]time.Time
	rng     *rand.Rand
}

type cachedVSwitch struct {
	v  VSwitch
	at time.Time
}

// NewVSwitchPool returns a pool over candidates. ttl is how long a
// Describe answer is trusted (Terway: 10m); blockFor how long a dry
// vSwitch is skipped (Terway: 10m).
func NewVSwitchPool(api *Client, c clock.Clock, policy string, candidates []string, ttl, blockFor time.Duration, seed uint64) (*VSwitchPool, error) {
	switch policy {
	case "", SelectRandom:
		policy = SelectRandom
	case SelectMostFree, SelectOrdered:
	default:
		return nil, fmt.Errorf("vswitch_selection_policy %q (random, ordered, most)", policy)
	}
	if len(candidates) == 0 {
		return nil, errors.New("no candidate vSwitches")
	}
	if c == nil {
		c = clock.RealClock{}
	}
	return &VSwitchPool{api: api, clock: c, policy: policy, candidates: append([]string(nil), candidates...),
		ttl: ttl, blockFor: blockFor, cache: map[string]cachedVSwitch{}, blocked: map[string]time.Time{},
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}, nil
}

// Pick returns the vSwitch to use now, per policy, skipping blocked and
// dry ones.
func (p *VSwitchPool) Pick(ctx context.Context) (VSwitch, error) {
	var usable []VSwitch
	var lastErr error
	for _, id := range p.candidates {
		if p.isBlocked(id) {
			continue
		}
		v, err := p.get(ctx, id)
		if IsThrottling(err) {
			// How many addresses it has left is only a preference among
			// candidates; the Create answers whether it has any.
			v, err = VSwitch{ID: id, Available: unknownAvailable}, nil
		}
		if err != nil {
			lastErr = err
			continue
		}
		if v.Available > 0 || v.Available == unknownAvailable {
			usable = append(usable, v)
		}
	}
	if len(usable) == 0 {
		if lastErr != nil {
			return VSwitch{}, fmt.Errorf("%w (last error: %w)", ErrNoVSwitch, lastErr)
		}
		return VSwitch{}, ErrNoVSwitch
	}
	switch p.policy {
	case SelectRandom:
		p.mu.Lock()
		i := p.rng.IntN(len(usable))
		p.mu.Unlock()
		return usable[i], nil
	case SelectMostFree:
		sort.SliceStable(usable, func(i, j int) bool { return usable[i].Available > usable[j].Available })
	}
	return usable[0], nil
}

func (p *VSwitchPool) isBlocked(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.blocked[id]
	if ok && !p.clock.Now().Before(until) {
		delete(p.blocked, id)
		delete(p.cache, id) // look again
		return false
	}
	return ok
}

// DryRecheck is how long an answer that a vSwitch has no free address is
// trusted, however long the cache's TTL: the vSwitch may get addresses
// back at any moment (other nodes release theirs, an operator widens it),
// and a node that trusted a dry answer for the whole TTL stayed wedged
// with pods waiting for up to ten minutes after the addresses came back.
const DryRecheck = 30 * time.Second

func (p *VSwitchPool) get(ctx context.Context, id string) (VSwitch, error) {
	p.mu.Lock()
	c, ok := p.cache[id]
	p.mu.Unlock()
	ttl := p.ttl
	if ok && c.v.Available == 0 {
		ttl = min(ttl, DryRecheck)
	}
	if ok && p.clock.Since(c.at) < ttl {
		return c.v, nil
	}
	r, err, _ := p.flight.Do(id, func() (any, error) {
		v, err := p.api.DescribeVSwitch(ctx, id)
		if err == nil {
			p.mu.Lock()
			p.cache[id] = cachedVSwitch{v: v, at: p.clock.Now()}
			p.mu.Unlock()
		}
		return v, err
	})
	if err != nil {
		return VSwitch{}, err
	}
	return r.(VSwitch), nil
}

// Get returns a vSwitch's facts (cached).
func (p *VSwitchPool) Get(ctx context.Context, id string) (VSwitch, error) { return p.get(ctx, id) }

// Block skips a vSwitch the cloud reported dry.
func (p *VSwitchPool) Block(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked[id] = p.clock.Now().Add(p.blockFor)
}

// Released unblocks a vSwitch in which addresses were just given back.
func (p *VSwitchPool) Released(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.blocked, id)
	delete(p.cache, id)
}

// Blocked lists the vSwitches blocked now, with when each comes back.
func (p *VSwitchPool) Blocked() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]time.Time{}
	for k, v := range p.blocked {
		out[k] = v
	}
	return out
}
