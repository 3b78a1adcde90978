package nlsafe

import (
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Handle is a netlink route socket bound to one network namespace. The
// socket keeps its namespace whatever thread uses it, so no caller has to
// move a thread for netlink work. Its listings retry (dump.go); the rest
// is netlink.Handle's.
type Handle struct {
	*netlink.Handle
}

// Open opens a handle in the network namespace whose file is at path
// (/proc/self/ns/net, a bind mount under /run/netns, a test's). The file
// is only needed while the socket is made. A path that is not a namespace
// file is refused before setns would, with an error that says so.
func Open(path string) (*Handle, error) {
	nsh, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer func() { _ = nsh.Close() }()
	if err := checkNSFile(int(nsh)); err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	return at(nsh, path)
}

// OpenNS opens a handle in n; n stays open, owned by the caller.
func OpenNS(n ns.NetNS) (*Handle, error) {
	return at(netns.NsHandle(int(n.Fd())), n.Path())
}

func at(nsh netns.NsHandle, path string) (*Handle, error) {
	h, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket in network namespace %s: %w", path, err)
	}
	return &Handle{Handle: h}, nil
}

// checkNSFile rejects a file outside nsfs and procfs, where namespace
// files live.
func checkNSFile(fd int) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return fmt.Errorf("statfs: %w", err)
	}
	if st.Type != unix.NSFS_MAGIC && st.Type != unix.PROC_SUPER_MAGIC {
		return fmt.Errorf("not a namespace file (filesystem magic %#x)", st.Type)
	}
	return nil
}
