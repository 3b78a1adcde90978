// Package testwait waits, in tests, for a condition that something running
// concurrently will make true: an interface the fabric plugs in, a pool
// the daemon refills.
//
// It polls rather than sleeping a fixed time, so a test waits as long as
// the slowest machine needs and no longer. Tests written with gomega use
// its Eventually instead; tests whose subject is time itself use a fake
// clock, not this.
package testwait

import (
	"testing"
	"time"
)

// Interval is how often a condition is polled.
const Interval = 10 * time.Millisecond

// For polls cond until it returns nil and fails the test with cond's last
// error if that has not happened within timeout.
func For(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
			return
		}
		time.Sleep(Interval)
	}
}

// Until polls cond until it is true and fails the test if that has not
// happened within timeout.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	For(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

type notYet struct{}

func (notYet) Error() string { return "condition still false" }

var errNotYet error = notYet{}
