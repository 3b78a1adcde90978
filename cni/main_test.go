package cni

import (
	"os"
	"testing"

	"github.com/terway-sim/terway/internal/plugintest"
	"github.com/terway-sim/terway/internal/testnetns"
)

// pluginDir holds the terway binary built once for the tests that run it
// the way a runtime does.
var pluginDir string

// linkPrefix starts the names of the links the tests create, so TestMain
// can prove none of them ever appeared in the root namespace.
const linkPrefix = "twc"

func TestMain(m *testing.M) {
	os.Exit(plugintest.Run(m, "cni", &pluginDir, linkPrefix))
}

// execResult is one run of the plugin binary.
type execResult struct {
	stdout, stderr string
	exitCode       int
}

// runBinary runs the plugin binary with exactly env (plus PATH) and stdin,
// inside a throwaway network namespace: even the error paths must never
// run in the root namespace (GC reaps retired veths of the namespace it
// runs in before it dials the daemon).
func runBinary(t *testing.T, env map[string]string, stdin string) execResult {
	t.Helper()
	scratch, err := testnetns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := testnetns.Remove(scratch); err != nil {
			t.Errorf("remove scratch netns: %v", err)
		}
	}()
	return runBinaryIn(t, scratch, env, stdin)
}
