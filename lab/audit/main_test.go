package audit

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2"

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
	// The fake clientset's event broadcaster logs through klog when a
	// daemon stops.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	dir, err := os.MkdirTemp("", "audit-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", filepath.Join(dir, "terway"),
		"github.com/terway-sim/terway/cmd/terway")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the CNI plugin: %v\n%s", err, out)
		return 1
	}
	pluginBin = dir
	return testnetns.GuardRoot("audit", m.Run)
}
