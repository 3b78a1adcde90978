package cloud

import (
	"errors"
	"math/rand/v2"
	"time"
)

// DefaultThrottleWindow is ECS's flow-control window: calls are counted
// per API in clock minutes, and "if an API is throttled in minute T, it
// can be called again at T+1".
const DefaultThrottleWindow = time.Minute

// ThrottledError is a call the cloud refused for flow control, with the
// moment the action may be called again: the start of the next window.
// Calling before then only spends more calls on more refusals.
type ThrottledError struct {
	Err error
	// Until is when the next window opens.
	Until time.Time
	// spread is how far past Until a caller's retry is jittered.
	spread time.Duration
}

func (e *ThrottledError) Error() string { return e.Err.Error() }
func (e *ThrottledError) Unwrap() error { return e.Err }

// throttled wraps err, a throttled answer at now, with the next window of
// length window (windows are counted from the Unix epoch, as the cloud's
// clock minutes are).
func throttled(err error, now time.Time, window time.Duration) *ThrottledError {
	next := (now.UnixNano()/int64(window) + 1) * int64(window)
	return &ThrottledError{Err: err, Until: time.Unix(0, next), spread: window / 60}
}

// ThrottleWait is how long after now a caller whose call failed with err
// waits before calling again: until the next window opens, then a random
// part of the window's first sixtieth (a second of a minute), so that a
// fleet throttled together does not call again in one instant. ok is
// false when err is not a throttle this client saw.
func ThrottleWait(err error, now time.Time) (d time.Duration, ok bool) {
	var te *ThrottledError
	if !errors.As(err, &te) {
		return 0, false
	}
	d = max(te.Until.Sub(now), 0)
	if te.spread > 0 {
		d += rand.N(te.spread)
	}
	return d, true
}
