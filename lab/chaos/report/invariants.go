package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/chaos/timeline"
	"github.com/terway-sim/terway/lab/hostcheck"
	"github.com/terway-sim/terway/lab/workload"
)

// The invariants, in the order Invariants.Check reports them.
const (
	InvFaultsFired    = "faults-fired"
	InvAuditClean     = "audit-clean"
	InvUniqueAddrs    = "unique-addresses"
	InvAddrsOnNodeENI = "addresses-on-node-enis"
	InvPodsReady      = "pods-ready"
	InvConnectivity   = "connectivity"
	InvRestarts       = "daemon-restarts"
	InvMachine        = "machine-unchanged"
)

// Invariants are the limits a run is judged by.
type Invariants struct {
	// AuditWithin is how long after the faults end the audit has to be
	// clean.
	AuditWithin time.Duration
	// ReadyWithin is how long after the faults end every workload pod
	// has to be Ready.
	ReadyWithin time.Duration
	// RestartCauses are the fault kinds that explain a daemon restart on
	// their target (a node, or its instance; any node for a fault without
	// a target) while they are active.
	RestartCauses []string
	// RestartGrace is how long after such a fault ends a restart it
	// caused may still happen (the kubelet's back-off).
	RestartGrace time.Duration
}

// Facts are what a run collected for the invariants. An invariant whose
// facts were not collected (left at their zero value) is skipped, with
// the reason in its Result.
type Facts struct {
	// FaultsEnd is when the last fault was removed.
	FaultsEnd time.Time
	Faults    []Fault
	// Audits are the audits taken once the faults ended, in time order.
	Audits []*audit.Report
	// Pods are the live pods with their addresses (PodAddresses).
	Pods []PodAddress
	// World is fakecloud's world taken with Pods; nil skips the ENI
	// check (VPC mode gives pods addresses from the node's podCIDR).
	World *admin.WorldView
	// Instances maps node names to instance IDs.
	Instances map[string]string
	// WantPods is the workload's replicas; 0 skips pods-ready.
	WantPods int
	// AuditFrom is when the audits started with the lab at rest (the
	// workload gone); the audit's limit counts from it when it is after
	// FaultsEnd. Zero: from FaultsEnd.
	AuditFrom time.Time
	// Timeline is the run's timeline.
	Timeline *timeline.Timeline
	// Connectivity are the connectivity checks run after the faults.
	Connectivity []workload.Check
	// MachineCompared says whether the machine was compared after
	// `down`; MachineDiff is what differed.
	MachineCompared bool
	MachineDiff     []hostcheck.Difference
}

// Check judges every invariant from f, in a fixed order.
func (iv Invariants) Check(f Facts) []Result {
	return []Result{
		CheckFaultsFired(f.Faults),
		CheckAuditClean(f.Audits, f.FaultsEnd, f.AuditFrom, iv.AuditWithin),
		CheckUniqueAddresses(f.Pods),
		CheckAddressesOnNodeENIs(f.Pods, f.World, f.Instances),
		CheckPodsReady(f.Timeline, f.WantPods, f.FaultsEnd, iv.ReadyWithin),
		CheckConnectivity(f.Connectivity),
		CheckRestarts(f.Timeline, iv.RestartCauses, iv.RestartGrace, f.Instances),
		CheckMachine(f.MachineCompared, f.MachineDiff),
	}
}

// violate adds a violation seen at at to r.
func (r *Result) violate(at time.Time, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Invariant: r.Invariant, At: at, Message: fmt.Sprintf(format, args...)})
}

// CheckFaultsFired: a fault that never fired proves nothing, so a plan
// whose faults did not fire fails.
func CheckFaultsFired(faults []Fault) Result {
	r := Result{Invariant: InvFaultsFired}
	if len(faults) == 0 {
		r.Skipped = "the plan injected no faults"
		return r
	}
	var fired int64
	for _, f := range faults {
		fired += f.Fired
		if f.Fired == 0 {
			r.violate(f.End, "fault %s (%s, active %s) never fired", f.Label(), f.Kind, since(f.Start, f.End))
		}
	}
	r.Detail = fmt.Sprintf("%d fault(s), %d fired in all", len(faults), fired)
	return r
}

// CheckAuditClean: an audit taken at or after faultsEnd and at most
// within after the later of faultsEnd and auditFrom (when the lab was
// left at rest for the audit; zero if it was not) is clean, and none
// after it found anything again.
func CheckAuditClean(audits []*audit.Report, faultsEnd, auditFrom time.Time, within time.Duration) Result {
	r := Result{Invariant: InvAuditClean}
	if len(audits) == 0 {
		r.Skipped = "no audit taken"
		return r
	}
	limit := faultsEnd.Add(within)
	if auditFrom.After(faultsEnd) {
		limit = auditFrom.Add(within)
	}
	var clean, last *audit.Report
	for _, a := range audits {
		if a.Time.Before(faultsEnd) {
			continue
		}
		last = a
		switch {
		case clean == nil && a.Clean() && !a.Time.After(limit):
			clean = a
		case clean != nil && !a.Clean():
			r.violate(a.Time, "the audit found problems again %s after the faults ended, once clean: %s", since(faultsEnd, a.Time), AuditSummary(a))
		}
	}
	switch {
	case last == nil:
		r.violate(faultsEnd, "no audit taken after the faults ended")
	case clean == nil:
		r.violate(limit, "the audit was not clean within %s%s; the last one, %s after the faults ended: %s",
			within, restText(faultsEnd, auditFrom), since(faultsEnd, last.Time), AuditSummary(last))
	default:
		r.Detail = fmt.Sprintf("clean %s after the faults ended", since(faultsEnd, clean.Time))
	}
	return r
}

// restText says what the audit's limit counts from.
func restText(faultsEnd, auditFrom time.Time) string {
	if auditFrom.After(faultsEnd) {
		return fmt.Sprintf(" of the lab at rest (%s after the faults ended)", since(faultsEnd, auditFrom))
	}
	return " after the faults ended"
}

// CheckPodsReady: a sample of the timeline at or after faultsEnd and at
// most within later shows want pods, all Ready.
func CheckPodsReady(tl *timeline.Timeline, want int, faultsEnd time.Time, within time.Duration) Result {
	r := Result{Invariant: InvPodsReady}
	if tl == nil || want == 0 {
		r.Skipped = "no timeline or no workload size"
		return r
	}
	var last *timeline.Sample
	// Samples keep their offsets rounded to the millisecond; compare in
	// that rounding, which keeps order, or a sample taken just after the
	// faults ended can round to before their end and be missed.
	from := faultsEnd.Sub(tl.Start).Round(time.Millisecond)
	for i := range tl.Samples {
		s := &tl.Samples[i]
		if s.At.D() < from || s.At.D() > from+within {
			continue
		}
		at := tl.Start.Add(s.At.D())
		if _, failed := s.Errors[timeline.SourcePods]; failed {
			continue
		}
		if s.PodsReady == want && s.Pods == want {
			r.Detail = fmt.Sprintf("all %d Ready %s after the faults ended", want, since(faultsEnd, at))
			return r
		}
		last = s
	}
	if last == nil {
		r.violate(faultsEnd.Add(within), "no sample of the pods within %s after the faults ended", within)
		return r
	}
	r.violate(faultsEnd.Add(within), "%d of %d workload pods Ready within %s after the faults ended (last, %s after: %d Ready of %d, %d terminating)",
		last.PodsReady, want, within, since(faultsEnd, tl.Start.Add(last.At.D())), last.PodsReady, last.Pods, last.PodsTerminating)
	return r
}

// CheckConnectivity: every check passed.
func CheckConnectivity(checks []workload.Check) Result {
	r := Result{Invariant: InvConnectivity}
	if len(checks) == 0 {
		r.Skipped = "no connectivity check ran"
		return r
	}
	failed := workload.Failed(checks)
	for _, c := range failed {
		r.violate(time.Time{}, "%s", c)
	}
	r.Detail = fmt.Sprintf("%d of %d checks passed", len(checks)-len(failed), len(checks))
	return r
}

// CheckRestarts counts the daemon's restarts and their causes: a restart
// is explained by a fault of one of the causes kinds whose target is its
// node (or the node's instance, or empty) and that was active when it
// happened, or at most grace before. Any other restart is a violation.
func CheckRestarts(tl *timeline.Timeline, causes []string, grace time.Duration, instances map[string]string) Result {
	r := Result{Invariant: InvRestarts}
	if tl == nil {
		r.Skipped = "no timeline"
		return r
	}
	byCause := map[string]int{}
	total := 0
	for _, rs := range tl.Restarts {
		total += rs.Count
		when := rs.When(tl.Start)
		if b, ok := explaining(tl.Bands, rs, when, causes, grace, instances); ok {
			byCause[b.Label()] += rs.Count
			continue
		}
		byCause["unexplained"] += rs.Count
		r.violate(when, "daemon restart without a fault to explain it: %s", rs)
	}
	r.Detail = fmt.Sprintf("%d restart(s)", total)
	if total > 0 {
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(byCause)) {
			parts = append(parts, fmt.Sprintf("%d %s", byCause[c], c))
		}
		r.Detail += ": " + strings.Join(parts, ", ")
	}
	return r
}

// explaining finds the band that explains restart rs at when.
func explaining(bands []timeline.Band, rs timeline.Restart, when time.Time, causes []string, grace time.Duration, instances map[string]string) (timeline.Band, bool) {
	for _, b := range bands {
		onNode := targets(b.Target, rs.Node, instances[rs.Node])
		ended := b.End
		if ended.IsZero() {
			ended = when // still active
		}
		if slices.Contains(causes, b.Kind) && onNode && !when.Before(b.Start) && !when.After(ended.Add(grace)) {
			return b, true
		}
	}
	return timeline.Band{}, false
}

// targets says whether a band's target means the node (by name or
// instance): an empty target means every node, and a step against several
// nodes names them all, comma-separated ("lab-1,lab-2").
func targets(target, node, instance string) bool {
	if target == "" {
		return true
	}
	for _, t := range strings.Split(target, ",") {
		if t = strings.TrimSpace(t); t != "" && (t == node || t == instance) {
			return true
		}
	}
	return false
}

// CheckMachine: the machine comparison after `down` found nothing.
func CheckMachine(compared bool, diffs []hostcheck.Difference) Result {
	r := Result{Invariant: InvMachine}
	if !compared {
		r.Skipped = "the machine was not compared"
		return r
	}
	for _, d := range diffs {
		r.violate(time.Time{}, "the machine changed: %s", d)
	}
	r.Detail = fmt.Sprintf("%d difference(s)", len(diffs))
	return r
}

// since prints the time from start to t, rounded for people.
func since(start, t time.Time) time.Duration { return t.Sub(start).Round(100 * time.Millisecond) }
