package testnetns

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// RequireRoot skips t unless it runs as root: creating namespaces and
// links needs CAP_SYS_ADMIN and CAP_NET_ADMIN.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces")
	}
}

// NS is a network namespace made for one test.
type NS struct {
	ns.NetNS
	mu      sync.Mutex
	removed bool
}

// ForTest creates a network namespace that is removed when t ends, also
// when it fails, unless the test removed it before. It skips t when not
// root.
func ForTest(t testing.TB) *NS {
	t.Helper()
	RequireRoot(t)
	n, err := New()
	if err != nil {
		t.Fatalf("create test netns: %v", err)
	}
	tn := &NS{NetNS: n}
	t.Cleanup(func() {
		if err := tn.Remove(); err != nil {
			t.Errorf("remove test netns: %v", err)
		}
	})
	return tn
}

// Remove removes the namespace now, as a runtime destroys a pod's, and
// checks that its file is gone; the kernel destroys the namespace once
// nothing else refers to it. Later calls do nothing.
func (n *NS) Remove() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.removed {
		return nil
	}
	n.removed = true
	path := n.Path()
	if err := Remove(n.NetNS); err != nil {
		return err
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("test netns %s still present (stat: %v)", path, err)
	}
	return nil
}

// Handle opens a netlink handle in the namespace file at path, closed
// when t ends (or earlier by the test). Tests set up and check through it
// rather than through the code under test.
func Handle(t testing.TB, path string) *nlsafe.Handle {
	t.Helper()
	h, err := nlsafe.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}
