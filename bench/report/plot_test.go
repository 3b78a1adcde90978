package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/benchtest"
	"github.com/terway-sim/terway/internal/linechart"
)

// svgDoc is what the tests read back from a plot.
type svgDoc struct {
	width, height string
	texts         []string // character data of every element, in order
	polylines     []string // points attributes
}

// parseSVG decodes data as XML, failing the test if it is not well formed
// or not an SVG document.
func parseSVG(t *testing.T, name string, data []byte) svgDoc {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	var doc svgDoc
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", name, err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if e.Name.Local != "svg" || e.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("%s: root element %v, want svg", name, e.Name)
				}
				for _, a := range e.Attr {
					switch a.Name.Local {
					case "width":
						doc.width = a.Value
					case "height":
						doc.height = a.Value
					}
				}
			}
			if e.Name.Local == "polyline" {
				for _, a := range e.Attr {
					if a.Name.Local == "points" {
						doc.polylines = append(doc.polylines, a.Value)
					}
				}
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if s := strings.TrimSpace(string(e)); s != "" {
				doc.texts = append(doc.texts, s)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("%s: unbalanced elements", name)
	}
	return doc
}

func writePlotsTo(t *testing.T, rs []*bench.Result) (string, map[string][]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "plots")
	paths, err := WritePlots(dir, rs)
	if err != nil {
		t.Fatalf("WritePlots: %v", err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		if filepath.Dir(p) != dir {
			t.Errorf("plot %s written outside %s", p, dir)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = data
	}
	return dir, files
}

func TestWritePlotsFilesAndContent(t *testing.T) {
	_, files := writePlotsTo(t, benchtest.All())
	want := map[string][]string{
		// file: texts it must show (title, legend entries)
		"fleet-fleet-1000x30-pods-ready.svg":    {"fleet/fleet-1000x30: Pods with an IP over time", "pods-ready", "pods with an IP", "time (s, simulated)"},
		"fleet-fleet-1000x30-throttled.svg":     {"fleet/fleet-1000x30: Throttled calls over time", "throttled"},
		"node-cold-burst-100-latency-cdf.svg":   {"node/cold-burst-100: AllocIP latency CDF", "AllocIP", "fraction of allocations", "scenario cold-burst · profile default · seed 1 · time scale ×0.1"},
		"node-cold-burst-100-pods-ready.svg":    {"pods-ready"},
		"node-cold-burst-100-calls.svg":         {"AssignPrivateIpAddresses", "CreateNetworkInterface", "cloud calls"},
		"node-cold-burst-100-idle-ips.svg":      {"idle-ips", "idle IPs"},
		"node-warm-churn-min0-latency-cdf.svg":  {"alloc-latency"},
		"node-warm-churn-min0-pods-ready.svg":   {"pods-ready"},
		"node-warm-churn-min0-calls.svg":        {"UnassignPrivateIpAddresses"},
		"node-warm-churn-min0-idle-ips.svg":     {"idle-ips"},
		"node-warm-churn-min0-throttled.svg":    {"throttled"},
		"node-warm-churn-min10-latency-cdf.svg": {"alloc-latency"},
		"node-warm-churn-min10-pods-ready.svg":  {"pods-ready"},
		"node-warm-churn-min10-calls.svg":       {"AssignPrivateIpAddresses"},
		"node-warm-churn-min10-idle-ips.svg":    {"idle-ips"},
		"node-warm-churn-min10-throttled.svg":   {"throttled"},
		"compare-warm-churn-latency-cdf.svg":    {"Scenario warm-churn: AllocIP latency CDF", "warm-churn-min0", "warm-churn-min10"},
		"compare-warm-churn-pods-ready.svg":     {"warm-churn-min0", "warm-churn-min10"},
		"compare-warm-churn-calls.svg":          {"Scenario warm-churn: Cloud calls over time (all actions)", "warm-churn-min0", "warm-churn-min10"},
		"compare-warm-churn-idle-ips.svg":       {"warm-churn-min0", "warm-churn-min10"},
		"compare-warm-churn-throttled.svg":      {"warm-churn-min0", "warm-churn-min10"},
	}
	for name := range files {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected plot %s", name)
		}
	}
	for name, texts := range want {
		data, ok := files[name]
		if !ok {
			t.Errorf("plot %s not written", name)
			continue
		}
		doc := parseSVG(t, name, data)
		if doc.width != "800" || doc.height != "450" {
			t.Errorf("%s is %sx%s, want 800x450", name, doc.width, doc.height)
		}
		for _, s := range texts {
			if !containsString(doc.texts, s) {
				t.Errorf("%s does not show %q; texts: %q", name, s, doc.texts)
			}
		}
		if len(doc.polylines) == 0 {
			t.Errorf("%s draws no line", name)
		}
	}
	// The calls chart has one line per action; the overlay one per result.
	if n := len(parseSVG(t, "calls", files["node-cold-burst-100-calls.svg"]).polylines); n != 2 {
		t.Errorf("cold burst calls chart has %d lines, want 2 (one per action)", n)
	}
	if n := len(parseSVG(t, "overlay", files["compare-warm-churn-latency-cdf.svg"]).polylines); n != 2 {
		t.Errorf("overlay has %d lines, want 2 (one per result)", n)
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestWritePlotsDeterministic(t *testing.T) {
	_, a := writePlotsTo(t, benchtest.All())
	_, b := writePlotsTo(t, benchtest.All())
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two renders of the same results differ")
	}
	// Input order does not matter either.
	rs := benchtest.All()
	rs[0], rs[3] = rs[3], rs[0]
	_, c := writePlotsTo(t, rs)
	if !reflect.DeepEqual(a, c) {
		t.Fatal("render depends on the order of the results")
	}
}

func TestPlotEscapesText(t *testing.T) {
	r := benchtest.ColdBurst()
	r.Name = `<b>&"quoted" 'x'`
	r.Series = append(r.Series, bench.Series{Name: "calls:A<&>B", X: []float64{0, 1}, Y: []float64{0, 1}})
	_, files := writePlotsTo(t, []*bench.Result{r})
	data, ok := files["node-b-quoted-x-calls.svg"]
	if !ok {
		t.Fatalf("calls plot not written; got %v", keys(files))
	}
	doc := parseSVG(t, "escaped", data)
	for _, s := range []string{`node/<b>&"quoted" 'x': Cloud calls over time`, "A<&>B"} {
		if !containsString(doc.texts, s) {
			t.Errorf("text %q not shown verbatim; texts %q", s, doc.texts)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestWritePlotsRefusesBadInput(t *testing.T) {
	bad := benchtest.ColdBurst()
	bad.Series[0].Y = bad.Series[0].Y[:2]
	if _, err := WritePlots(t.TempDir(), []*bench.Result{bad}); err == nil || !strings.Contains(err.Error(), "alloc-cdf") {
		t.Errorf("mismatched series lengths: err %v", err)
	}
	if _, err := WritePlots(t.TempDir(), []*bench.Result{benchtest.ColdBurst(), benchtest.ColdBurst()}); err == nil {
		t.Error("duplicate result accepted")
	}
	a, b := benchtest.ColdBurst(), benchtest.ColdBurst()
	b.Name = "Cold Burst 100"
	a.Name = "cold burst/100"
	if _, err := WritePlots(t.TempDir(), []*bench.Result{a, b}); err == nil {
		t.Error("results whose plot files collide accepted")
	}
}

func TestPlotCDFOfSamples(t *testing.T) {
	x, y := cdfOf([]float64{3, 1, 2, 2, math.NaN()})
	wantX := []float64{1, 1, 2, 2, 3, 3}
	wantY := []float64{0, 0.25, 0.25, 0.75, 0.75, 1}
	if !reflect.DeepEqual(x, wantX) || !reflect.DeepEqual(y, wantY) {
		t.Errorf("cdfOf = %v %v, want %v %v", x, y, wantX, wantY)
	}
	if x, _ := cdfOf(nil); x != nil {
		t.Errorf("cdfOf(nil) = %v", x)
	}
}

func TestPlotSumSteps(t *testing.T) {
	x, y := sumSteps([]line{
		{Line: linechart.Line{X: []float64{0, 2}, Y: []float64{1, 3}}},
		{Line: linechart.Line{X: []float64{3, 1}, Y: []float64{20, 10}}}, // unsorted on purpose
	})
	wantX := []float64{0, 1, 2, 3}
	wantY := []float64{1, 11, 13, 23}
	if !reflect.DeepEqual(x, wantX) || !reflect.DeepEqual(y, wantY) {
		t.Errorf("sumSteps = %v %v, want %v %v", x, y, wantX, wantY)
	}
}

func TestPlotAxisLabelFromSeries(t *testing.T) {
	same := []line{{yLabel: "calls so far"}, {yLabel: "calls so far"}}
	if got := axisLabel("cloud calls", same, false); got != "calls so far" {
		t.Errorf("shared label: got %q", got)
	}
	differ := []line{{yLabel: "Attach calls"}, {yLabel: "Create calls"}}
	if got := axisLabel("cloud calls", differ, false); got != "cloud calls" {
		t.Errorf("differing labels: got %q, want the default", got)
	}
	if got := axisLabel("time (s)", []line{{}}, true); got != "time (s)" {
		t.Errorf("no label: got %q", got)
	}
}
