package cni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// The node-wide datapath lock is Terway's, given up after 11 s.
const (
	datapathLockName    = "datapath.lock"
	datapathLockTimeout = 11 * time.Second
)

// fileLock is an exclusive flock(2) on a file (gofrs/flock): the kernel
// drops it when the holder dies, so a plugin killed mid-call (the
// runtime's timeout) never wedges the node.
type fileLock struct {
	fl *flock.Flock
}

// lockFile takes an exclusive lock on path, creating the file (0600),
// waiting until ctx ends. A lock file may be removed by its holder (DEL
// removes the container's): after locking, the file must still be the
// one at path, or the lock is taken again on the new file.
func lockFile(ctx context.Context, path string) (*fileLock, error) {
	for {
		fl := flock.New(path, flock.SetPermissions(0o600))
		if err := lockOrGiveUp(ctx, fl); err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if sameFile(fl, path) {
			return &fileLock{fl: fl}, nil
		}
		_ = fl.Unlock() // removed while we waited: lock the new one
	}
}

// lockOrGiveUp takes fl with a blocking flock(2), so that the kernel
// hands the lock over the moment its holder lets go. Terway polls every
// 200 ms instead: ten pods starting together on a node then waited up to
// a second and more for a datapath setup of a few milliseconds each. A
// waiter whose ctx ends gives up; its blocked call is left to return,
// and lets go at once if it got the lock.
func lockOrGiveUp(ctx context.Context, fl *flock.Flock) error {
	if ok, err := fl.TryLock(); err != nil || ok {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fl.Lock() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				_ = fl.Unlock()
			}
		}()
		return fmt.Errorf("held by another invocation: %w", context.Cause(ctx))
	}
}

// sameFile reports whether the locked file is still the one at path.
func sameFile(fl *flock.Flock, path string) bool {
	a, err := fl.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// unlock releases the lock.
func (l *fileLock) unlock() {
	_ = l.fl.Unlock()
}

// unlockAndRemove deletes the lock file, then releases the lock: waiters
// find the file gone and lock a fresh one.
func (l *fileLock) unlockAndRemove() {
	_ = os.Remove(l.fl.Path())
	_ = l.fl.Unlock()
}

// containerLockPath is the per-container lock file. The suffix keeps it
// apart from datapath.lock whatever the container ID.
func containerLockPath(stateDir, containerID string) string {
	return filepath.Join(stateDir, containerID+".container.lock")
}

// lockContainer serialises the invocations for one container.
func lockContainer(ctx context.Context, stateDir, containerID string) (*fileLock, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir %s: %w", stateDir, err)
	}
	return lockFile(ctx, containerLockPath(stateDir, containerID))
}

// withDatapathLock runs fn under the node-wide datapath lock, waiting at
// most datapathLockTimeout (and not past ctx).
func withDatapathLock(ctx context.Context, stateDir string, fn func() error) error {
	_, err := withDatapathLockTimed(ctx, stateDir, fn)
	return err
}

// withDatapathLockTimed is withDatapathLock that also says how long it
// waited for the lock (ADD logs it).
func withDatapathLockTimed(ctx context.Context, stateDir string, fn func() error) (time.Duration, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, datapathLockTimeout,
		fmt.Errorf("datapath lock not free after %v", datapathLockTimeout))
	defer cancel()
	t0 := time.Now()
	l, err := lockFile(ctx, filepath.Join(stateDir, datapathLockName))
	waited := time.Since(t0)
	if err != nil {
		return waited, err
	}
	defer l.unlock()
	return waited, fn()
}
