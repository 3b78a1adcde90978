package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// lockPoll is how often a daemon waiting for the node lock tries again.
const lockPoll = 100 * time.Millisecond

// takeLock takes the node lock, which makes sure one daemon runs per
// node: a second one waits up to timeout, then fails with a message
// naming the lock file. The lock is an flock(2) on path (0600, its
// directory 0700), so the kernel drops it when the holder dies: a
// restarted daemon never waits for a crashed one.
func takeLock(path string, timeout time.Duration) (*flock.Flock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	l := flock.New(path, flock.SetPermissions(0o600))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ok, err := l.TryLockContext(ctx, lockPoll)
	switch {
	case ok:
		return l, nil
	case err == nil || errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("another terwayd holds %s (one daemon per node; waited %v)", path, timeout)
	default:
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
}
