package datapath

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// linkPrefix starts every host veth name the tests use, so TestMain can
// prove none of them ever appeared in the root namespace.
const linkPrefix = "dpt"

// TestMain compares the root namespace's rules, routes, addresses and
// links before and after the tests: they must run entirely inside
// namespaces they created.
func TestMain(m *testing.M) {
	before, err := rootSnapshot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "datapath tests: root snapshot unavailable, not compared: %v\n", err)
	}
	code := m.Run()
	if err == nil {
		code = max(code, compareRoot(before))
	}
	os.Exit(code)
}

// compareRoot re-reads the root namespace and reports any difference.
func compareRoot(before string) int {
	after, err := rootSnapshot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "datapath tests: root snapshot after tests: %v\n", err)
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

// volatileRE drops what changes on its own: lifetimes of RA routes and
// addresses.
var volatileRE = regexp.MustCompile(`(expires|valid_lft|preferred_lft) \S+`)

// rootSnapshot captures the root namespace as `ip` prints it. It runs
// before and after m.Run, when no test goroutine has switched namespaces.
func rootSnapshot() (string, error) {
	var b bytes.Buffer
	cmds := [][]string{
		{"-4", "rule", "show"}, {"-6", "rule", "show"},
		{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"},
		{"-o", "addr", "show"},
		{"-o", "link", "show"},
	}
	for _, args := range cmds {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		fmt.Fprintf(&b, "# ip %s\n%s", strings.Join(args, " "), linkLines(args, out))
	}
	return volatileRE.ReplaceAllString(b.String(), "$1"), nil
}

// linkLines reduces `ip -o link` to "index: name" lines: counters and
// states of root links are not ours to keep still.
func linkLines(args []string, out []byte) string {
	if args[1] != "link" {
		return string(out)
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			fmt.Fprintf(&b, "%s %s\n", f[0], f[1])
		}
	}
	return b.String()
}
