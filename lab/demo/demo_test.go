package demo

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/workload"
)

func TestParseAddPhases(t *testing.T) {
	log := `time=2026-11-30T01:30:40Z level=INFO msg="pod network set up" kind=Veth ipv4=192.168.0.2 lockWait=1ms alloc=2ms datapathLockWait=3ms datapath=4ms took=4.1ms total=12.5ms
time=2026-11-30T01:30:41Z level=ERROR msg="AllocIP failed" err=boom took=1s alloc=9s
time=2026-11-30T01:30:42Z level=INFO msg="pod network set up" kind=Veth ipv4=192.168.0.3 took=1.2s total=1.3s
time=2026-11-30T01:30:43Z level=INFO msg="pod network set up" total=garbage
`
	got := parseAddPhases(strings.NewReader(log))
	want := map[string][]time.Duration{"total": {12500 * time.Microsecond, 1300 * time.Millisecond},
		"lockWait": {time.Millisecond}, "alloc": {2 * time.Millisecond}, "datapathLockWait": {3 * time.Millisecond},
		"datapath": {4 * time.Millisecond}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("parseAddPhases = %v, want %v", got, want)
	}
}

func TestReportVerdictAndRendering(t *testing.T) {
	r := &Report{Mode: mode.ENIMultiIP, Nodes: 2, Replicas: 4, PodsStarted: 8,
		Calls:  map[string]int64{"CreateNetworkInterface": 2},
		Failed: map[string]int64{"DescribeNetworkInterfaceAttribute: InvalidEniId.NotFound": 1},
		Cold:   workload.Summarize([]time.Duration{time.Second, 2 * time.Second}),
		Connectivity: []workload.Check{{Kind: workload.KindSameNode, OK: true}, {Kind: workload.KindCrossNode, OK: true},
			{Kind: workload.KindService, OK: true}},
		Audit: &audit.Report{}}
	if !r.OK() {
		t.Fatal("a report with passing checks and a clean audit is not OK")
	}
	var text, md bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PASS", "CreateNetworkInterface 2 (0.25/pod)", "InvalidEniId.NotFound 1", "pod-pod-cross-node 1/1", "audit", "clean"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(md.String(), "| figure | value |") {
		t.Errorf("markdown report has no table:\n%s", md.String())
	}
	r.Connectivity[1].OK = false
	if r.OK() {
		t.Error("a failed cross-node check still reads OK")
	}
	r.Connectivity[1].OK = true
	r.Audit.Findings = []audit.Finding{{Kind: "leaked-ip"}}
	if r.OK() {
		t.Error("an unclean audit still reads OK")
	}
}
