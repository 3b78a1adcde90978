package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/report"
	"github.com/terway-sim/terway/lab/chaos/timeline"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/workload"
)

// restartCauses are the kinds that explain a daemon restart on their
// target while they are active.
var restartCauses = []string{string(chaos.KillTerwayd), string(chaos.RestartContainerd), string(chaos.RestartKubelet),
	string(chaos.NodeStopStart), string(chaos.NodeRelease)}

// restartGrace is how long after such a fault a restart it caused may
// still be seen: the kubelet's back-off after repeated kills.
const restartGrace = time.Minute

// addBands hands the timeline the faults the engine applied, as its
// result records them.
func addBands(smp *timeline.Sampler, res *chaos.Result) {
	for _, b := range faultBands(res) {
		smp.AddBand(b.Band)
	}
}

// faultBands are the applied steps as the report's faults.
func faultBands(res *chaos.Result) []report.Fault {
	var out []report.Fault
	for _, st := range res.Steps {
		if !st.Applied {
			continue
		}
		b := timeline.Band{Name: st.Name, Kind: string(st.Kind), Target: st.Target,
			Start: res.Started.Add(st.From.D()), End: res.Started.Add(st.To.D())}
		out = append(out, report.Fault{Band: b, Fired: st.Fired})
	}
	return out
}

// collectFacts waits for the workload's pods and takes their addresses
// with fakecloud's world, then (with the workload gone) audits the lab
// until clean or the plan's limit. Facts it could not collect stay zero,
// so that their invariants are skipped; notes say why.
func collectFacts(ctx context.Context, g *globals, st *cluster.State, kube kubernetes.Interface, s *chaos.Schedule, w *workload.Workload, smp *timeline.Sampler) (report.Facts, []string, error) {
	inv := s.Plan.Invariants
	f := report.Facts{WantPods: s.Plan.Workload.Pods, Instances: map[string]string{}}
	for _, n := range st.Nodes {
		f.Instances[n.Name] = n.InstanceID
	}
	var notes []string
	rctx, cancel := context.WithTimeout(ctx, inv.PodsReady.D())
	pods, err := w.WaitReady(rctx, s.Plan.Workload.Pods)
	cancel()
	if err != nil {
		notes = append(notes, fmt.Sprintf("pods not Ready within %s: %v", inv.PodsReady.D(), err))
	} else {
		f.Pods = report.PodAddresses(pods)
		f.World, notes = worldFact(ctx, st, notes)
		smp.SampleNow() // the Ready pods on the timeline before they go
	}
	if err := w.Delete(ctx); err != nil {
		return f, notes, err
	}
	rep, err := audit.RunUntilClean(ctx, st.AuditInput(kube), inv.AuditClean.D())
	if err != nil {
		return f, notes, err
	}
	if !rep.Clean() {
		_ = rep.WriteText(g.stdout)
	}
	f.Audits = []*audit.Report{rep}
	return f, notes, nil
}

// worldFact reads fakecloud's world for the ENI check; in VPC mode pods
// take addresses from the node's podCIDR, not from ENIs, so none is read.
func worldFact(ctx context.Context, st *cluster.State, notes []string) (*admin.WorldView, []string) {
	if st.Mode == mode.VPC {
		return nil, append(notes, "VPC mode: pod addresses come from the nodes' podCIDRs, not ENIs")
	}
	world, err := (&admin.Client{URL: st.FakecloudURL, Token: st.AdminToken}).World(ctx)
	if err != nil {
		return nil, append(notes, fmt.Sprintf("fakecloud's world not read: %v", err))
	}
	return world, notes
}

// chaosRun builds the report of a run and judges its invariants.
func chaosRun(s *chaos.Schedule, res *chaos.Result, runErr error, f report.Facts, notes []string) *report.Run {
	var sched bytes.Buffer
	_ = s.WriteText(&sched) // a bytes.Buffer does not fail
	f.Faults = faultBands(res)
	for _, fl := range f.Faults {
		if fl.End.After(f.FaultsEnd) {
			f.FaultsEnd = fl.End
		}
	}
	if f.FaultsEnd.IsZero() {
		f.FaultsEnd = res.Ended
	}
	iv := report.Invariants{AuditWithin: s.Plan.Invariants.AuditClean.D(), ReadyWithin: s.Plan.Invariants.PodsReady.D(),
		RestartCauses: restartCauses, RestartGrace: restartGrace}
	run := &report.Run{Plan: s.Plan.Name, Seed: s.Seed, Schedule: sched.String(), Start: res.Started, End: time.Now(),
		Faults: f.Faults, PodsStarted: s.Plan.Workload.Pods, Invariants: iv.Check(f), Timeline: f.Timeline, Notes: notes}
	if n := len(f.Audits); n > 0 {
		run.Audit = f.Audits[n-1]
	}
	if runErr != nil {
		run.Error = runErr.Error()
	}
	return run
}

// verdict prints each violation with what explains it and fails on any;
// a run that did not complete fails through the engine's error.
func verdict(g *globals, run *report.Run) error {
	vs := run.Violations()
	for _, v := range vs {
		printf(g.stdout, "%s", run.Explain(v))
	}
	if len(vs) > 0 {
		return fmt.Errorf("chaos: %d invariant violation(s) in plan %s, seed %d", len(vs), run.Plan, run.Seed)
	}
	return nil
}
