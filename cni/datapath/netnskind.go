package datapath

import (
	"errors"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// OtherNSKindError means a path names a namespace of another kind than
// network (a UTS or mount namespace file, say): ns.GetNS accepts any
// namespace file, and entering one as a network namespace fails.
type OtherNSKindError struct {
	Path string
	Kind string // "uts", "mnt", …
}

func (e *OtherNSKindError) Error() string {
	return fmt.Sprintf("%s is not a network namespace (it is a %s namespace)", e.Path, e.Kind)
}

// CheckNetNS reports whether path is a network namespace: nil if so, an
// error wrapping ns.NSPathNotExistErr when it does not exist,
// ns.NSPathNotNSErr when it is no namespace file at all, and
// *OtherNSKindError for a namespace of another kind.
func CheckNetNS(path string) error {
	n, err := ns.GetNS(path)
	if err != nil {
		return err
	}
	defer func() { _ = n.Close() }()
	return checkNetNSFd(n)
}

// checkNetNSFd asks the kernel the kind of the namespace n is open on
// (NS_GET_NSTYPE, Linux 4.11). A kernel that cannot tell is taken at its
// word: n is then used as before and fails where it is entered.
func checkNetNSFd(n ns.NetNS) error {
	t, err := unix.IoctlRetInt(int(n.Fd()), unix.NS_GET_NSTYPE)
	switch {
	case errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL):
		return nil
	case err != nil:
		return fmt.Errorf("namespace kind of %s: %w", n.Path(), err)
	case t == unix.CLONE_NEWNET:
		return nil
	}
	return &OtherNSKindError{Path: n.Path(), Kind: nsKindName(t)}
}

func nsKindName(t int) string {
	switch t {
	case unix.CLONE_NEWUTS:
		return "uts"
	case unix.CLONE_NEWNS:
		return "mnt"
	case unix.CLONE_NEWIPC:
		return "ipc"
	case unix.CLONE_NEWPID:
		return "pid"
	case unix.CLONE_NEWUSER:
		return "user"
	case unix.CLONE_NEWCGROUP:
		return "cgroup"
	case unix.CLONE_NEWTIME:
		return "time"
	}
	return fmt.Sprintf("type %#x", t)
}
