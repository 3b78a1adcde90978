package e2e

import (
	"flag"
	"fmt"
	"github.com/terway-sim/terway/internal/testnetns"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2"
)

// pluginBin is the directory holding the terway binary built for the run.
var pluginBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		os.Unsetenv(k)
	}
	os.Setenv("NO_PROXY", "127.0.0.1,localhost")
	// The fake clientset's event broadcaster complains through klog when a
	// daemon stops; that would interleave with benchmark output.
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	_ = klogFlags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	dir, err := os.MkdirTemp("", "e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", filepath.Join(dir, "terway"), "github.com/terway-sim/terway/cmd/terway")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the plugin: %v\n%s", err, out)
		return 1
	}
	pluginBin = dir
	return testnetns.GuardRoot("e2e", m.Run)
}
