package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/report"
	"github.com/terway-sim/terway/internal/noproxy"
)

func TestMain(m *testing.M) { noproxy.Main(m) }

// run executes terway-bench with args and returns its stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := newRootCommand(&out, &errOut, args).ExecuteContext(ctx)
	return out.String(), err
}

// runResults runs terway-bench with args and --out into a new directory,
// fails the test if the command fails, and returns its stdout, the
// directory and the results in it.
func runResults(t *testing.T, args ...string) (out, dir string, rs []*bench.Result) {
	t.Helper()
	dir = t.TempDir()
	out, err := run(t, append(args, "--out", dir)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rs, err = bench.ReadResults(dir); err != nil {
		t.Fatal(err)
	}
	return out, dir, rs
}

// TestNodeWritesResult runs a small node benchmark through the command
// and checks the file it writes: the exact command line, the pool and
// --set keys in the daemon configuration.
func TestNodeWritesResult(t *testing.T) {
	args := []string{"node", "--scenario", "cold-burst", "--pods", "6", "--profile", "fast", "--seed", "3", "--time-scale", "0.25",
		"--pool", "2/5", "--set", "ip_batch_window=100ms"}
	out, dir, rs := runResults(t, args...)
	if !strings.Contains(out, "cold-burst-6-fast-pool2-5: pods 6 (failed 0)") {
		t.Errorf("summary: %s", out)
	}
	if len(rs) != 1 {
		t.Fatalf("%d results", len(rs))
	}
	r := rs[0]
	if want := "terway-bench " + strings.Join(args, " ") + " --out " + dir; r.Command != want {
		t.Errorf("command %q, want %q", r.Command, want)
	}
	if r.Name != "cold-burst-6-fast-pool2-5" || r.Run.Seed != 3 || r.Run.TimeScale != 0.25 || r.Run.Profile != "fast" ||
		r.Run.Daemon["ip_batch_window"] != "100ms" || r.Run.Daemon["min_pool_size"] != 2.0 || r.Metrics.Pods != 6 {
		t.Errorf("result: %s %+v %v", r.Name, r.Run, r.Metrics)
	}
}

// TestCompareReportCheck goes the whole way: two policies side by side,
// the report, and the gate passing on itself and failing on a changed
// baseline.
func TestCompareReportCheck(t *testing.T) {
	_, dir, rs := runResults(t, "compare", "--scenario", "cold-burst", "--pods", "6", "--profile", "fast", "--time-scale", "0.25",
		"--pool", "0/0", "--pool", "0/8")
	if len(rs) != 2 || rs[0].Name != "cold-burst-6-fast-pool0-0" || rs[1].Name != "cold-burst-6-fast-pool0-8" {
		t.Fatalf("results: %d", len(rs))
	}
	rep := t.TempDir()
	if out, err := run(t, "report", "--in", dir, "--out", rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	md, err := os.ReadFile(filepath.Join(rep, summaryFile))
	if err != nil || !bytes.Contains(md, []byte("cold-burst-6-fast-pool0-8")) {
		t.Fatalf("summary: %v\n%s", err, md)
	}
	if svgs, _ := filepath.Glob(filepath.Join(rep, report.PlotsDir, "*.svg")); len(svgs) == 0 {
		t.Error("no plots")
	}
	if out, err := run(t, "check", "--baseline", dir, "--current", dir); err != nil {
		t.Fatalf("a run against itself fails the gate: %v\n%s", err, out)
	}
	changed := t.TempDir()
	for _, r := range rs {
		r.Metrics.CallsPerPod *= 2
		if err := bench.WriteJSON(filepath.Join(changed, r.Kind+"-"+r.Name+".json"), r); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(t, "check", "--baseline", changed, "--current", dir); !errors.Is(err, errCheckFailed) {
		t.Fatalf("halved calls per pod pass the gate: %v\n%s", err, out)
	}
}

func TestPeerCommand(t *testing.T) {
	_, _, rs := runResults(t, "peer", "--delay", "5ms", "--workers", "2", "--nodes", "2")
	if len(rs) != 1 || rs[0].Kind != "peer" || rs[0].Name != "alloc-delay5-workers2-nodes2" || rs[0].Metrics.Nodes != 2 {
		t.Fatalf("%+v", rs)
	}
}

// TestFleetCommandWired runs the smallest fleet through the command: the
// flags reach fleet.Run and its result is written.
func TestFleetCommandWired(t *testing.T) {
	_, _, rs := runResults(t, "fleet", "--nodes", "2", "--pods-per-node", "3", "--time-scale", "0.25", "--start-jitter", "1s",
		"--profile", "fast", "--name", "tiny")
	if len(rs) != 1 || rs[0].Kind != "fleet" || rs[0].Name != "tiny" || rs[0].Metrics.Pods != 6 || !strings.HasPrefix(rs[0].Command, "terway-bench fleet") {
		t.Fatalf("%+v", rs[0])
	}
}

func TestFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"compare with one pool": {"compare", "--pool", "0/5", "--out", dir},
		"node with two pools":   {"node", "--pool", "0/5", "--pool", "1/5", "--out", dir},
		"bad pool":              {"node", "--pool", "five", "--out", dir},
		"bad set":               {"node", "--set", "novalue", "--out", dir},
		"bad throttle":          {"node", "--throttle", "Create=lots", "--out", dir},
		"time scale":            {"node", "--time-scale", "0", "--out", dir},
		"scenario":              {"node", "--scenario", "stampede", "--out", dir},
		"profile":               {"node", "--profile", "sluggish", "--out", dir},
		"log level":             {"node", "--log-level", "loud", "--out", dir},
		"check without current": {"check", "--baseline", dir},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused command wrote %d files", len(entries))
	}
}

func TestParseSetsAndCommandLine(t *testing.T) {
	m, err := parseSets([]string{"max_pool_size=5", "ip_batch_window=300ms", `vswitches={"z":["a"]}`, "x=a=b"})
	if err != nil || m["max_pool_size"] != 5.0 || m["ip_batch_window"] != "300ms" || m["x"] != "a=b" {
		t.Fatalf("%v %v", m, err)
	}
	if v, ok := m["vswitches"].(map[string]any); !ok || len(v) != 1 {
		t.Errorf("JSON value: %v", m["vswitches"])
	}
	if got := commandLine([]string{"node", "--set", "a=b c", "--name", "it's"}); got != `terway-bench node --set 'a=b c' --name 'it'\''s'` {
		t.Errorf("command line %s", got)
	}
}
