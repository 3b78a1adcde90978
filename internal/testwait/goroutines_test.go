package testwait

import (
	"runtime"
	"testing"
	"time"
)

func TestGoroutinesWaitsForTheirEnd(t *testing.T) {
	before := runtime.NumGoroutine()
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-release
		time.Sleep(3 * Interval) // still running for a few polls
	}()
	close(release)
	Goroutines(t, 5*time.Second, before)
	select {
	case <-done:
	default:
		t.Fatal("Goroutines returned while the goroutine still ran")
	}
}

func TestGoroutinesFailsWithStacks(t *testing.T) {
	before := runtime.NumGoroutine()
	stop := make(chan struct{})
	defer close(stop)
	// Ten more than before, so that goroutines of the test framework
	// ending meanwhile cannot bring the count back down.
	for range 10 {
		go func() { <-stop }()
	}
	rec := &failRecorder{TB: t}
	Goroutines(rec, 30*time.Millisecond, before)
	if rec.msg == "" {
		t.Fatal("Goroutines did not fail with ten goroutines too many")
	}
}
