package scenarios

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/workload"
)

// Sizes and deadlines of the ENIMultiIP basics scenario.
const (
	multiIPPods = 20
	// readyWithin covers a cold pool: ENIs created and attached, IPs
	// assigned in batches, under the daemon's rate limits.
	readyWithin = 4 * time.Minute
	// auditWithin is how long the audit may take to come out clean after
	// the pods are gone (releases in flight show for a moment).
	auditWithin = 60 * time.Second
)

var _ = Describe("ENIMultiIP basics", Ordered, ContinueOnFailure, Serial, Label(labelSmoke, string(mode.ENIMultiIP)), func() {
	var (
		tw      workload.Terway
		w       *workload.Workload
		pods    []corev1.Pod
		svc     *corev1.Service
		nodes   []corev1.Node
		prober  workload.Prober
		deleted bool
	)

	BeforeAll(func(ctx SpecContext) {
		tw = env.Terway(ctx)
		if tw.Mode != mode.ENIMultiIP {
			Skip(fmt.Sprintf("terway runs in %s mode, this scenario needs %s", tw.Mode, mode.ENIMultiIP))
		}
		nodes = env.SchedulableNodes(ctx)
		if len(nodes) < 2 {
			Skip(fmt.Sprintf("needs 2 schedulable nodes, the cluster has %d", len(nodes)))
		}
		spec := workload.Spec{Namespace: uniqueNamespace("multiip"), Replicas: multiIPPods, Spread: true}
		By(fmt.Sprintf("deploying %d pods spread over %d nodes in %s", multiIPPods, len(nodes), spec.Namespace))
		var rec *workload.LatencyRecorder
		w, pods, rec = deployWorkload(ctx, env, spec, readyWithin)
		Expect(rec.Wait(ctx, multiIPPods)).To(Succeed())
		AddReportEntry("ready latency (creationTimestamp -> Ready seen)", workload.Summarize(rec.Latencies()).String())
		AddReportEntry("ready latency (first seen -> Ready seen)", workload.Summarize(rec.WatchLatencies()).String())
		var err error
		svc, err = w.ServiceObject(ctx)
		Expect(err).NotTo(HaveOccurred())
		prober = workload.Prober{Runner: env.Exec}
	}, NodeTimeout(readyWithin+time.Minute))

	It("runs every pod Ready, on every schedulable node", func() {
		Expect(pods).To(HaveLen(multiIPPods))
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.Name
		}
		Expect(workload.Nodes(pods)).To(ConsistOf(names))
	})

	It("connects pod to pod on the same node", func(ctx SpecContext) {
		var checks []workload.Check
		for _, pair := range workload.SameNodePairs(pods) {
			checks = append(checks, prober.PodToPod(ctx, workload.KindSameNode, pair))
		}
		Expect(checks).To(HaveLen(len(nodes)), "one check per node")
		reportChecks(checks)
	}, SpecTimeout(2*time.Minute))

	It("connects pod to pod across nodes", func(ctx SpecContext) {
		var checks []workload.Check
		for _, pair := range workload.CrossNodePairs(pods) {
			checks = append(checks, prober.PodToPod(ctx, workload.KindCrossNode, pair))
		}
		reportChecks(checks)
	}, SpecTimeout(2*time.Minute))

	It("reaches the Service's ClusterIP from every node", func(ctx SpecContext) {
		var checks []workload.Check
		for _, from := range workload.OnePerNode(pods) {
			checks = append(checks, prober.PodToService(ctx, from, svc, pods))
		}
		reportChecks(checks)
	}, SpecTimeout(2*time.Minute))

	It("gives every pod an address of an ENI attached to its node's instance (tier 2)", func(ctx SpecContext) {
		env.RequireCloud()
		problems := CheckPodAddresses(mode.ENIMultiIP, env.World(ctx), env.Nodes(ctx), pods)
		Expect(problems).To(BeEmpty(), strings.Join(problems, "\n"))
	}, SpecTimeout(time.Minute))

	itDeletesPodsAndAuditsClean(&w, &deleted)

	It("brings each node's idle pool back within [min_pool_size, max_pool_size] (tier 3, or tier 2)", func(ctx SpecContext) {
		if env.Lab == nil {
			env.RequireCloud()
		}
		Expect(deleted).To(BeTrue(), "pods were not deleted")
		// The daemon trims its pool on release and every
		// ip_pool_sync_period; give it two rounds and a margin.
		within := 2*tw.PoolSyncPeriod + time.Minute
		By(fmt.Sprintf("waiting up to %s for idle in [%d, %d] on every node", within, tw.MinPoolSize, tw.MaxPoolSize))
		var last map[string]int
		Eventually(func(ctx context.Context) []string {
			var bad []string
			last, bad = idlePools(ctx, tw)
			return bad
		}).WithContext(ctx).WithTimeout(within).WithPolling(5*time.Second).Should(BeEmpty(), func() string {
			return fmt.Sprintf("idle pool per node %v, bounds [%d, %d]", last, tw.MinPoolSize, tw.MaxPoolSize)
		})
		AddReportEntry("idle pool per node", fmt.Sprint(last))
	}, SpecTimeout(10*time.Minute))
})

// idlePools reads each lab node's idle pool, from the daemons' pools
// through the audit (tier 3) or else from the world (tier 2), and returns
// it with one line per node outside [MinPoolSize, MaxPoolSize] (or with
// pool operations in flight).
func idlePools(ctx context.Context, tw workload.Terway) (map[string]int, []string) {
	GinkgoHelper()
	idle := map[string]int{}
	var bad []string
	if env.Lab != nil {
		r, err := audit.Run(ctx, env.Lab.AuditInput(env.Kube))
		Expect(err).NotTo(HaveOccurred())
		for _, f := range r.Findings {
			if f.Kind == audit.KindSourceError {
				bad = append(bad, fmt.Sprintf("%s: %s: %s", f.Node, f.Object, f.Detail))
			}
		}
		for _, n := range r.Nodes {
			c := n.Counts
			idle[n.Name] = c.PoolIdle
			// Other pods of the cluster may hold addresses (in use); only
			// calls in flight mean the pool is still moving.
			if c.PoolInflight > 0 {
				bad = append(bad, fmt.Sprintf("%s: %d pool operation(s) in flight", n.Name, c.PoolInflight))
			}
		}
	} else {
		world := env.World(ctx)
		held := HeldAddresses(env.AllPods(ctx))
		for _, n := range env.Nodes(ctx) {
			inst, ok := NodeInstance(n, world)
			if !ok {
				bad = append(bad, fmt.Sprintf("%s: no instance in the world", n.Name))
				continue
			}
			idle[n.Name] = IdleAddresses(mode.ENIMultiIP, world, inst, held[n.Name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(idle)) {
		if v := idle[name]; v < tw.MinPoolSize || v > tw.MaxPoolSize {
			bad = append(bad, fmt.Sprintf("%s: %d idle", name, v))
		}
	}
	return idle, bad
}

// itDeletesPodsAndAuditsClean adds the two specs that end a rollout: the
// workload *w scaled to zero and its pods gone (then *deleted is set), and
// the lab's audit clean within auditWithin after that.
func itDeletesPodsAndAuditsClean(w **workload.Workload, deleted *bool) {
	It("deletes all pods", func(ctx SpecContext) {
		Expect((*w).Scale(ctx, 0)).To(Succeed())
		Expect((*w).WaitGone(ctx)).To(Succeed())
		*deleted = true
	}, SpecTimeout(3*time.Minute))

	It("leaves the audit clean (tier 3)", func(ctx SpecContext) {
		env.RequireLab()
		Expect(*deleted).To(BeTrue(), "pods were not deleted")
		r := env.Audit(ctx, auditWithin)
		AddReportEntry("audit", reportText(r), ReportEntryVisibilityFailureOrVerbose)
		Expect(r.Clean()).To(BeTrue(), "audit after %s:\n%s", auditWithin, reportText(r))
	}, SpecTimeout(auditWithin+time.Minute))
}

// reportText renders an audit report for a failure message.
func reportText(r *audit.Report) string {
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		return err.Error()
	}
	return b.String()
}
