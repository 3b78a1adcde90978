package cni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"

	"github.com/terway-sim/terway/cni/datapath"
)

// The node-wide datapath lock is Terway's, given up after 11 s.
const (
	datapathLockName    = "datapath.lock"
	datapathLockTimeout = 11 * time.Second
)

// lockMode is how a lock file is held: shared (flock LOCK_SH) or
// exclusive.
type lockMode bool

const (
	exclusive lockMode = false
	shared    lockMode = true
)

// fileLock is an exclusive flock(2) on a file (gofrs/flock): the kernel
// drops it when the holder dies, so a plugin killed mid-call (the
// runtime's timeout) never wedges the node.
type fileLock struct {
	fl *flock.Flock
}

// lockFile takes a lock on path, creating the file (0600), waiting until
// ctx ends. A lock file may be removed by its holder (DEL removes the
// container's): after locking, the file must still be the one at path, or
// the lock is taken again on the new file.
func lockFile(ctx context.Context, path string, mode lockMode) (*fileLock, error) {
	for {
		fl := flock.New(path, flock.SetPermissions(0o600))
		if err := lockOrGiveUp(ctx, fl, mode); err != nil {
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
func lockOrGiveUp(ctx context.Context, fl *flock.Flock, mode lockMode) error {
	try, lock := fl.TryLock, fl.Lock
	if mode == shared {
		try, lock = fl.TryRLock, fl.RLock
	}
	if ok, err := try(); err != nil || ok {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- lock() }()
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
	return lockFile(ctx, containerLockPath(stateDir, containerID), exclusive)
}

// podLockPath is the lock of one pod's datapath, named for its host veth,
// which every sandbox of the pod shares: a DEL of the old sandbox and an
// ADD of the new one never run at once.
func podLockPath(stateDir, hostVeth string) string {
	return filepath.Join(stateDir, hostVeth+".veth.lock")
}

// withDatapathLock runs fn under the datapath locks spec needs, waiting at
// most datapathLockTimeout (and not past ctx). With gone, a pod lock is
// removed once fn has succeeded: the pod's datapath is gone with it.
func withDatapathLock(ctx context.Context, stateDir string, spec *datapath.Spec, gone bool, fn func() error) error {
	_, err := withDatapathLockTimed(ctx, stateDir, spec, gone, fn)
	return err
}

// withDatapathLockTimed is withDatapathLock that also says how long it
// waited for the locks (ADD logs it).
//
// A kind whose pods may be set up at once (spec.SetsUpConcurrently) holds
// the node's datapath lock shared and its pod's lock exclusive: ten pods
// starting together no longer queue behind each other's setup. Any other
// kind holds the node's lock exclusive, as Terway's plugin does for all.
func withDatapathLockTimed(ctx context.Context, stateDir string, spec *datapath.Spec, gone bool, fn func() error) (time.Duration, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, datapathLockTimeout,
		fmt.Errorf("datapath lock not free after %v", datapathLockTimeout))
	defer cancel()
	t0 := time.Now()
	perPod := spec.SetsUpConcurrently() && spec.HostVeth != ""
	mode := exclusive
	if perPod {
		mode = shared
	}
	node, err := lockFile(ctx, filepath.Join(stateDir, datapathLockName), mode)
	if err != nil {
		return time.Since(t0), err
	}
	defer node.unlock()
	if !perPod {
		return time.Since(t0), fn()
	}
	pod, err := lockFile(ctx, podLockPath(stateDir, spec.HostVeth), exclusive)
	if err != nil {
		return time.Since(t0), err
	}
	waited := time.Since(t0)
	if err := fn(); err != nil || !gone {
		pod.unlock()
		return waited, err
	}
	pod.unlockAndRemove()
	return waited, nil
}
