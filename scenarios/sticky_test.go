package scenarios

import (
	"fmt"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/workload"
)

// stickyTime is the short reservation the scenario configures; the GC
// period bounds how late the daemon notices its end.
const (
	stickyTime = 30 * time.Second
	stickyGC   = 10 * time.Second
)

var _ = Describe("Sticky IPs of StatefulSet pods", Ordered, ContinueOnFailure, Serial, Label(labelFeature, string(mode.ENIMultiIP)), func() {
	var (
		node   corev1.Node
		w      *workload.Workload
		first  corev1.Pod
		addr   netip.Addr
		goneAt time.Time
	)

	BeforeAll(func(ctx SpecContext) {
		env.RequireMode(ctx, mode.ENIMultiIP)
		env.RequireCloud()
		node = env.SchedulableNode(ctx)
		// max_pool_size 0: an address that is not reserved any more goes
		// back to the cloud, so the world shows when the reservation ends.
		env.NodeConfig(node.Name).Apply(ctx, map[string]any{"sticky_time": stickyTime.String(),
			"gc_period": stickyGC.String(), "min_pool_size": 0, "max_pool_size": 0})
		spec := workload.Spec{Namespace: uniqueNamespace("sticky"), Name: "db", Replicas: 1, StatefulSet: true, Node: node.Name}
		var pods []corev1.Pod
		w, pods, _ = deployWorkload(ctx, env, spec, readyWithin)
		first = pods[0]
		addr = netip.MustParseAddr(first.Status.PodIP)
		By(fmt.Sprintf("%s runs on %s with %s", first.Name, node.Name, addr))
	}, NodeTimeout(readyWithin+3*time.Minute))

	It("gives a deleted pod's successor of the same name its address (API server, world)", func(ctx SpecContext) {
		Expect(env.Kube.CoreV1().Pods(first.Namespace).Delete(ctx, first.Name, metav1.DeleteOptions{})).To(Succeed())
		var next corev1.Pod
		Eventually(func(ctx SpecContext) []string {
			pods, err := w.Pods(ctx)
			Expect(err).NotTo(HaveOccurred())
			c := workload.Census(pods)
			if len(c.Ready) == 1 && c.Ready[0].UID != first.UID {
				next = c.Ready[0]
				return nil
			}
			return []string{c.String()}
		}).WithContext(ctx).WithTimeout(readyWithin).WithPolling(time.Second).Should(BeEmpty())
		Expect(next.Name).To(Equal(first.Name))
		Expect(next.Spec.NodeName).To(Equal(node.Name))
		Expect(next.Status.PodIP).To(Equal(addr.String()), "the successor of %s got another address", first.Name)
		problems := CheckPodAddresses(mode.ENIMultiIP, env.World(ctx), env.Nodes(ctx), []corev1.Pod{next})
		Expect(problems).To(BeEmpty())
	}, SpecTimeout(readyWithin+time.Minute))

	It("keeps the address reserved while no pod of that name exists (world, daemon store)", func(ctx SpecContext) {
		goneAt = time.Now()
		Expect(w.Scale(ctx, 0)).To(Succeed())
		Expect(w.WaitGone(ctx)).To(Succeed())
		Expect(addressOnInstance(ctx, node, addr)).To(BeTrue(), "%s left the node's ENIs while reserved", addr)
		if env.Lab != nil {
			c, r := env.NodeCounts(ctx, node.Name)
			Expect(c.Reserved).To(Equal(1), "reservations on %s:\n%s", node.Name, reportText(r))
		}
		Expect(time.Since(goneAt)).To(BeNumerically("<", stickyTime), "too slow to see the reservation")
	}, SpecTimeout(2*time.Minute))

	It("ends the reservation after sticky_time (world, daemon store, audit)", func(ctx SpecContext) {
		Expect(goneAt.IsZero()).To(BeFalse(), "the pod was not deleted")
		Eventually(func(ctx SpecContext) bool {
			return addressOnInstance(ctx, node, addr)
		}).WithContext(ctx).WithTimeout(stickyTime + 3*stickyGC + time.Minute).WithPolling(2 * time.Second).Should(BeFalse())
		released := time.Since(goneAt)
		AddReportEntry("reservation ended after", released.Round(time.Second).String())
		Expect(released).To(BeNumerically(">=", stickyTime), "released before sticky_time")
		if env.Lab != nil {
			r := env.Audit(ctx, auditWithin)
			Expect(r.Clean()).To(BeTrue(), reportText(r))
			c, _ := env.NodeCounts(ctx, node.Name)
			Expect(c.Reserved).To(BeZero())
		}
	}, SpecTimeout(stickyTime+3*stickyGC+3*time.Minute))
})

// addressOnInstance reports whether the world shows a assigned to an ENI
// attached to node's instance.
func addressOnInstance(ctx SpecContext, node corev1.Node, a netip.Addr) bool {
	GinkgoHelper()
	inst, world := env.NodeInstance(ctx, node)
	at, ok := indexAddresses(world)[a]
	return ok && at.eni.InstanceID == inst.ID
}
