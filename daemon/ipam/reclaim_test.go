package ipam

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/internal/testwait"
)

// TestIdleReclaimJitter drives idle reclaim on a fake clock: the first
// round comes when the pool has been quiet for IdleReclaimAfter, and
// each next one after the interval stretched by a random part of up to
// IdleReclaimJitter × interval — exactly the interval with factor 0. The
// clock is set to 1ns before each round's time (no round) and then to
// that time (a round, with nothing else moving the clock), so the loop's
// timer is armed for exactly the jittered time. The pool's own unassigns
// do not restart the quiet period: with IdleReclaimAfter below the
// interval, rounds come an interval apart, not IdleReclaimAfter apart.
func TestIdleReclaimJitter(t *testing.T) {
	const (
		interval = 10 * time.Minute
		after    = 4 * time.Minute
		addrs    = 6 // one ENI: the primary and 5 secondaries, one per round
	)
	for _, factor := range []float64{0, 0.5} {
		t.Run(fmt.Sprintf("factor=%g", factor), func(t *testing.T) {
			e := newEnv(t, nil)
			e.cfg.MinIdle, e.cfg.MaxIdle = 0, 15
			e.cfg.BatchWindow = 0 // a fake-clock timer would hold every demand
			e.cfg.SyncPeriod = 24 * time.Hour
			e.cfg.IdleReclaimAfter, e.cfg.IdleReclaimInterval, e.cfg.IdleReclaimBatch = after, interval, 1
			e.cfg.IdleReclaimJitter = factor
			clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
			p, err := NewMultiIP(e.cfg, e.node, e.vsw, clk, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Restore(ctxT(t), nil); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { p.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })

			// One at a time, so that they land on one ENI.
			for i := range addrs {
				if _, err := p.Allocate(ctxT(t), fmt.Sprintf("ns/p%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range addrs {
				p.Release(fmt.Sprintf("ns/p%d", i), time.Time{})
			}
			testwait.Until(t, waitLimit, "the pool to settle", p.settled)
			if st := p.Stats(); st.ENIs != 1 || st.Idle != addrs {
				t.Fatalf("before reclaim: %+v, want %d idle on one ENI", st, addrs)
			}
			quiet := clk.Now().Add(after)

			// roundAt waits until the loop has armed the round's timer
			// (beside its sync ticker), sets the clock 1ns before at (the
			// timer must not fire, so no round can run) and then to at
			// (one address is given back), and returns the time the round
			// drew for the next one. A fake timer that fires leaves the
			// clock's waiters at once, in SetTime.
			idle := addrs
			roundAt := func(at time.Time) time.Time {
				t.Helper()
				testwait.Until(t, waitLimit, "the round's timer armed", func() bool { return clk.Waiters() == 2 })
				clk.SetTime(at.Add(-time.Nanosecond))
				if n := clk.Waiters(); n != 2 {
					t.Fatalf("the round's timer fired %v before its time %v", time.Nanosecond, at.Sub(quiet))
				}
				if got := p.Stats().Idle; got != idle {
					t.Fatalf("%v before the round's time: %d idle, want %d", time.Nanosecond, got, idle)
				}
				clk.SetTime(at)
				testwait.Until(t, waitLimit, fmt.Sprintf("a round at %v", at.Sub(quiet)), func() bool {
					clk.Step(0) // fires a timer armed for now after the SetTime
					return p.Stats().Idle == idle-1
				})
				idle--
				testwait.Until(t, waitLimit, "the round's unassign to finish", p.settled)
				p.mu.Lock()
				next := p.nextReclaim
				p.mu.Unlock()
				if !next.After(at) {
					t.Fatalf("after the round at %v the pool plans none (next %v): its own unassign restarted the quiet period?",
						at.Sub(quiet), next)
				}
				return next
			}
			at := quiet
			var waits []time.Duration
			for len(waits) < addrs-2 {
				next := roundAt(at)
				waits = append(waits, next.Sub(at))
				at = next
			}
			roundAt(at)
			t.Logf("waits between rounds: %v", waits)
			for i, w := range waits {
				if factor == 0 && w != interval {
					t.Errorf("wait %d is %v, want exactly %v with factor 0", i, w, interval)
				}
				if hi := time.Duration(float64(interval) * (1 + factor)); w < interval || (factor > 0 && w >= hi) {
					t.Errorf("wait %d is %v, want within [%v, %v)", i, w, interval, hi)
				}
			}
			if factor > 0 {
				same := true
				for _, w := range waits[1:] {
					same = same && w == waits[0]
				}
				if same {
					t.Errorf("all %d waits are %v: not jittered", len(waits), waits[0])
				}
			}
			if st := p.Stats(); st.Idle != 1 || len(e.cloudAddrs()) != 1 {
				t.Errorf("after %d rounds: %+v, cloud holds %d addresses; want 1", addrs-1, st, len(e.cloudAddrs()))
			}
		})
	}
}

// TestIdleReclaimJitterFactorChecked: a jitter factor that is negative or
// not a finite number is refused, not turned into a negative or random wait.
func TestIdleReclaimJitterFactorChecked(t *testing.T) {
	for _, f := range []float64{-0.1, math.NaN(), math.Inf(1)} {
		cfg := MultiIPConfig{MaxENI: 1, IPsPerENI: 2, IdleReclaimJitter: f}
		if _, err := NewMultiIP(cfg, nil, nil, nil, nil, nil); err == nil {
			t.Errorf("jitter factor %g accepted", f)
		}
	}
}
