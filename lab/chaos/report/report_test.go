package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/lab/audit"
)

// testRun is a run of plan "cloud-storm" judged on testTimeline: its
// pods are Ready 2 s after the faults end, too late for a 1 s limit, and
// the last audit has a leak.
func testRun() *Run {
	tl := testTimeline()
	r := &Run{Plan: "cloud-storm", Seed: 7, Schedule: "0s +2s storm cloud DescribeVSwitches p=1\n1s +1s kill-terwayd process node-1\n",
		Start: t0, End: tl.End, PodsStarted: 3, Timeline: tl, Audit: auditAt(2*time.Second, leak),
		Faults: []Fault{{Band: tl.Bands[0], Fired: 1}, {Band: tl.Bands[1], Fired: 9}},
		Notes:  []string{"a note with a | pipe"},
	}
	r.Invariants = Invariants{ReadyWithin: time.Second, RestartCauses: []string{"process"}}.Check(Facts{
		FaultsEnd: faultsEnd, Faults: r.Faults, Timeline: tl, WantPods: 3})
	return r
}

// passingRun is another plan's run without violations.
func passingRun() *Run {
	r := testRun()
	r.Plan, r.Seed, r.Audit = "kill-daemon", 3, auditAt(time.Second)
	r.Invariants = Invariants{ReadyWithin: 5 * time.Second, RestartCauses: []string{"process"}}.Check(Facts{
		FaultsEnd: faultsEnd, Faults: r.Faults, Timeline: r.Timeline, WantPods: 3})
	return r
}

func contains(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

func TestRunVerdictAndExplain(t *testing.T) {
	r := testRun()
	v := r.Violations()
	if r.Verdict() != VerdictFail || len(v) != 1 || v[0].Invariant != InvPodsReady {
		t.Fatalf("verdict %s, violations %+v: want one of pods-ready", r.Verdict(), v)
	}
	text := r.Explain(v[0])
	contains(t, "explanation", text,
		"violation of pods-ready in plan cloud-storm, seed 7: 2 of 3 workload pods Ready within 1s",
		"replay: terway-lab chaos --plan cloud-storm --seed 7 (the same fault schedule; outcomes can differ with timing)",
		"audit: 1 finding(s) at 2025-03-04T05:06:13Z (leaked-ip ×1); leaked-ip node-1: ip 192.168.0.7 on eni-1",
		"up to 5.0s:", "fault storm (DescribeVSwitches), cloud: 2.0s → 4.0s", "restart at 2.0s: terway-a/terwayd on node-1")
	if strings.Contains(text, "6.0s") {
		t.Errorf("the explanation shows the timeline past the violation:\n%s", text)
	}
	if p := passingRun(); p.Verdict() != VerdictPass || len(p.Violations()) != 0 {
		t.Errorf("passing run: %s, %+v", p.Verdict(), p.Violations())
	}
	r.Invariants = nil
	r.Error = "lab went away"
	if r.Verdict() != VerdictFail {
		t.Error("a run that did not complete passes")
	}
	if got := AuditSummary(nil); got != "none taken" {
		t.Errorf("summary of no audit: %q", got)
	}
	many := &audit.Report{Time: t0, Findings: []audit.Finding{leak, leak, leak, leak, {Kind: audit.KindDuplicateIP, Object: "ip x"}}}
	contains(t, "summary", AuditSummary(many), "5 finding(s)", "duplicate-ip ×1, leaked-ip ×4", "; 2 more")
}

func TestWriteJSONRoundTrip(t *testing.T) {
	r := testRun()
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(b.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	if top["verdict"] != VerdictFail || top["violations"] != 1.0 || top["plan"] != "cloud-storm" {
		t.Errorf("verdict %v, violations %v, plan %v", top["verdict"], top["violations"], top["plan"])
	}
	path := filepath.Join(t.TempDir(), JSONFile)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := WriteJSON(&again, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), again.Bytes()) {
		t.Errorf("a run read back writes differently:\n%s\n---\n%s", b.Bytes(), again.Bytes())
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, testRun()); err != nil {
		t.Fatal(err)
	}
	contains(t, "run.md", b.String(),
		"# Chaos run cloud-storm, seed 7\n",
		"**Verdict: FAIL** — 1 violation(s).",
		"| Faults injected | 2 (fired 10) |", "| Pods started | 3 |", "| Daemon restarts | 1 |", "| Duration | 8s |",
		"Replay: `terway-lab chaos --plan cloud-storm --seed 7`.",
		"```text\n0s +2s storm cloud DescribeVSwitches p=1\n1s +1s kill-terwayd process node-1\n```",
		"| storm | cloud | DescribeVSwitches | 2s | 4s | 9 |",
		"| pods-ready | FAIL | 1 violation(s), below |", "| daemon-restarts | pass | 1 restart(s): 1 kill-terwayd (node-1) |",
		"| machine-unchanged | skipped | the machine was not compared |",
		"### 1. pods-ready\n\n```\nviolation of pods-ready in plan cloud-storm, seed 7:",
		"![timeline of cloud-storm, seed 7](timeline.svg)",
		"| Success | 99 |", "| Throttling.User | 9 |",
		"## Audit\n\n1 finding(s)",
		"- a note with a \\| pipe",
	)
}

func TestWriteSummary(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSummary(&b, []*Run{testRun(), passingRun()}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	contains(t, "summary", md, "2 run(s), 1 failed.", "outcomes can differ with timing",
		"| Plan | Seed | Duration | Faults injected | Pods started | Violations | Verdict |",
		"| [cloud-storm](cloud-storm-7/run.md) | 7 | 8s | 2 (fired 10) | 3 | 1 | FAIL |",
		"| [kill-daemon](kill-daemon-3/run.md) | 3 | 8s | 2 (fired 10) | 3 | 0 | pass |")
	if strings.Index(md, "cloud-storm-7") > strings.Index(md, "kill-daemon-3") {
		t.Error("runs are not sorted by plan")
	}
}

// element is an XML element with everything in it.
type element struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Text     string     `xml:",chardata"`
	Children []element  `xml:",any"`
}

// svgInfo is what the tests read back from a chart.
type svgInfo struct {
	titles []string // every <title>
	panels int      // nested <svg> elements
	rects  int      // band rectangles
}

// parseSVG decodes data, failing the test unless its root element is
// well-formed XML.
func parseSVG(t *testing.T, data []byte) svgInfo {
	t.Helper()
	var root element
	if err := xml.Unmarshal(data, &root); err != nil {
		t.Fatalf("not well-formed XML: %v", err)
	}
	var info svgInfo
	var walk func(e element, depth int)
	walk = func(e element, depth int) {
		switch e.XMLName.Local {
		case "title":
			info.titles = append(info.titles, e.Text)
		case "svg":
			info.panels += min(depth, 1)
		case "rect":
			for _, a := range e.Attrs {
				if a.Name.Local == "fill-opacity" {
					info.rects++
				}
			}
		}
		for _, c := range e.Children {
			walk(c, depth+1)
		}
	}
	walk(root, 0)
	return info
}

func TestTimelineSVG(t *testing.T) {
	r := testRun()
	svg := TimelineSVG(r)
	info := parseSVG(t, svg)
	if info.panels != 4 || info.rects != 4*2 {
		t.Errorf("%d panels, %d band rectangles: want 4 panels with 2 bands each", info.panels, info.rects)
	}
	titles := strings.Join(info.titles, "\n")
	contains(t, "chart titles", titles, "Chaos run cloud-storm, seed 7", "Workload pods", "Cloud calls by outcome", "Throttled cloud calls", "Daemon restarts",
		"kill-terwayd (node-1)", "storm (DescribeVSwitches)", "Ready", "Throttling.User", "node-1")
	if !bytes.Equal(svg, TimelineSVG(r)) {
		t.Error("two renders of one run differ")
	}
	r.Timeline = nil
	if TimelineSVG(r) != nil {
		t.Error("a chart of no timeline")
	}
}

func TestWriteRunLayout(t *testing.T) {
	dir := t.TempDir()
	runDir, err := WriteRun(dir, testRun())
	if err != nil {
		t.Fatal(err)
	}
	if runDir != filepath.Join(dir, "cloud-storm-7") {
		t.Errorf("run written to %s", runDir)
	}
	for _, f := range []string{JSONFile, MarkdownFile, TimelineFile} {
		if fi, err := os.Stat(filepath.Join(runDir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := WriteRun(dir, passingRun()); err != nil {
		t.Fatal(err)
	}
	summary, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	contains(t, "summary of two invocations", string(summary), "2 run(s), 1 failed.", "cloud-storm-7/run.md", "kill-daemon-3/run.md")
	bad := testRun()
	bad.Plan = "../escape"
	if _, err := WriteRun(dir, bad); err == nil {
		t.Error("a plan name with a path was written")
	}
}

// A damaged run directory beside the run written (a run.json that does
// not decode) is listed in the summary, and does not fail the write.
func TestWriteRunListsDamagedRuns(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "broken-1")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, JSONFile), []byte(`{"plan": "broken", "timeline": {"samples": [{"callsOver": "-1s"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteRun(dir, passingRun()); err != nil {
		t.Fatalf("a damaged run elsewhere failed the write: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	contains(t, "summary", string(md), "1 run(s), 0 failed.", "1 damaged run(s), left out above:", "broken-1/run.json")
}
