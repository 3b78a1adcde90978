// Package testnetns creates and removes the bind-mounted network
// namespaces tests use (containernetworking/plugins' testutils), removing
// them reliably; ForTest ties one to a test's life, Handle opens netlink
// in one for the test's own setup and checks, and GuardRoot proves a
// package's tests left the root namespace as they found it.
//
// testutils.UnmountNS fails with EBUSY while any process holds the
// namespace file open. Tests that start processes hit that by chance: a
// forked child holds copies of all the parent's descriptors until it
// execs. Remove retries for a while and then detaches the mount, so that a
// test never leaves a namespace mounted behind it.
package testnetns

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"golang.org/x/sys/unix"
)

// mu serialises creation: testutils.NewNS remounts its directory shared
// on every call, and concurrent first calls stack mounts.
var mu sync.Mutex

// New creates a bind-mounted network namespace.
func New() (ns.NetNS, error) {
	mu.Lock()
	defer mu.Unlock()
	return testutils.NewNS()
}

// Remove closes n, unmounts it and deletes its file.
func Remove(n ns.NetNS) error {
	path := n.Path()
	_ = n.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unix.Unmount(path, 0)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			// EINVAL: not a mount point (already unmounted).
		case errors.Is(err, unix.EBUSY) && time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond)
			continue
		case errors.Is(err, unix.EBUSY):
			if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("detach netns mount %s: %w", path, err)
			}
		default:
			return fmt.Errorf("unmount netns %s: %w", path, err)
		}
		break
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns file %s: %w", path, err)
	}
	return nil
}
