package daemon

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// every runs f every period on the daemon's clock until ctx ends; the
// first run is first from now (at once when first <= 0). A period is
// counted from the end of the previous run (sliding), so a slow run is
// not followed at once by the next.
func (d *Daemon) every(ctx context.Context, first, period time.Duration, f func(context.Context)) {
	if first > 0 {
		t := d.clock.NewTimer(first)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
	wait.BackoffUntilWithContext(ctx, f, fixedPeriod{clock: d.clock, period: period}, true)
}

// fixedPeriod is a wait.BackoffManager that always waits period on its
// clock: wait.UntilWithContext's schedule, on an injectable clock.
type fixedPeriod struct {
	clock  clock.Clock
	period time.Duration
}

// Backoff returns a new timer: BackoffUntilWithContext drains or stops
// each one before it asks for the next.
func (p fixedPeriod) Backoff() clock.Timer { return p.clock.NewTimer(p.period) }
