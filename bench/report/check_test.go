package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/benchtest"
)

func checkReport(t *testing.T, base, cur []*bench.Result, tol float64) (*CheckReport, string) {
	t.Helper()
	rep, err := Check(base, cur, tol)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	var b bytes.Buffer
	n, err := rep.WriteTo(&b)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(b.Len()) {
		t.Errorf("WriteTo returned %d, wrote %d bytes", n, b.Len())
	}
	return rep, b.String()
}

func failedFigures(rep *CheckReport) []string {
	var out []string
	for _, f := range rep.Figures {
		if f.Failed {
			out = append(out, f.Result+" "+f.Figure)
		}
	}
	return out
}

func TestCheckIdenticalPasses(t *testing.T) {
	base := benchtest.All()
	rep, out := checkReport(t, base, cloneResults(t, base), 0.10)
	if rep.Failed() {
		t.Fatalf("identical results failed:\n%s", out)
	}
	if len(rep.Missing)+len(rep.Extra)+len(rep.Notes) != 0 {
		t.Errorf("identical results: missing %v extra %v notes %v", rep.Missing, rep.Extra, rep.Notes)
	}
	// Every result was compared on its call counts.
	contains(t, "report", out,
		"bench check: PASS (tolerance 10%",
		"node/cold-burst-100", "calls: DescribeNetworkInterfaces", "fleet/fleet-1000x30", "ratio to lower bound",
	)
	// Identical results pass even with no tolerance at all.
	if rep, _ := checkReport(t, base, cloneResults(t, base), 0); rep.Failed() {
		t.Error("identical results failed with tolerance 0")
	}
}

func TestCheckCallsPerPodChange(t *testing.T) {
	base := benchtest.All()
	cur := cloneResults(t, base)
	cur[1].Metrics.CallsPerPod = 3.2 * 1.15 // cold burst, +15 %
	rep, out := checkReport(t, base, cur, 0.10)
	if !rep.Failed() {
		t.Fatalf("+15%% calls per pod passed:\n%s", out)
	}
	if got := failedFigures(rep); len(got) != 1 || got[0] != "node/cold-burst-100 calls per pod" {
		t.Errorf("failed figures %v, want only cold burst calls per pod", got)
	}
	if !strings.Contains(out, "+15.0%") || !strings.Contains(out, "FAIL: changed +15.0%, beyond 10%") {
		t.Errorf("report does not explain the change:\n%s", out)
	}
	// A drop beyond the tolerance also fails: the behaviour changed.
	cur[1].Metrics.CallsPerPod = 3.2 * 0.85
	if rep, _ := checkReport(t, base, cur, 0.10); !rep.Failed() {
		t.Error("-15% calls per pod passed")
	}
	// Within the tolerance passes.
	cur[1].Metrics.CallsPerPod = 3.2 * 1.05
	if rep, out := checkReport(t, base, cur, 0.10); rep.Failed() {
		t.Errorf("+5%% calls per pod failed:\n%s", out)
	}
}

func TestCheckCallsByActionAndZeroBaseline(t *testing.T) {
	base := benchtest.All()
	cur := cloneResults(t, base)
	// Calls move between actions: per pod totals unchanged, but the
	// action counts are compared on their own.
	cur[1].Metrics.CallsByAction["AssignPrivateIpAddresses"] = 4
	cur[1].Metrics.CallsByAction["CreateNetworkInterface"] = 12
	// A throttled count that was 0 fails on any change.
	cur[2].Metrics.Throttled = 1
	// An action the baseline never called.
	cur[3].Metrics.CallsByAction["DeleteNetworkInterface"] = 1
	// Warm-up calls are call counts too.
	cur[1].Metrics.WarmupCallsByAction["DescribeNetworkInterfaces"] = 6
	// So are calls per node.
	cur[0].Metrics.CallsPerNode = 12
	rep, out := checkReport(t, base, cur, 0.10)
	want := []string{
		"fleet/fleet-1000x30 calls per node",
		"node/cold-burst-100 calls: AssignPrivateIpAddresses",
		"node/cold-burst-100 calls: CreateNetworkInterface",
		"node/cold-burst-100 warm-up calls: DescribeNetworkInterfaces",
		"node/warm-churn-min0 throttled calls",
		"node/warm-churn-min10 calls: DeleteNetworkInterface",
	}
	got := failedFigures(rep)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("failed figures:\n%s\nwant:\n%s\nreport:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
}

func TestCheckFailedPodsNeverTolerated(t *testing.T) {
	base := benchtest.All()
	cur := cloneResults(t, base)
	cur[0].Metrics.PodsFailed = 1
	rep, out := checkReport(t, base, cur, 100) // any change tolerated…
	if !rep.Failed() {
		t.Fatalf("a failed pod passed:\n%s", out)
	}
	if got := failedFigures(rep); len(got) != 1 || got[0] != "fleet/fleet-1000x30 pods failed" {
		t.Errorf("failed figures %v", got)
	}
	if !strings.Contains(out, "pods failed: must be 0") {
		t.Errorf("report does not say why:\n%s", out)
	}
	// …even when the baseline had the same failures.
	base[0].Metrics.PodsFailed = 1
	if rep, _ := checkReport(t, base, cur, 100); !rep.Failed() {
		t.Error("failures excused by a failing baseline")
	}
}

func TestCheckTimingOnlyChangesPass(t *testing.T) {
	base := benchtest.All()
	cur := cloneResults(t, base)
	for _, r := range cur {
		r.Metrics.TimeToAllMs *= 2
		r.Metrics.AllocP99Ms *= 3
		r.Metrics.WallSeconds *= 0.5
		r.Metrics.AllocP50Ms *= 4
		r.Metrics.IdleIPsAvg += 1 // depends on timing too: not gated
		r.Metrics.FailedAllocs += 5
	}
	rep, out := checkReport(t, base, cur, 0.10)
	if rep.Failed() {
		t.Fatalf("timing-only changes failed:\n%s", out)
	}
	if !regexp.MustCompile(`node/warm-churn-min0 +failed AllocIP attempts +3 +8 +2\.67×`).MatchString(out) {
		t.Errorf("retried allocations not reported side by side:\n%s", out)
	}
	ratios := map[string]float64{}
	for _, f := range rep.Timings {
		if f.Result == "node/cold-burst-100" {
			ratios[f.Figure] = f.Ratio()
		}
	}
	for fig, want := range map[string]float64{"time to all pods (ms)": 2, "AllocIP p99 (ms)": 3, "wall time (s)": 0.5} {
		if math.Abs(ratios[fig]-want) > 1e-9 {
			t.Errorf("%s ratio %v, want %v", fig, ratios[fig], want)
		}
	}
	contains(t, "report", out, "Timing figures", "CURRENT/BASELINE", "2.00×", "3.00×", "0.50×")
}

func TestCheckMissingAndExtraResults(t *testing.T) {
	base := benchtest.All()
	cur := cloneResults(t, base[1:]) // fleet did not run
	extra := benchtest.ColdBurst()
	extra.Name = "cold-burst-500"
	cur = append(cur, extra)
	rep, out := checkReport(t, base, cur, 0.10)
	if !rep.Failed() {
		t.Fatalf("missing result passed:\n%s", out)
	}
	if len(rep.Missing) != 1 || rep.Missing[0] != "fleet/fleet-1000x30" {
		t.Errorf("missing %v", rep.Missing)
	}
	if len(rep.Extra) != 1 || rep.Extra[0] != "node/cold-burst-500" {
		t.Errorf("extra %v", rep.Extra)
	}
	contains(t, "report", out, "bench check: FAIL", "FAIL: fleet/fleet-1000x30 is in the baseline but did not run", "note: node/cold-burst-500 has no baseline")
	// An extra result alone does not fail the gate.
	if rep, _ := checkReport(t, base, append(cloneResults(t, base), extra), 0.10); rep.Failed() {
		t.Error("extra result failed the gate")
	}
}

func TestCheckNotesDifferentSettings(t *testing.T) {
	base := benchtest.All()
	cur := cloneResults(t, base)
	cur[1].Run.Seed = 2
	cur[1].Run.Daemon["min_pool_size"] = 3.0
	cur[1].Run.TimeScale = 1 // timing only: not worth a note
	rep, _ := checkReport(t, base, cur, 0.10)
	if rep.Failed() {
		t.Error("a settings difference alone failed the gate")
	}
	want := []string{
		"node/cold-burst-100: seed differs (baseline 1, current 2)",
		"node/cold-burst-100: daemon min_pool_size differs (baseline 0, current 3)",
	}
	if strings.Join(rep.Notes, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes %q, want %q", rep.Notes, want)
	}
}

func TestCheckRefusesBadInput(t *testing.T) {
	ok := benchtest.All()
	for name, tc := range map[string]struct {
		base, cur []*bench.Result
		tol       float64
	}{
		"negative tolerance":  {ok, ok, -0.1},
		"NaN tolerance":       {ok, ok, math.NaN()},
		"duplicate baseline":  {append(benchtest.All(), benchtest.Fleet()), ok, 0.1},
		"duplicate current":   {ok, append(benchtest.All(), benchtest.Fleet()), 0.1},
		"nil current result":  {ok, []*bench.Result{nil}, 0.1},
		"nil baseline result": {[]*bench.Result{nil}, ok, 0.1},
	} {
		if _, err := Check(tc.base, tc.cur, tc.tol); err == nil {
			t.Errorf("%s: Check succeeded", name)
		}
	}
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

func TestCheckReportWriteToError(t *testing.T) {
	rep, err := Check(benchtest.All(), benchtest.All(), 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rep.WriteTo(&failingWriter{after: 1}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteTo error %v, want the writer's", err)
	}
}

// cloneResults deep-copies rs through JSON.
func cloneResults(t *testing.T, rs []*bench.Result) []*bench.Result {
	t.Helper()
	out := make([]*bench.Result, len(rs))
	for i, r := range rs {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var c bench.Result
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		out[i] = &c
	}
	return out
}
