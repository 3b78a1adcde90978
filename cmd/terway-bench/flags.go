package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/profile"
)

// parseSets reads repeated --set KEY=VALUE into eni_conf keys. VALUE is
// JSON when it parses as JSON ("5", "true", "{…}"), else a string
// ("30s").
func parseSets(sets []string) (map[string]any, error) {
	return parsePairs(sets, "--set %q: want KEY=VALUE", func(v string) (any, bool) {
		var j any
		if err := json.Unmarshal([]byte(v), &j); err != nil {
			return v, true
		}
		return j, true
	})
}

// parseBudgets reads repeated --throttle ACTION=N.
func parseBudgets(ts []string) (map[string]int, error) {
	return parsePairs(ts, "--throttle %q: want ACTION=CALLS_PER_WINDOW (\"*\" for the rest)", func(v string) (int, bool) {
		n, err := strconv.Atoi(v)
		return n, err == nil && n >= 0
	})
}

// parsePairs reads repeated KEY=VALUE flags, each VALUE through value;
// nil when none was given. An item without a key or whose value is not
// valid is an error, bad being its format with the item as argument.
func parsePairs[V any](items []string, bad string, value func(string) (V, bool)) (map[string]V, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := map[string]V{}
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		val, valid := value(v)
		if !ok || k == "" || !valid {
			return nil, fmt.Errorf(bad, it)
		}
		out[k] = val
	}
	return out, nil
}

// outFlag adds --out.
func outFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "out", "bench/results", "directory the JSON result is written to (created if missing)")
}

// writeResult writes r as DIR/<kind>-<name>.json and prints a one-line
// summary.
func writeResult(w io.Writer, dir string, r *bench.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	path := filepath.Join(dir, r.Kind+"-"+r.Name+".json")
	if err := bench.WriteJSON(path, r); err != nil {
		return err
	}
	m := r.Metrics
	var calls int64
	for _, n := range m.CallsByAction {
		calls += n
	}
	if m.Pods == 0 && m.Nodes > 0 {
		fmt.Fprintf(w, "%s: nodes %d, time to all %.0f ms (limiter's lower bound %.0f ms), calls %d (%.1f per node), throttled %d -> %s\n",
			r.Name, m.Nodes, m.TimeToAllMs, m.LowerBoundMs, calls, m.CallsPerNode, m.Throttled, path)
		return nil
	}
	fmt.Fprintf(w, "%s: pods %d (failed %d), time to all %.0f ms, AllocIP p50/p99 %.0f/%.0f ms, calls %d (%.2f per pod, %.2f mutating per pod), throttled %d, idle avg %.1f -> %s\n",
		r.Name, m.Pods, m.PodsFailed, m.TimeToAllMs, m.AllocP50Ms, m.AllocP99Ms, calls, m.CallsPerPod, m.MutatingPerPod,
		m.Throttled, m.IdleIPsAvg, path)
	return nil
}

// profileNames lists the built-in profiles for help texts.
func profileNames() string {
	var n []string
	for _, p := range profile.All() {
		n = append(n, p.Name)
	}
	return strings.Join(n, ", ")
}
