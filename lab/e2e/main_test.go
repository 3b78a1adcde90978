package e2e

import (
	"testing"

	"github.com/terway-sim/terway/internal/plugintest"
)

// pluginBin is the directory holding the terway binary built for the run.
var pluginBin string

func TestMain(m *testing.M) {
	plugintest.MainWithDaemons(m, "e2e", &pluginBin)
}
