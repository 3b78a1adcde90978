package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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
	before, err := rootSnapshot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "root snapshot unavailable, not compared: %v\n", err)
	}
	code := m.Run()
	if err == nil {
		after, err := rootSnapshot()
		if err != nil || after != before {
			fmt.Fprintf(os.Stderr, "root network namespace changed by the tests (%v)\n--- before\n%s--- after\n%s", err, before, after)
			code = max(code, 1)
		}
	}
	return code
}

var expiresRE = regexp.MustCompile(`expires \S+`)

// rootSnapshot captures the root namespace's rules, routes and links: the
// tests must change none of them.
func rootSnapshot() (string, error) {
	var b bytes.Buffer
	for _, args := range [][]string{
		{"-4", "rule", "show"}, {"-6", "rule", "show"},
		{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"},
		{"-o", "link", "show"}, {"-o", "addr", "show"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		fmt.Fprintf(&b, "# ip %s\n", strings.Join(args, " "))
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if args[1] == "link" {
				if f := strings.Fields(line); len(f) >= 2 {
					line = f[0] + " " + f[1]
				}
			}
			if args[1] == "addr" {
				if f := strings.Fields(line); len(f) >= 4 {
					line = strings.Join(f[:4], " ")
				}
			}
			b.WriteString(line + "\n")
		}
	}
	return expiresRE.ReplaceAllString(b.String(), "expires"), nil
}
