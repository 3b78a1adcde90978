package testwait

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTrue(t *testing.T) {
	var n atomic.Int32
	Until(t, 5*time.Second, "third poll", func() bool { return n.Add(1) >= 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("polled %d times, want 3", got)
	}
}

// failRecorder is a testing.TB whose Fatalf records instead of stopping
// the calling goroutine's test.
type failRecorder struct {
	testing.TB
	msg string
}

func (f *failRecorder) Helper() {}
func (f *failRecorder) Fatalf(format string, args ...any) {
	f.msg = format
	_ = args
}

func TestForFailsWithLastError(t *testing.T) {
	rec := &failRecorder{TB: t}
	For(rec, 30*time.Millisecond, "never", func() error { return errors.New("still down") })
	if rec.msg == "" {
		t.Fatal("For did not fail the test after its timeout")
	}
}
