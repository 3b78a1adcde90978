package audit

import (
	"os"
	"testing"

	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/plugintest"
)

// pluginBin is the directory holding the terway CNI binary built for the
// run (libcni executes plugins from a directory).
var pluginBin string

func TestMain(m *testing.M) {
	noproxy.Unset()
	plugintest.QuietKlog()
	os.Exit(plugintest.Run(m, "audit", &pluginBin))
}
