package audit

import (
	"testing"

	"github.com/terway-sim/terway/internal/plugintest"
)

// pluginBin is the directory holding the terway CNI binary built for the
// run (libcni executes plugins from a directory).
var pluginBin string

func TestMain(m *testing.M) {
	plugintest.MainWithDaemons(m, "audit", &pluginBin)
}
