package datapath

import (
	"os"
	"testing"

	"github.com/terway-sim/terway/internal/testnetns"
)

// linkPrefix starts every host veth name the tests use, so TestMain can
// prove none of them ever appeared in the root namespace.
const linkPrefix = "dpt"

// TestMain compares the root namespace's rules, routes, addresses and
// links before and after the tests: they must run entirely inside
// namespaces they created.
func TestMain(m *testing.M) {
	os.Exit(testnetns.GuardRoot("datapath", m.Run, linkPrefix))
}
