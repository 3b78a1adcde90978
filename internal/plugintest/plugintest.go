// Package plugintest is what tests that run the terway CNI binary share:
// building it once per test binary (Run, in TestMain), running it inside a node's network
// namespace the way containerd does, and silencing klog, through which a
// fake clientset's event broadcaster complains when a daemon stops.
package plugintest

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2"

	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/testnetns"
)

// PrebuiltEnv names a directory holding a terway plugin built beforehand,
// which Build then uses instead of compiling one: where tests run without
// a Go toolchain (make test-kernel's VM), the host builds it.
const PrebuiltEnv = "TERWAY_PLUGIN_DIR"

// Build compiles cmd/terway into a new temporary directory (libcni runs
// plugins from a directory) and returns it with its removal; with
// PrebuiltEnv set it returns that directory, and removes nothing.
func Build(prefix string) (dir string, cleanup func(), err error) {
	if d := os.Getenv(PrebuiltEnv); d != "" {
		if _, err := os.Stat(filepath.Join(d, "terway")); err != nil {
			return "", nil, fmt.Errorf("%s=%s: %w", PrebuiltEnv, d, err)
		}
		return d, func() {}, nil
	}
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", filepath.Join(dir, "terway"),
		"github.com/terway-sim/terway/cmd/terway")
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("build the terway CNI plugin: %w\n%s", err, out)
	}
	return dir, cleanup, nil
}

// Run is a TestMain's body for tests that run the plugin: it builds the
// plugin into *dir, runs m inside testnetns.GuardRoot (pkg and
// linkPrefixes as there) and removes the build. os.Exit the result.
func Run(m *testing.M, pkg string, dir *string, linkPrefixes ...string) int {
	d, cleanup, err := Build(pkg + "-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	*dir = d
	return testnetns.GuardRoot(pkg, m.Run, linkPrefixes...)
}

// MainWithDaemons is the whole TestMain of packages whose tests also run
// daemons in process against a fakecloud on loopback, as the lab's do: it
// clears the proxy variables (noproxy) and silences klog (QuietKlog)
// before Run, and exits with Run's result.
func MainWithDaemons(m *testing.M, pkg string, dir *string) {
	noproxy.Unset()
	QuietKlog()
	os.Exit(Run(m, pkg, dir))
}

// QuietKlog sends klog output nowhere.
func QuietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}
