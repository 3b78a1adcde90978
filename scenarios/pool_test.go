package scenarios

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/workload"
)

// The pool settings the scenario gives one node through its dynamic
// config: a warm pool of poolMin, at most poolMax idle, and idle reclaim
// after reclaimAfter of quiet, reclaimBatch addresses per reclaimEvery.
const (
	poolMin       = 3
	poolMax       = 6
	poolPods      = 8
	reclaimAfter  = 20 * time.Second
	reclaimEvery  = 10 * time.Second
	reclaimBatch  = 2
	poolSettleFor = 2 * time.Minute
)

// idleSample is the idle pool of a node at a moment, as the world shows it.
type idleSample struct {
	at   time.Duration
	idle int
}

func samplesText(s []idleSample) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = fmt.Sprintf("%s:%d", x.at.Round(time.Second), x.idle)
	}
	return strings.Join(parts, " ")
}

var _ = Describe("Pools under a node's dynamic config", Ordered, ContinueOnFailure, Serial, Label(labelFeature, string(mode.ENIMultiIP)), func() {
	var (
		node corev1.Node
		conf *NodeConfig
	)

	BeforeAll(func(ctx SpecContext) {
		env.RequireMode(ctx, mode.ENIMultiIP)
		env.RequireCloud()
		node = env.SchedulableNode(ctx)
		conf = env.NodeConfig(node.Name)
	})

	// idleWithin waits until the node's idle pool, in the world and (tier
	// 3) in the daemon's own pool with nothing in flight, is in [lo, hi].
	idleWithin := func(ctx SpecContext, lo, hi int) {
		GinkgoHelper()
		var last string
		Eventually(func(ctx SpecContext) bool {
			world := env.WorldIdle(ctx, mode.ENIMultiIP, node)
			last = fmt.Sprintf("world %d", world)
			if world < lo || world > hi {
				return false
			}
			if env.Lab == nil {
				return true
			}
			c, _ := env.NodeCounts(ctx, node.Name)
			last += fmt.Sprintf(", daemon pool %d idle, %d in flight", c.PoolIdle, c.PoolInflight)
			return c.PoolIdle >= lo && c.PoolIdle <= hi && c.PoolInflight == 0
		}).WithContext(ctx).WithTimeout(poolSettleFor).WithPolling(2*time.Second).Should(BeTrue(), func() string {
			return fmt.Sprintf("idle on %s not in [%d, %d]: %s", node.Name, lo, hi, last)
		})
		AddReportEntry("idle pool on "+node.Name, last)
	}

	It("trims the pool to max_pool_size 0 when the node's dynamic config says so (world, daemon pool)", func(ctx SpecContext) {
		conf.Apply(ctx, map[string]any{"min_pool_size": 0, "max_pool_size": 0})
		idleWithin(ctx, 0, 0)
	}, SpecTimeout(5*time.Minute))

	It("warms the pool up to min_pool_size when the daemon starts with a new dynamic config (world, daemon pool)", func(ctx SpecContext) {
		Expect(env.WorldIdle(ctx, mode.ENIMultiIP, node)).To(BeZero(), "the pool was not empty before")
		conf.Apply(ctx, map[string]any{"min_pool_size": poolMin, "max_pool_size": poolMax,
			"idle_ip_reclaim_after": reclaimAfter.String(), "idle_ip_reclaim_interval": reclaimEvery.String(),
			"idle_ip_reclaim_batch_size": reclaimBatch, "idle_ip_reclaim_jitter_factor": "0"})
		idleWithin(ctx, poolMin, poolMax)
	}, SpecTimeout(5*time.Minute))

	It("keeps idle at most max_pool_size after pods go, then reclaims it to min_pool_size over time (world)", func(ctx SpecContext) {
		spec := workload.Spec{Namespace: uniqueNamespace("pool"), Replicas: poolPods, Node: node.Name}
		w, pods, _ := deployWorkload(ctx, env, spec, readyWithin)
		Expect(CheckPodAddresses(mode.ENIMultiIP, env.World(ctx), env.Nodes(ctx), pods)).To(BeEmpty())
		Expect(w.Scale(ctx, 0)).To(Succeed())
		Expect(w.WaitGone(ctx)).To(Succeed())
		start := time.Now()
		var samples []idleSample
		Eventually(func(ctx SpecContext) int {
			s := idleSample{time.Since(start), env.WorldIdle(ctx, mode.ENIMultiIP, node)}
			samples = append(samples, s)
			return s.idle
		}).WithContext(ctx).WithTimeout(reclaimAfter + 6*reclaimEvery + time.Minute).WithPolling(2 * time.Second).
			Should(Equal(poolMin))
		AddReportEntry("idle on "+node.Name+" after the pods went (time:idle)", samplesText(samples))
		// Reclaim, not the max trim, brought it down: it waited for the
		// quiet period with idle above min, and never went below min.
		var aboveMinLate, belowMin bool
		for _, s := range samples {
			aboveMinLate = aboveMinLate || (s.idle > poolMin && s.at >= reclaimAfter/2)
			belowMin = belowMin || s.idle < poolMin
		}
		Expect(aboveMinLate).To(BeTrue(), "idle was never above min_pool_size %s after the pods went: %s",
			reclaimAfter/2, samplesText(samples))
		Expect(belowMin).To(BeFalse(), "idle went below min_pool_size: %s", samplesText(samples))
		last := samples[len(samples)-1]
		// Two rounds at least (6 → 4 → 3), one reclaim interval apart.
		Expect(last.at).To(BeNumerically(">=", reclaimEvery), "reclaimed to min in one go: %s", samplesText(samples))
		// After the max trim settled, idle was never above max.
		for _, s := range samples {
			if s.at >= 30*time.Second {
				Expect(s.idle).To(BeNumerically("<=", poolMax), "idle above max_pool_size: %s", samplesText(samples))
			}
		}
	}, SpecTimeout(readyWithin+6*time.Minute))

	It("leaves the audit clean (tier 3)", func(ctx SpecContext) {
		env.RequireLab()
		r := env.Audit(ctx, auditWithin)
		Expect(r.Clean()).To(BeTrue(), reportText(r))
	}, SpecTimeout(auditWithin+time.Minute))
})
