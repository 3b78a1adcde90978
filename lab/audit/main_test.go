package audit

import (
	"fmt"
	"os"
	"testing"

	"github.com/terway-sim/terway/internal/plugintest"
	"github.com/terway-sim/terway/internal/testnetns"
)

// pluginBin is the directory holding the terway CNI binary built for the
// run (libcni executes plugins from a directory).
var pluginBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		_ = os.Unsetenv(k)
	}
	_ = os.Setenv("NO_PROXY", "127.0.0.1,localhost")
	plugintest.QuietKlog()
	dir, cleanup, err := plugintest.Build("audit-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	pluginBin = dir
	return testnetns.GuardRoot("audit", m.Run)
}
