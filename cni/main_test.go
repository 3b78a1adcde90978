package cni

import (
	"bytes"
	"fmt"
	"github.com/terway-sim/terway/internal/testnetns"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pluginBin is the terway binary built once for the tests that run it the
// way a runtime does.
var pluginBin string

// linkPrefix starts the names of the links the tests create, so TestMain
// can prove none of them ever appeared in the root namespace.
const linkPrefix = "twc"

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "terway-cni-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	pluginBin = filepath.Join(dir, "terway")
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", pluginBin, "github.com/terway-sim/terway/cmd/terway")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build terway: %v\n%s", err, out)
		return 1
	}
	before, snapErr := rootSnapshot()
	if snapErr != nil {
		fmt.Fprintf(os.Stderr, "cni tests: root snapshot unavailable, not compared: %v\n", snapErr)
	}
	code := m.Run()
	if snapErr == nil {
		code = max(code, compareRoot(before))
	}
	return code
}

// compareRoot re-reads the root namespace and reports any difference.
func compareRoot(before string) int {
	after, err := rootSnapshot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cni tests: root snapshot after tests: %v\n", err)
		return 1
	}
	if after != before {
		fmt.Fprintf(os.Stderr, "root network namespace changed by tests\n--- before\n%s--- after\n%s", before, after)
		return 1
	}
	if strings.Contains(after, " "+linkPrefix) {
		fmt.Fprintf(os.Stderr, "test link %s* found in root namespace\n%s", linkPrefix, after)
		return 1
	}
	return 0
}

var expiresRE = regexp.MustCompile(`expires \S+`)

// rootSnapshot captures the root namespace's rules, routes, links,
// addresses and neighbours as `ip` prints them.
func rootSnapshot() (string, error) {
	var b bytes.Buffer
	cmds := [][]string{
		{"-4", "rule", "show"}, {"-6", "rule", "show"},
		{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"},
		{"-o", "link", "show"}, {"-o", "addr", "show"},
	}
	for _, args := range cmds {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		fmt.Fprintf(&b, "# ip %s\n%s", strings.Join(args, " "), reduce(args, out))
	}
	return expiresRE.ReplaceAllString(b.String(), "expires"), nil
}

// reduce keeps the stable part of `ip -o link/addr` lines: counters,
// states and lifetimes of root links are not ours to keep still.
func reduce(args []string, out []byte) string {
	if args[1] != "link" && args[1] != "addr" {
		return string(out)
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		switch {
		case args[1] == "link" && len(f) >= 2:
			fmt.Fprintf(&b, "%s %s\n", f[0], f[1])
		case args[1] == "addr" && len(f) >= 4:
			fmt.Fprintf(&b, "%s %s %s %s\n", f[0], f[1], f[2], f[3])
		}
	}
	return b.String()
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
