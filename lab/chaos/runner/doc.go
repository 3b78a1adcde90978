// Package runner runs one chaos schedule on a running lab, from a settled
// lab to a verdict: the orchestration behind `terway-lab chaos` and the
// chaos scenario specs (scenarios/chaos_test.go), so that both judge a
// plan the same way.
//
// Run does, in order:
//
//  1. settle: the previous workload is gone and terway is Ready on every
//     node, so that a restart an earlier plan caused is not counted
//     against this one (the timeline's restart counts start after it); a
//     terway pod whose container restarted is replaced by a new one, which
//     has no crash back-off for this plan's kills to wait out;
//  2. cold pools, when the plan asks (chaos.Workload.ColdPools): an
//     operator deletes every secondary ENI of the nodes that holds no
//     pod's address, and the run waits until the audit is clean again, so
//     that allocation-path faults meet the calls of cold nodes;
//  3. the rollout of the plan's pods, with its rolling restarts spread
//     over the faults' window (chaos.Workload.Restarts);
//  4. the engine applies and undoes the faults while the timeline samples
//     the lab each second;
//  5. facts: the Ready pods and their addresses against fakecloud's world,
//     the connectivity matrix (lab/workload), daemon restarts and their
//     causes (the timeline);
//  6. with the workload gone, the audit until clean within the plan's
//     limit;
//  7. the verdict (lab/chaos/report's invariants), which Outcome carries
//     and WriteReport writes.
//
// The runner reaches the lab through Config: the engine as the caller
// wired it (its Lab, Operator and Cloud), the API server, and narrow
// interfaces for the workload, the probes and the audit, so that its
// orchestration is tested without a lab. LabConfig wires them to a lab.
package runner
