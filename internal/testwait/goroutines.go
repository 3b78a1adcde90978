package testwait

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// Goroutines waits until at most most goroutines run, as after a
// component's Close its goroutines end one by one, and fails the test
// with every goroutine's stack if that has not happened within timeout.
func Goroutines(t testing.TB, timeout time.Duration, most int) {
	t.Helper()
	For(t, timeout, fmt.Sprintf("at most %d goroutines", most), func() error {
		if runtime.NumGoroutine() > most {
			return goroutinesLeft{}
		}
		return nil
	})
}

// goroutinesLeft dumps the goroutines only when it is printed: the wait
// builds one at every poll.
type goroutinesLeft struct{}

func (goroutinesLeft) Error() string {
	buf := make([]byte, 1<<20)
	return fmt.Sprintf("%d goroutines:\n%s", runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
}
