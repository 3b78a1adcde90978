package fabric

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gofrs/flock"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Namespaces are bind mounts of /proc/<pid>/task/<tid>/ns/net onto files
// in the fabric's NetNSDir, as `ip netns add` makes them, so `ip netns
// exec` works when the directory is /run/netns. The file names carry the
// fabric's name: "<name>.fabric", "<name>.internet" and
// "<name>.node.<instance ID>". Names
// never contain a dot, so one fabric's prefix never matches another's.

const (
	fabricSuffix = ".fabric"
	nodeInfix    = ".node."
)

func fabricNSPath(dir, name string) string { return filepath.Join(dir, name+fabricSuffix) }

func nodeNSPath(dir, name, instanceID string) string {
	return filepath.Join(dir, name+nodeInfix+instanceID)
}

// createNetNS creates a network namespace bind-mounted at path, which must
// not exist yet.
func createNetNS(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("create netns mount point %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create netns mount point %s: %w", path, err)
	}
	errc := make(chan error, 1)
	// The thread that unshares is locked and, if it cannot return to its
	// namespace, never unlocked: the runtime then discards it instead of
	// reusing a thread that sits in the wrong namespace.
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("open current netns: %w", err)
			return
		}
		defer func() { _ = orig.Close() }()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare netns: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		merr := unix.Mount(self, path, "none", unix.MS_BIND, "")
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(merr, fmt.Errorf("return to the original netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		if merr != nil {
			merr = fmt.Errorf("bind-mount netns at %s: %w", path, merr)
		}
		errc <- merr
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

// removeNetNS unmounts and removes a namespace file; the namespace itself
// ends when nothing else references it. A missing file is not an error.
func removeNetNS(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns file %s: %w", path, err)
	}
	return nil
}

// lockFabricNS takes the exclusive lock that marks a live fabric: an
// advisory flock(2) on its namespace file (gofrs/flock, opened read-only,
// never created), released by the kernel when the process dies, so a
// crashed fabric's leftovers are never mistaken for a live one.
func lockFabricNS(path string) (*flock.Flock, error) {
	l := flock.New(path, flock.SetFlag(os.O_RDONLY))
	ok, err := l.TryLock()
	switch {
	case err != nil:
		return nil, fmt.Errorf("lock fabric namespace %s: %w", path, err)
	case !ok:
		return nil, fmt.Errorf("fabric namespace %s is in use by a live fabric: %w", path, ErrInUse)
	}
	return l, nil
}

// ErrInUse is returned by NewFabric and Cleanup when a live fabric (in
// this or another process) holds the name.
var ErrInUse = errors.New("fabric name in use")

// Cleanup removes what a fabric named name left in netnsDir after its
// process died without Close: the namespace files and their bind mounts.
// The namespaces, with every link, route and nftables rule in them, end
// with their last reference; the crashed process's sockets and goroutines
// died with it. It refuses, with ErrInUse, while a live fabric holds the
// name. Nothing else on the host is touched.
func Cleanup(name, netnsDir string) error {
	if err := validName(name); err != nil {
		return err
	}
	if netnsDir == "" {
		netnsDir = DefaultNetNSDir
	}
	fpath := fabricNSPath(netnsDir, name)
	// A probe: an absent file or any error but ErrInUse lets it go on.
	if l, err := lockFabricNS(fpath); err == nil {
		_ = l.Unlock()
	} else if errors.Is(err, ErrInUse) {
		return err
	}
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", netnsDir, err)
	}
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if n == name+fabricSuffix || n == name+internetSuffix || strings.HasPrefix(n, name+nodeInfix) {
			errs = append(errs, removeNetNS(filepath.Join(netnsDir, n)))
		}
	}
	return errors.Join(errs...)
}
