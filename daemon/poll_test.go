package daemon

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// poll calls cond every interval, at once first, until it is true; the
// error says that timeout passed first. It is for waits whose timeout the
// caller reports in its own way (a schedule's violation, a count of pods
// that failed) rather than as a test failure on the spot, which is
// testwait's.
func poll(interval, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) { return cond(), nil })
}
