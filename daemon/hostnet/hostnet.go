// Package hostnet inspects and cleans the host side of pod datapaths in one
// network namespace: the per-pod policy rules (priority 512 "to podIP" and
// 2048 "from podIP", the plugin's own constants ToPodPriority and
// FromPodPriority of cni/datapath) and the host routes to podIP/32 (/128)
// that the CNI plugin creates. The daemon uses it in GC, where a pod's CNI
// DEL never ran (deleted while the daemon was down, or the runtime lost the
// DEL), so the plugin's own teardown cannot be relied on to remove them.
package hostnet

import (
	"errors"
	"fmt"
	"sync"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// ErrClosed is returned by a Host used after Close, so a GC loop racing a
// shutdown fails loudly instead of touching a nil netlink handle.
var ErrClosed = errors.New("hostnet: host handle is closed")

// Host is a netlink handle bound to one network namespace. The daemon is a
// library that may run many times in one process (tests, the node
// simulation), so the namespace is carried by the handle rather than by the
// calling thread. A Host is safe for concurrent use; calls are serialised so
// a listing never interleaves with a release.
type Host struct {
	mu     sync.Mutex
	nsPath string
	nl     *nlsafe.Handle
}

// Open binds a Host to the network namespace file at nsPath
// ("/proc/self/ns/net" for the node's own namespace, a lab or test netns
// path otherwise). The netlink socket keeps the namespace alive afterwards.
func Open(nsPath string) (*Host, error) {
	h, err := nlsafe.Open(nsPath)
	if err != nil {
		return nil, err
	}
	return &Host{nsPath: nsPath, nl: h}, nil
}

// Close releases the netlink socket. It is idempotent so it can sit in a
// defer next to an explicit shutdown path.
func (h *Host) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nl != nil {
		h.nl.Close()
		h.nl = nil
	}
}

// String names the namespace, for log lines that mention the handle.
func (h *Host) String() string {
	return "hostnet(" + h.nsPath + ")"
}

// lock takes the Host's mutex and returns the live handle; the caller must
// unlock even on error.
func (h *Host) lock() (*nlsafe.Handle, error) {
	h.mu.Lock()
	if h.nl == nil {
		return nil, fmt.Errorf("%s: %w", h.nsPath, ErrClosed)
	}
	return h.nl, nil
}
