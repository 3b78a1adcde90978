package testnetns

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// volatileRE drops what changes on its own: lifetimes of RA routes and
// addresses.
var volatileRE = regexp.MustCompile(`(expires|valid_lft|preferred_lft) \S+`)

// RootSnapshot captures the root network namespace's rules, routes,
// addresses and links as `ip` prints them, leaving out what is not ours to
// keep still (link counters and states, address flags and lifetimes). Call
// it when no goroutine has switched namespaces: before and after m.Run.
func RootSnapshot() (string, error) {
	var b bytes.Buffer
	for _, args := range [][]string{
		{"-4", "rule", "show"}, {"-6", "rule", "show"},
		{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"},
		{"-o", "addr", "show"}, {"-o", "link", "show"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		fmt.Fprintf(&b, "# ip %s\n%s", strings.Join(args, " "), reduce(args[1], out))
	}
	return volatileRE.ReplaceAllString(b.String(), "$1"), nil
}

// reduce keeps "index: name" of `ip -o link` and "index: name family
// address" of `ip -o addr` lines.
func reduce(what string, out []byte) string {
	keep := map[string]int{"link": 2, "addr": 4}[what]
	if keep == 0 {
		return string(out)
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) >= keep {
			b.WriteString(strings.Join(f[:keep], " ") + "\n")
		}
	}
	return b.String()
}

// GuardRoot runs a package's tests (run is usually m.Run) between two
// root snapshots and turns a pass into a failure when the root namespace
// changed, or when a link named with one of linkPrefixes appeared in it:
// tests must run entirely inside namespaces they created. pkg names the
// package in messages.
func GuardRoot(pkg string, run func() int, linkPrefixes ...string) int {
	before, err := RootSnapshot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s tests: root snapshot unavailable, not compared: %v\n", pkg, err)
		return run()
	}
	code := run()
	after, err := RootSnapshot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s tests: root snapshot after tests: %v\n", pkg, err)
		return max(code, 1)
	}
	if after != before {
		fmt.Fprintf(os.Stderr, "%s tests changed the root network namespace\n--- before\n%s--- after\n%s", pkg, before, after)
		return max(code, 1)
	}
	for _, p := range linkPrefixes {
		if strings.Contains(after, " "+p) {
			fmt.Fprintf(os.Stderr, "%s tests: test link %s* found in the root namespace\n%s", pkg, p, after)
			return max(code, 1)
		}
	}
	return code
}
