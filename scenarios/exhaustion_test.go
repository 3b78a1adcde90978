package scenarios

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/workload"
)

// Sizes and deadlines of the exhaustion scenario: exhaustFirst pods run
// before the vSwitch is drained, exhaustMore wait for it. The daemon
// publishes SufficientIP within 10s of a change.
const (
	exhaustFirst   = 2
	exhaustMore    = 3
	exhaustInhibit = 10 * time.Second
	conditionAfter = 3 * time.Minute
)

var _ = Describe("vSwitch exhaustion and recovery", Ordered, ContinueOnFailure, Serial, Label(labelFeature, string(mode.ENIMultiIP)), func() {
	var (
		node    corev1.Node
		vswitch string
		w       *workload.Workload
		waiting map[types.UID]string
		// wet ends keepDry.
		wet = func() {}
	)

	BeforeAll(func(ctx SpecContext) {
		env.RequireMode(ctx, mode.ENIMultiIP)
		env.RequireCloud()
		node = env.SchedulableNode(ctx)
		inst, _ := env.NodeInstance(ctx, node)
		Expect(inst.ENIs).NotTo(BeEmpty(), "instance %s has no primary ENI", inst.ID)
		vswitch = inst.ENIs[0].VSwitchID
		// The vSwitch stays dry across the specs that follow; a cleanup
		// registered in one of them would refill it when that one ends.
		DeferCleanup(func(ctx SpecContext) {
			wet()
			Expect(env.Cloud().RefillVSwitch(ctx, vswitch)).To(Succeed())
		}, NodeTimeout(time.Minute))
		// No idle pool, so that every new pod needs the cloud; a short
		// inhibit so that the daemon asks again soon after the refill.
		env.NodeConfig(node.Name).Apply(ctx, map[string]any{"min_pool_size": 0, "max_pool_size": 0,
			"ip_exhausted_inhibit": exhaustInhibit.String()})
		spec := workload.Spec{Namespace: uniqueNamespace("exhaust"), Replicas: exhaustFirst, Node: node.Name}
		w, _, _ = deployWorkload(ctx, env, spec, readyWithin)
	}, NodeTimeout(readyWithin+3*time.Minute))

	It("keeps new pods waiting with an event while the vSwitch is dry, none failing for good (world, API server)", func(ctx SpecContext) {
		By("draining " + vswitch + " of " + node.Name + ", and keeping it dry")
		Expect(env.Cloud().DrainVSwitch(ctx, vswitch, 0)).To(Succeed())
		Expect(vswitchView(ctx, vswitch).Available).To(BeZero())
		wet = keepDry(vswitch)
		Expect(w.Scale(ctx, exhaustFirst+exhaustMore)).To(Succeed())
		Eventually(func(ctx SpecContext) map[string]int {
			return env.EventReasons(ctx, w.Namespace())
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(
			Or(HaveKey("AllocIPFailed"), HaveKey("FailedCreatePodSandBox")))
		pods, err := w.Pods(ctx)
		Expect(err).NotTo(HaveOccurred())
		c := workload.Census(pods)
		Expect(c.Ready).To(HaveLen(exhaustFirst), "pods got addresses from a dry vSwitch: %s", c)
		Expect(c.Waiting).To(HaveLen(exhaustMore), c.String())
		waiting = map[types.UID]string{}
		for _, p := range pods {
			if !workload.IsReady(&p) {
				waiting[p.UID] = p.Name
				Expect(p.Status.Phase).To(Equal(corev1.PodPending), "%s: %s", p.Name, c.Waiting[p.Name])
			}
		}
		AddReportEntry("waiting", c.String())
	}, SpecTimeout(4*time.Minute))

	It("sets the node condition SufficientIP False while the vSwitch is dry (API server)", func(ctx SpecContext) {
		Expect(waiting).NotTo(BeEmpty(), "no pod waited")
		Eventually(func(ctx SpecContext) corev1.ConditionStatus {
			s, _ := env.NodeCondition(ctx, node.Name, k8s.ConditionSufficientIP)
			return s
		}).WithContext(ctx).WithTimeout(conditionAfter).WithPolling(2 * time.Second).Should(Equal(corev1.ConditionFalse))
		_, reason := env.NodeCondition(ctx, node.Name, k8s.ConditionSufficientIP)
		AddReportEntry("SufficientIP reason", reason)
	}, SpecTimeout(conditionAfter+time.Minute))

	It("runs the same pods without a restart once the vSwitch is refilled (world, API server)", func(ctx SpecContext) {
		Expect(waiting).NotTo(BeEmpty(), "no pod waited")
		wet()
		Expect(env.Cloud().RefillVSwitch(ctx, vswitch)).To(Succeed())
		Expect(vswitchView(ctx, vswitch).Drained).To(BeZero())
		start := time.Now()
		waitCtx, cancel := context.WithTimeout(ctx, readyWithin)
		defer cancel()
		pods, err := w.WaitReady(waitCtx, exhaustFirst+exhaustMore)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("all Ready after the refill in", time.Since(start).Round(time.Second).String())
		ready := map[types.UID]string{}
		for _, p := range pods {
			ready[p.UID] = p.Name
			for _, cs := range p.Status.ContainerStatuses {
				Expect(cs.RestartCount).To(BeZero(), "%s/%s restarted", p.Name, cs.Name)
			}
		}
		for uid, name := range waiting {
			Expect(ready).To(HaveKey(uid), "waiting pod %s was replaced, not run (ready: %v)", name, slices.Collect(maps.Values(ready)))
		}
		Expect(CheckPodAddresses(mode.ENIMultiIP, env.World(ctx), env.Nodes(ctx), pods)).To(BeEmpty())
	}, SpecTimeout(readyWithin+time.Minute))

	It("sets SufficientIP True again (API server)", func(ctx SpecContext) {
		Eventually(func(ctx SpecContext) corev1.ConditionStatus {
			s, _ := env.NodeCondition(ctx, node.Name, k8s.ConditionSufficientIP)
			return s
		}).WithContext(ctx).WithTimeout(conditionAfter).WithPolling(2 * time.Second).Should(Equal(corev1.ConditionTrue))
	}, SpecTimeout(conditionAfter+time.Minute))

	itDeletesPodsAndAuditsClean(&w, new(bool))
})

// keepDry drains vSwitch id again every second until the returned func
// is called (and has waited for the last drain): addresses the node's
// daemon gives back while it is dry (its pool trimmed to the new
// max_pool_size) go to someone else at once, as in a busy VPC, instead
// of to the pods that should wait.
func keepDry(id string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if err := env.Cloud().DrainVSwitch(ctx, id, 0); err != nil && ctx.Err() == nil {
				GinkgoWriter.Printf("keep %s dry: %v\n", id, err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// vswitchView reads one vSwitch from the world (tier 2).
func vswitchView(ctx context.Context, id string) admin.VSwitchView {
	GinkgoHelper()
	for _, s := range env.World(ctx).VSwitches {
		if s.ID == id {
			return s
		}
	}
	Fail(fmt.Sprintf("vSwitch %s is not in the world", id))
	return admin.VSwitchView{}
}
