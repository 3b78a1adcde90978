package daemon

import (
	"context"
	"log/slog"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/internal/testwait"
)

// TestFirstGCSoonAfterStart: the first GC round comes firstGCDelay after
// the loop starts (it starts once the API server has been read), not a
// whole gc_period later — a daemon back from a crash loop missed the DELs
// of pods deleted meanwhile — and the rounds after it come every
// gc_period. A gc_period shorter than firstGCDelay comes first.
func TestFirstGCSoonAfterStart(t *testing.T) {
	for _, tc := range []struct {
		name          string
		period, first time.Duration
	}{
		{"default period", config.DefaultGCPeriod, firstGCDelay},
		{"period shorter than the first delay", 10 * time.Second, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Now())
			cfg := config.Defaults()
			cfg.GCPeriod.Duration = tc.period
			// The API server is not marked read: GC returns at once
			// without touching anything, and the round is counted.
			d := &Daemon{cfg: cfg, clock: clk, log: slog.New(slog.DiscardHandler)}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { d.gcLoop(ctx); close(done) }()
			defer func() { cancel(); <-done }()

			armed := func(what string) {
				t.Helper()
				testwait.Until(t, waitLimit, what+" waiting on the clock", func() bool { return clk.Waiters() == 1 })
			}
			armed("the first round")
			clk.Step(tc.first - time.Millisecond)
			if n := d.gcRounds.Load(); n != 0 || clk.Waiters() != 1 {
				t.Fatalf("%d GC rounds %v after start, want none before %v", n, tc.first-time.Millisecond, tc.first)
			}
			clk.Step(time.Millisecond)
			testwait.Until(t, waitLimit, "the first GC round", func() bool { return d.gcRounds.Load() == 1 })
			armed("the second round")
			clk.Step(tc.period - time.Millisecond)
			if n := d.gcRounds.Load(); n != 1 {
				t.Fatalf("%d GC rounds before a gc_period passed after the first, want 1", n)
			}
			clk.Step(time.Millisecond)
			testwait.Until(t, waitLimit, "the second GC round", func() bool { return d.gcRounds.Load() == 2 })
		})
	}
}
