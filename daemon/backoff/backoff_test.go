package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func fast(steps int) map[string]wait.Backoff {
	return map[string]wait.Backoff{"t": {Duration: time.Millisecond, Factor: 1, Steps: steps}}
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
	s := NewSet(nil, map[string]wait.Backoff{"t": {Duration: time.Hour, Steps: 3}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := s.Retry(ctx, "t", func(context.Context) (bool, error) { return false, errors.New("x") })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err=%v", err)
	}
}

func TestOverridesAndDefaults(t *testing.T) {
	s := NewSet(nil, map[string]wait.Backoff{ENIOps: {Duration: time.Second, Steps: 1}})
	if s.Get(ENIOps).Steps != 1 || s.Get(ENICreate).Duration != 10*time.Second || s.Get("unknown").Steps != 6 {
		t.Fatalf("policies: %+v %+v %+v", s.Get(ENIOps), s.Get(ENICreate), s.Get("unknown"))
	}
}

// Poll keeps going at the cap: an interval that grows past it must not
// end the polling (wait.Backoff zeroes its steps when it hits the cap).
func TestPollContinuesAtCap(t *testing.T) {
	s := NewSet(nil, map[string]wait.Backoff{"grow": {Duration: time.Millisecond, Factor: 2, Cap: 4 * time.Millisecond, Steps: 1}})
	calls := 0
	err := s.Poll(context.Background(), "grow", func(context.Context) (bool, error) {
		calls++
		return calls == 12, nil
	})
	if err != nil || calls != 12 {
		t.Fatalf("Poll = %v after %d calls, want success on call 12", err, calls)
	}
}
