package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/report"
	"github.com/terway-sim/terway/lab/chaos/timeline"
)

// collectFacts waits for the workload's pods, takes their addresses with
// fakecloud's world and runs the connectivity matrix, then (with the
// workload gone) audits the lab until clean or the plan's limit. Facts it
// could not collect stay zero, so that their invariants are skipped;
// notes say why. errs are failures of the run itself (the workload would
// not go, the audit could not run).
func collectFacts(ctx context.Context, cfg *Config, s *chaos.Schedule, smp *timeline.Sampler) (f report.Facts, notes []string, errs []error) {
	inv := s.Plan.Invariants
	f = report.Facts{WantPods: s.Plan.Workload.Pods, Instances: map[string]string{}}
	for _, n := range cfg.Engine.Nodes {
		f.Instances[n.Name] = n.InstanceID
	}
	cfg.progress("waiting up to %s for %d Ready pods", inv.PodsReady.D(), s.Plan.Workload.Pods)
	rctx, cancel := context.WithTimeout(ctx, inv.PodsReady.D())
	pods, err := cfg.Workload.WaitReady(rctx, s.Plan.Workload.Pods)
	cancel()
	if err != nil {
		notes = append(notes, fmt.Sprintf("pods not Ready within %s: %v", inv.PodsReady.D(), err))
	} else {
		f.Pods = report.PodAddresses(pods)
		if cfg.VPC {
			notes = append(notes, "VPC mode: pod addresses come from the nodes' podCIDRs, not ENIs")
		} else if f.World, err = cfg.Engine.Cloud.World(ctx); err != nil {
			notes = append(notes, fmt.Sprintf("fakecloud's world not read: %v", err))
		}
		smp.SampleNow() // the Ready pods on the timeline before they go
		if cfg.Prober == nil {
			notes = append(notes, "no connectivity check: the runner has no prober")
		} else {
			svc, err := cfg.Workload.ServiceObject(ctx)
			if err != nil {
				notes = append(notes, fmt.Sprintf("no pod-to-service checks: %v", err))
			}
			cfg.progress("connectivity matrix over %d pods", len(pods))
			f.Connectivity = cfg.Prober.CheckAll(ctx, pods, svc)
		}
	}
	cfg.progress("deleting the workload")
	if err := cfg.Workload.Delete(ctx); err != nil {
		return f, notes, append(errs, fmt.Errorf("delete the workload: %w", err))
	}
	if cfg.Audit == nil {
		return f, append(notes, "no audit: the runner has no auditor"), errs
	}
	// The audit starts with the lab at rest: its limit counts from here.
	f.AuditFrom = time.Now()
	cfg.progress("auditing until clean, up to %s", inv.AuditClean.D())
	rep, err := cfg.Audit(ctx, inv.AuditClean.D())
	if err != nil {
		return f, notes, append(errs, fmt.Errorf("audit: %w", err))
	}
	f.Audits = append(f.Audits, rep)
	return f, notes, errs
}
