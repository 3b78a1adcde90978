package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terway-sim/terway/lab/chaos"
)

// terwayLab runs the command with args and returns its output.
func terwayLab(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand(&out, &errOut)
	root.SetArgs(append(args, "--state-dir", t.TempDir()))
	err := root.Execute()
	return out.String() + errOut.String(), err
}

func TestChaosList(t *testing.T) {
	out, err := terwayLab(t, "chaos", "--list")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range chaos.Catalogue() {
		if !strings.Contains(out, p.Name) {
			t.Errorf("--list lacks plan %s", p.Name)
		}
	}
	for _, k := range chaos.Kinds() {
		if !strings.Contains(out, string(k)) {
			t.Errorf("--list lacks kind %s", k)
		}
	}
}

// A dry run needs no lab, prints the seed and the plan first, and the
// printed seed replays the same schedule.
func TestChaosDryRunReplays(t *testing.T) {
	first, err := terwayLab(t, "chaos", "--plan", "storm", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	head, table, _ := strings.Cut(first, "\n")
	var seed string
	if _, rest, ok := strings.Cut(head, "--seed "); ok {
		seed = strings.TrimSuffix(rest, ")")
	}
	if !strings.HasPrefix(head, "chaos: plan storm, seed ") || seed == "" {
		t.Fatalf("first line %q, want the plan and the seed", head)
	}
	again, err := terwayLab(t, "chaos", "--plan", "storm", "--seed", seed, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if _, table2, _ := strings.Cut(again, "\n"); table2 != table {
		t.Fatalf("seed %s replayed another schedule:\n%s\n%s", seed, table, table2)
	}
	if !strings.Contains(table, "3-kill-terwayd") || !strings.Contains(table, "kills at ") {
		t.Errorf("schedule:\n%s", table)
	}
}

func TestChaosPlanFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mine.json")
	bad := filepath.Join(dir, "typo.json")
	for path, param := range map[string]string{good: "count", bad: "cuont"} {
		plan := `{"name": "` + strings.TrimSuffix(filepath.Base(path), ".json") +
			`", "steps": [{"start": "1s", "duration": "1m", "kind": "ip-unassign-oob", "params": {"` + param + `": 2}}]}`
		if err := os.WriteFile(path, []byte(plan), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := terwayLab(t, "chaos", "--plan", good, "--seed", "9", "--dry-run", "--json")
	if err != nil || !strings.Contains(out, `"count": 2`) || !strings.Contains(out, "chaos: plan mine, seed 9") {
		t.Fatalf("plan file: %v\n%s", err, out)
	}
	if _, err := terwayLab(t, "chaos", "--plan", bad, "--dry-run"); err == nil || !strings.Contains(err.Error(), `unknown field "cuont"`) {
		t.Fatalf("plan file with a typo: %v", err)
	}
}

func TestChaosRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"chaos"}, "--plan NAME or FILE is required"},
		{[]string{"chaos", "--plan", "nope", "--dry-run"}, `no plan "nope"`},
		// Without --dry-run it needs a lab.
		{[]string{"chaos", "--plan", "storm", "--seed", "1"}, "no lab here"},
	} {
		if _, err := terwayLab(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}
