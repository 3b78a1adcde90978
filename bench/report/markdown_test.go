package report

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/benchtest"
)

func renderMarkdown(t *testing.T, rs []*bench.Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rs); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	return b.String()
}

// section returns the text of the "### <id>" section.
func section(t *testing.T, md, id string) string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n### "+id+"\n")
	if !ok {
		t.Fatalf("no section %q in:\n%s", id, md)
	}
	if i := strings.Index(rest, "\n### "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func TestWriteMarkdownResultSections(t *testing.T) {
	md := renderMarkdown(t, benchtest.All())
	cold := section(t, md, "node/cold-burst-100")
	contains(t, "cold burst section", cold,
		"```sh\nterway-bench node --scenario cold-burst --pods 100 --seed 1 --profile default && echo done\n```",
		"| profile | default |",
		"| seed | 1 |",
		"| time scale | ×0.1 |",
		"| started | 2025-11-29T12:00:00Z |",
		"| machine | linux/amd64, 2 CPUs, Test CPU @ 2.0GHz, 3936 MiB, kernel 6.18.0, go1.26.8 |",
		"| parameters | `burst=true` `pods=100` |",
		"<details><summary>All settings: 2 parameters, 3 daemon configuration keys</summary>",
		"| daemon min\\_pool\\_size | 0 |",
		"| daemon backoff\\_override.eni\\_ops | 1s |",
		"| AllocIP p50 † | 812 ms |",
		"| AllocIP p99 † | 3.10 s |",
		"| AllocIP max † | 3.30 s |",
		"| time to all pods † | 3.35 s |",
		"| calls per pod | 3.20 |",
		"| mutating per pod | 0.20 |",
		"| throttled calls | 0 |",
		"| pods failed | 0 |",
		"| idle IPs (end) | 2 |",
		"| Action | Calls | Per pod | Warm-up calls |",
		"| DescribeInstanceTypes | 0 | 0.00 | 1 |",
		"| DescribeNetworkInterfaces | 300 | 3.00 | 3 |",
		"| **total** | 320 | 3.20 | 4 |",
		"| warm-up calls | 4 |",
		"[AllocIP latency CDF](plots/node-cold-burst-100-latency-cdf.svg)",
		"[Pods with an IP over time](plots/node-cold-burst-100-pods-ready.svg)",
		"[Cloud calls over time](plots/node-cold-burst-100-calls.svg)",
	)
	// Figures that do not apply to a single node are left out.
	for _, absent := range []string{"ratio to lower bound", "memory per daemon", "| nodes |", "throttled.svg", "calls per node", "failed AllocIP"} {
		if strings.Contains(cold, absent) {
			t.Errorf("cold burst section shows %q, which does not apply", absent)
		}
	}
	fleet := section(t, md, "fleet/fleet-1000x30")
	contains(t, "fleet section", fleet,
		"| nodes | 1000 |", "| ratio to lower bound | 1.50× |", "| lower bound | 6.67 min |",
		"| memory per daemon † | 1.25 MiB |", "| throttled calls | 150 |", "| calls per node | 10.00 |",
		"| Action | Calls | Per pod |\n",
	)
	if strings.Contains(fleet, "AllocIP p50") {
		t.Errorf("fleet section shows AllocIP latency it did not measure")
	}
	if md != renderMarkdown(t, benchtest.All()) {
		t.Error("two renders of the same results differ")
	}
}

func TestWriteMarkdownComparison(t *testing.T) {
	md := renderMarkdown(t, benchtest.All())
	_, cmp, ok := strings.Cut(md, "### Scenario `warm-churn`\n")
	if !ok {
		t.Fatalf("no warm-churn comparison:\n%s", md)
	}
	cmp, _, _ = strings.Cut(cmp, "\n### ")
	contains(t, "comparison", cmp,
		"| | warm-churn-min0 | warm-churn-min10 |",
		"| **daemon min\\_pool\\_size** | 0 | 10 |",
		"| calls per pod | 2.00 | 1.00 |",
		"| idle IPs (average) † | 4.00 | 14.00 |",
		"| calls: UnassignPrivateIpAddresses | 200 | 100 |",
		"| failed AllocIP attempts (retried) † | 3 | 3 |",
		"![Scenario warm-churn: AllocIP latency CDF](plots/compare-warm-churn-latency-cdf.svg)",
		"(plots/compare-warm-churn-calls.svg)",
	)
	// Settings every compared run shares are not rows of the comparison.
	if strings.Contains(cmp, "max\\_pool\\_size") || strings.Contains(cmp, "**seed**") {
		t.Errorf("comparison lists settings that do not differ:\n%s", cmp)
	}
	// Scenarios with a single result get no comparison.
	if strings.Contains(md, "### Scenario `cold-burst`") || strings.Contains(md, "### Scenario `fleet`") {
		t.Error("comparison written for a scenario with one result")
	}
}

func TestWriteMarkdownPlotLinksMatchPlots(t *testing.T) {
	rs := benchtest.All()
	md := renderMarkdown(t, rs)
	written, err := WritePlots(filepath.Join(t.TempDir(), PlotsDir), rs)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range written {
		files = append(files, filepath.Base(p))
	}
	links := regexp.MustCompile(`\]\(plots/([^)]+)\)`).FindAllStringSubmatch(md, -1)
	var linked []string
	for _, l := range links {
		if !slices.Contains(files, l[1]) {
			t.Errorf("Markdown links %s, which WritePlots did not write", l[1])
		}
		linked = append(linked, l[1])
	}
	for _, f := range files {
		if !slices.Contains(linked, f) {
			t.Errorf("plot %s is not linked from the Markdown", f)
		}
	}
}

func TestWriteMarkdownEscapes(t *testing.T) {
	r := benchtest.ColdBurst()
	r.Name = "a|b_*c*"
	r.Command = "run ```weird``` | tee out"
	r.Params = map[string]any{"filter": "x|y"}
	md := renderMarkdown(t, []*bench.Result{r})
	contains(t, "Markdown", md,
		"| node/a\\|b\\_\\*c\\* |",
		"````sh\nrun ```weird``` | tee out\n````",
		"`filter=x\\|y`",
	)
}

func TestWriteMarkdownEmptyAndInvalid(t *testing.T) {
	md := renderMarkdown(t, nil)
	if !strings.Contains(md, "0 result(s)") || strings.Contains(md, "## Results") {
		t.Errorf("unexpected Markdown for no results:\n%s", md)
	}
	if err := WriteMarkdown(&bytes.Buffer{}, []*bench.Result{benchtest.ColdBurst(), benchtest.ColdBurst()}); err == nil {
		t.Error("WriteMarkdown accepted the same result twice")
	}
}

func TestWriteMarkdownNestedSettings(t *testing.T) {
	a, b := benchtest.Churn(0, 2), benchtest.Churn(10, 1)
	for i, r := range []*bench.Result{a, b} {
		r.Params["throttle"] = map[string]any{"CreateNetworkInterface": 100.0 * float64(i+1), "*": 500.0}
		r.Run.Daemon["backoff_override"] = map[string]any{"": map[string]any{"Steps": 6.0}}
	}
	b.Command = ""
	md := renderMarkdown(t, []*bench.Result{a, b})
	contains(t, "Markdown", md,
		// Only the nested leaf that differs is a comparison row.
		"| **throttle.CreateNetworkInterface** | 100 | 200 |",
		// Nested values are flattened in the settings table, not inlined.
		"| parameters | `pods=200` `rate=5` |",
		"| throttle.\\* | 500 |",
		"| daemon backoff\\_override.\"\".Steps | 6 |",
		"### node/warm-churn-min10\n\nCommand: not recorded.\n",
	)
	if strings.Contains(md, "**throttle.\\***") || strings.Contains(md, "**daemon backoff") {
		t.Errorf("settings equal in both runs listed as differing:\n%s", md)
	}
}

// contains fails the test for every one of wants that text lacks; what
// names the text in the failure.
func contains(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}
