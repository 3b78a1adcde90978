package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/report"
)

// The report of a lab run carries the engine's steps as faults and
// judges what was collected; what was not is skipped with its reason.
func TestChaosRunReport(t *testing.T) {
	p, err := chaos.Lookup("cloud-errors")
	if err != nil {
		t.Fatal(err)
	}
	s, err := chaos.Resolve(p, 5)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute)
	res := &chaos.Result{Plan: p.Name, Seed: 5, Started: start, Ended: start.Add(time.Minute), Steps: []chaos.StepResult{
		{StepRef: chaos.StepRef{Name: "1-cloud-errors", Kind: chaos.CloudErrors}, Applied: true,
			From: 0, To: admin.Duration(30 * time.Second), Fired: 4},
		{StepRef: chaos.StepRef{Name: "2-unreached", Kind: chaos.CloudErrors}},
	}}
	run := chaosRun(s, res, errors.New("engine failed"), report.Facts{WantPods: 3}, []string{"a note"})
	if len(run.Faults) != 1 || run.Faults[0].Fired != 4 || !run.Faults[0].End.Equal(start.Add(30*time.Second)) {
		t.Errorf("faults %+v", run.Faults)
	}
	status := map[string]string{}
	for _, r := range run.Invariants {
		status[r.Invariant] = r.Status()
		if r.Status() == "skipped" && r.Skipped == "" {
			t.Errorf("%s skipped without a reason", r.Invariant)
		}
	}
	if status[report.InvFaultsFired] != report.VerdictPass || status[report.InvAuditClean] != "skipped" || status[report.InvPodsReady] != "skipped" {
		t.Errorf("invariants %v", status)
	}
	if run.Verdict() != report.VerdictFail || run.Error != "engine failed" {
		t.Errorf("verdict %s, error %q: want the engine's failure to fail the run", run.Verdict(), run.Error)
	}
	dir, err := report.WriteRun(t.TempDir(), run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, report.JSONFile)); err != nil {
		t.Fatal(err)
	}
}
