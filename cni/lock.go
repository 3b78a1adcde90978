package cni

import (
	"context"
	"fmt"
	"net/netip"
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

// podLockPaths are the locks of one pod's datapath, in the order they
// are taken: its host veth's, which every sandbox of the pod shares (a DEL
// of the old sandbox and an ADD of the new one never run at once), then
// one per address, which two pods share when a late DEL of the one that
// had it meets the ADD of the one that has it now (the to-pod rule names
// the address only: the DEL's check that another link routes it, and its
// deletion, must not interleave with the ADD).
func podLockPaths(stateDir string, spec *datapath.Spec) []string {
	paths := []string{filepath.Join(stateDir, spec.HostVeth+".veth.lock")}
	for _, ip := range []netip.Addr{spec.IPv4, spec.IPv6} {
		if ip.IsValid() {
			paths = append(paths, filepath.Join(stateDir, ip.String()+".addr.lock"))
		}
	}
	return paths
}

// withDatapathLock runs fn under the datapath locks spec needs, waiting at
// most datapathLockTimeout (and not past ctx). With gone, a pod's locks
// are removed once fn has succeeded: the pod's datapath is gone with it.
func withDatapathLock(ctx context.Context, stateDir string, spec *datapath.Spec, gone bool, fn func() error) error {
	_, err := withDatapathLockTimed(ctx, stateDir, spec, gone, fn)
	return err
}

// withDatapathLockTimed is withDatapathLock that also says how long it
// waited for the locks (ADD logs it).
//
// A kind whose pods may be set up at once (spec.SetsUpConcurrently) holds
// the node's datapath lock shared and its pod's locks (podLockPaths)
// exclusive: ten pods starting together no longer queue behind each
// other's setup. Any other kind holds the node's lock exclusive, as
// Terway's plugin does for all. The order is always the node's lock, the
// veth's, the IPv4 address's, the IPv6 address's.
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
	var held []*fileLock
	release := func(remove bool) {
		for i := len(held) - 1; i >= 0; i-- {
			if remove {
				held[i].unlockAndRemove()
			} else {
				held[i].unlock()
			}
		}
	}
	for _, path := range podLockPaths(stateDir, spec) {
		l, err := lockFile(ctx, path, exclusive)
		if err != nil {
			release(false)
			return time.Since(t0), err
		}
		held = append(held, l)
	}
	waited := time.Since(t0)
	err = fn()
	release(err == nil && gone)
	return waited, err
}
