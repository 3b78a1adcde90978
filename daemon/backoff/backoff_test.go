package backoff

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/internal/testwait"
)

func fast(steps int) map[string]Policy {
	return map[string]Policy{"t": {Duration: time.Millisecond, Factor: 1, Steps: steps}}
}

func TestRetryUntilDone(t *testing.T) {
	s := NewSet(nil, fast(5))
	n := 0
	err := s.Retry(context.Background(), "t", func(context.Context) (bool, error) {
		n++
		return n == 3, nil
	})
	if err != nil || n != 3 {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

func TestRetryExhaustedKeepsLastError(t *testing.T) {
	s := NewSet(nil, fast(2))
	boom := errors.New("boom")
	n := 0
	err := s.Retry(context.Background(), "t", func(context.Context) (bool, error) { n++; return false, boom })
	if !errors.Is(err, ErrExhausted) || !errors.Is(err, boom) || n != 3 {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

func TestRetryPermanentStops(t *testing.T) {
	s := NewSet(nil, fast(5))
	boom := errors.New("bad request")
	n := 0
	err := s.Retry(context.Background(), "t", func(context.Context) (bool, error) { n++; return false, Permanent(boom) })
	if err != boom || n != 1 {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

func TestRetryContext(t *testing.T) {
	s := NewSet(nil, map[string]Policy{"t": {Duration: time.Hour, Steps: 3}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := s.Retry(ctx, "t", func(context.Context) (bool, error) { return false, errors.New("x") })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err=%v", err)
	}
}

func TestOverridesAndDefaults(t *testing.T) {
	s := NewSet(nil, map[string]Policy{ENIOps: {Duration: time.Second, Steps: 1}})
	if s.Get(ENIOps).Steps != 1 || s.Get(ENICreate).Duration != 10*time.Second || s.Get("unknown").Steps != 6 {
		t.Fatalf("policies: %+v %+v %+v", s.Get(ENIOps), s.Get(ENICreate), s.Get("unknown"))
	}
}

// Poll keeps going at the cap: an interval that grows past it must not
// end the polling (wait.Backoff zeroes its steps when it hits the cap).
func TestPollContinuesAtCap(t *testing.T) {
	s := NewSet(nil, map[string]Policy{"grow": {Duration: time.Millisecond, Factor: 2, Cap: 4 * time.Millisecond, Steps: 1}})
	calls := 0
	err := s.Poll(context.Background(), "grow", func(context.Context) (bool, error) {
		calls++
		return calls == 12, nil
	})
	if err != nil || calls != 12 {
		t.Fatalf("Poll = %v after %d calls, want success on call 12", err, calls)
	}
}

// A policy's InitialDelay is waited, on the set's clock, before the first
// attempt of Retry and of Poll: the attempt must not run before the fake
// clock has passed it. Before Policy existed the daemon dropped the field
// and the first attempt ran at once.
func TestInitialDelayBeforeFirstAttempt(t *testing.T) {
	for _, poll := range []bool{false, true} {
		t.Run(map[bool]string{false: "Retry", true: "Poll"}[poll], func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
			s := NewSet(clk, map[string]Policy{"t": {InitialDelay: 10 * time.Second, Duration: time.Second, Factor: 1, Steps: 3}})
			calls := make(chan time.Time, 10)
			done := make(chan error, 1)
			go func() {
				fn := func(context.Context) (bool, error) { calls <- clk.Now(); return true, nil }
				if poll {
					done <- s.Poll(context.Background(), "t", fn)
				} else {
					done <- s.Retry(context.Background(), "t", fn)
				}
			}()
			start := clk.Now()
			waitForTimer(t, clk, calls)
			// A fake timer that fires leaves the clock's waiters: one still
			// there 1ms short of the InitialDelay has not fired, and no
			// attempt can have started.
			clk.Step(10*time.Second - time.Millisecond)
			if !clk.HasWaiters() || len(calls) > 0 {
				t.Fatalf("the InitialDelay's timer fired at +%v, before 10s (%d attempts)", clk.Since(start), len(calls))
			}
			clk.Step(time.Millisecond)
			select {
			case at := <-calls:
				if d := at.Sub(start); d != 10*time.Second {
					t.Errorf("first attempt at +%v, want +10s", d)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no attempt after the InitialDelay passed")
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// InitialDelay is waited once: the waits between later attempts are the
// policy's steps only.
func TestInitialDelayOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	s := NewSet(clk, map[string]Policy{"t": {InitialDelay: 5 * time.Second, Duration: time.Second, Factor: 1, Steps: 3}})
	calls := make(chan time.Time, 10)
	done := make(chan error, 1)
	go func() {
		n := 0
		done <- s.Retry(context.Background(), "t", func(context.Context) (bool, error) {
			calls <- clk.Now()
			n++
			return n == 3, nil
		})
	}()
	start := clk.Now()
	var got []time.Duration
	for len(got) < 3 {
		// Retry either attempts or waits on the clock: an attempt is
		// taken first, so that the clock moves only while Retry waits.
		testwait.Until(t, 5*time.Second, "an attempt or a timer", func() bool { return len(calls) > 0 || clk.HasWaiters() })
		select {
		case at := <-calls:
			got = append(got, at.Sub(start))
		default:
			clk.Step(time.Second)
		}
	}
	if want := []time.Duration{5 * time.Second, 6 * time.Second, 7 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("attempts at %v, want %v", got, want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A context that ends during the InitialDelay ends the call without an
// attempt, with the context's error.
func TestInitialDelayContext(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	s := NewSet(clk, map[string]Policy{"t": {InitialDelay: time.Hour, Duration: time.Second, Steps: 3}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	n := 0
	go func() {
		done <- s.Retry(ctx, "t", func(context.Context) (bool, error) { n++; return true, nil })
	}()
	waitForTimer(t, clk, nil)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || n != 0 {
		t.Fatalf("Retry = %v after %d attempts, want context.Canceled and none", err, n)
	}
}

// The built-in table is the one config decodes over: every policy is
// usable as is (Steps >= 1) and unknown keys get Default's.
func TestDefaultFor(t *testing.T) {
	for k, p := range Defaults() {
		if p.Steps < 1 || p.Duration <= 0 {
			t.Errorf("Defaults()[%q] = %+v: not a usable policy", k, p)
		}
		if DefaultFor(k) != p {
			t.Errorf("DefaultFor(%q) = %+v, want %+v", k, DefaultFor(k), p)
		}
	}
	if DefaultFor("no_such_key") != Defaults()[Default] {
		t.Errorf("DefaultFor(no_such_key) = %+v, want Default's", DefaultFor("no_such_key"))
	}
	d := Defaults()
	d[ENIOps] = Policy{}
	if DefaultFor(ENIOps).Steps == 0 {
		t.Error("Defaults() returned the table itself, not a copy")
	}
}

// waitForTimer waits until the code under test has armed a timer on clk;
// an attempt reported on calls meanwhile fails the test, since no fake
// time has passed yet.
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock, calls <-chan time.Time) {
	t.Helper()
	start := clk.Now()
	testwait.Until(t, 5*time.Second, "a timer armed on the fake clock", func() bool {
		select {
		case at := <-calls:
			t.Fatalf("an attempt ran at +%v, before the InitialDelay passed", at.Sub(start))
		default:
		}
		return clk.HasWaiters()
	})
}
