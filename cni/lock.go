package cni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Lock timing. The node-wide datapath lock is Terway's: polled every
// 200 ms, given up after 11 s.
const (
	datapathLockName    = "datapath.lock"
	datapathLockTimeout = 11 * time.Second
	datapathLockPoll    = 200 * time.Millisecond
	containerLockPoll   = 50 * time.Millisecond
)

// fileLock is an exclusive flock on a file.
type fileLock struct {
	f    *os.File
	path string
}

// lockFile takes an exclusive flock on path, creating the file, polling
// until ctx ends. A lock file may be removed by its holder (DEL removes
// the container's): after locking, the file must still be the one at
// path, or the lock is taken again on the new file.
func lockFile(ctx context.Context, path string, poll time.Duration) (*fileLock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open lock %s: %w", path, err)
		}
		if err := flockPoll(ctx, f, poll); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if sameFile(f, path) {
			return &fileLock{f: f, path: path}, nil
		}
		_ = f.Close() // removed while we waited: lock the new one
	}
}

func flockPoll(ctx context.Context, f *os.File, poll time.Duration) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("held by another invocation: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
}

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// unlock releases the lock.
func (l *fileLock) unlock() {
	_ = l.f.Close()
}

// unlockAndRemove deletes the lock file, then releases the lock: waiters
// find the file gone and lock a fresh one.
func (l *fileLock) unlockAndRemove() {
	_ = os.Remove(l.path)
	_ = l.f.Close()
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
	return lockFile(ctx, containerLockPath(stateDir, containerID), containerLockPoll)
}

// withDatapathLock runs fn under the node-wide datapath lock, waiting at
// most datapathLockTimeout (and not past ctx).
func withDatapathLock(ctx context.Context, stateDir string, fn func() error) error {
	ctx, cancel := context.WithTimeoutCause(ctx, datapathLockTimeout,
		fmt.Errorf("datapath lock not free after %v", datapathLockTimeout))
	defer cancel()
	l, err := lockFile(ctx, filepath.Join(stateDir, datapathLockName), datapathLockPoll)
	if err != nil {
		return err
	}
	defer l.unlock()
	return fn()
}
