package e2e

import (
	"os"
	"testing"

	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/plugintest"
)

// pluginBin is the directory holding the terway binary built for the run.
var pluginBin string

func TestMain(m *testing.M) {
	noproxy.Unset()
	plugintest.QuietKlog()
	os.Exit(plugintest.Run(m, "e2e", &pluginBin))
}
