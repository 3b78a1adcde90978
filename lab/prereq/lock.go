package prereq

import (
	"context"
	"fmt"
	"time"

	"github.com/gofrs/flock"
)

// lockPoll is how often a waiting prereq run tries the cache lock again.
const lockPoll = 500 * time.Millisecond

// lockCache takes an exclusive flock(2) on <cache>/lock (gofrs/flock, the
// file 0644), so that two lab commands started at once do not build into
// the same directories; the second says once that it waits, and waits
// until ctx ends. The kernel drops the lock when the process dies, so a
// crash leaves nothing to clean up.
func lockCache(ctx context.Context, path string, p *progress) (unlock func(), err error) {
	l := flock.New(path, flock.SetPermissions(0o644))
	ok, err := l.TryLock()
	if !ok && err == nil {
		p.printf("waiting for another prereq run to release %s", path)
		ok, err = l.TryLockContext(ctx, lockPoll)
	}
	if !ok {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = l.Unlock() }, nil
}
