package fleet

import (
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// fleetClock is fakecloud's clock and the daemons': the real one, shifted
// once, just before the fleet starts, so that the measurement begins at
// the start of a throttle window (fakecloud's windows are fixed: now ÷
// window). Without it the run would start at a random phase of the window
// and its throttling would vary from run to run. The daemons share it as
// NTP-synced nodes share the cloud's minute: a throttled call waits for
// the next window by it. The shift is less than a window, far inside the
// 15 minutes fakecloud allows between a request's signing time and its
// own.
type fleetClock struct {
	clock.RealClock
	off atomic.Int64
}

func (c *fleetClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *fleetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *fleetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// align shifts the clock so that now starts a window of length w.
func (c *fleetClock) align(w time.Duration) {
	if w <= 0 {
		return
	}
	into := time.Duration(time.Now().UnixNano() % int64(w))
	c.off.Store(int64(w - into))
}
