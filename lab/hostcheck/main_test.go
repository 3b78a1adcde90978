package hostcheck

import (
	"os"
	"testing"

	"github.com/terway-sim/terway/internal/testnetns"
)

// TestMain fails the run if the tests changed the root network namespace:
// they only create a namespace of their own, a cgroup and processes.
func TestMain(m *testing.M) { os.Exit(testnetns.GuardRoot("hostcheck", m.Run)) }

// needRoot skips a test that reads root-only state or creates namespaces.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: reads every process's namespace and creates a network namespace and a cgroup")
	}
}
