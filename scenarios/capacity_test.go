package scenarios

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/workload"
)

// capacityExtra is how many pods beyond a node's capacity the capacity
// scenarios ask for.
const capacityExtra = 3

// capacityFailures are the event reasons of a pod whose network setup
// failed: a pod kept out by capacity must never get them.
var capacityFailures = []string{"AllocIPFailed", "FailedCreatePodSandBox"}

var _ = Describe("Node capacity", Serial, Label(labelFeature), func() {
	It("keeps pods beyond max-available-ip Pending through maxPods, never failing their network (API server, world)", Label(string(mode.ENIMultiIP)), func(ctx SpecContext) {
		env.RequireMode(ctx, mode.ENIMultiIP)
		env.RequireCloud()
		node := env.SchedulableNode(ctx)
		capacity, err := strconv.Atoi(node.Annotations[k8s.AnnotationMaxAvailableIP])
		Expect(err).NotTo(HaveOccurred(), "node %s annotation %s", node.Name, k8s.AnnotationMaxAvailableIP)
		maxPods := node.Status.Allocatable.Pods().Value()
		onNode, hostNet := podsOn(ctx, node.Name)
		// maxPods must keep the pods that need an address within what the
		// instance type can address.
		Expect(maxPods-int64(hostNet)).To(BeNumerically("<=", capacity),
			"maxPods %d less %d hostNetwork pods exceeds max-available-ip %d", maxPods, hostNet, capacity)
		free := int(maxPods) - onNode
		Expect(free).To(BeNumerically(">", 0), "node %s is full already", node.Name)
		ready, pending := fillNode(ctx, node, workload.Spec{Replicas: int32(free + capacityExtra)}, free, "Too many pods")
		AddReportEntry("capacity", fmt.Sprintf("max-available-ip %d, maxPods %d, %d ready, %d pending", capacity, maxPods, ready, pending))
		inst, world := env.NodeInstance(ctx, node)
		pods := env.AllPods(ctx)
		used := len(HeldAddresses(pods)[node.Name])
		Expect(used).To(BeNumerically("<=", capacity), "pods on %s hold %d addresses", node.Name, used)
		Expect(IdleAddresses(mode.ENIMultiIP, world, inst.ID, HeldAddresses(pods)[node.Name])+used).To(
			BeNumerically("<=", capacity), "the world has more addresses on %s than it can have", inst.ID)
		if used == capacity {
			Eventually(func(ctx SpecContext) string {
				s, reason := env.NodeCondition(ctx, node.Name, k8s.ConditionSufficientIP)
				return string(s) + "/" + reason
			}).WithContext(ctx).WithTimeout(conditionAfter).WithPolling(2 * time.Second).Should(Equal("False/NoCapacity"))
		}
	}, SpecTimeout(readyWithin+conditionAfter+4*time.Minute))

	It("keeps pods beyond the free aliyun/eni Pending, never failing their network (API server, world)", Label(string(mode.ENIOnly)), func(ctx SpecContext) {
		env.RequireMode(ctx, mode.ENIOnly)
		env.RequireCloud()
		node := env.SchedulableNode(ctx)
		free := freeENIs(ctx, []corev1.Node{node})[node.Name]
		Expect(free).To(BeNumerically(">", 0), "node %s has no free %s", node.Name, workload.ENIResource)
		alloc := node.Status.Allocatable[workload.ENIResource]
		ready, pending := fillNode(ctx, node, workload.Spec{Replicas: int32(free + capacityExtra), ExclusiveENI: true},
			free, "Insufficient "+string(workload.ENIResource))
		AddReportEntry("capacity", fmt.Sprintf("%s allocatable %d, %d free, %d ready, %d pending", workload.ENIResource, alloc.Value(), free, ready, pending))
		inst, world := env.NodeInstance(ctx, node)
		secondary := 0
		for _, e := range world.ENIs {
			if e.InstanceID == inst.ID && e.Type == eniSecondary {
				secondary++
			}
		}
		Expect(secondary).To(BeNumerically("<=", alloc.Value()), "instance %s has %d secondary ENIs", inst.ID, secondary)
	}, SpecTimeout(readyWithin+4*time.Minute))
})

// podsOn counts the pods on node that are not finished, and how many of
// them use the host network.
func podsOn(ctx SpecContext, node string) (pods, hostNet int) {
	GinkgoHelper()
	for _, p := range env.AllPods(ctx) {
		if p.Spec.NodeName != node || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		pods++
		if p.Spec.HostNetwork {
			hostNet++
		}
	}
	return pods, hostNet
}

// fillNode deploys spec pinned to node in a new namespace and waits until
// want pods are Ready and the others Pending, unschedulable for
// schedReason; no pod may have a network failure event.
func fillNode(ctx SpecContext, node corev1.Node, spec workload.Spec, want int, schedReason string) (ready, pending int) {
	GinkgoHelper()
	spec.Namespace, spec.Node = uniqueNamespace("capacity"), node.Name
	w, err := workload.New(env.Kube, spec)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { Expect(w.Delete(ctx)).To(Succeed()) }, NodeTimeout(3*time.Minute))
	By(fmt.Sprintf("deploying %d pods on %s, room for %d", spec.Replicas, node.Name, want))
	Expect(w.Deploy(ctx)).To(Succeed())
	var c workload.PodCensus
	Eventually(func(ctx SpecContext) bool {
		pods, err := w.Pods(ctx)
		Expect(err).NotTo(HaveOccurred())
		c = workload.Census(pods)
		unsched := 0
		for _, why := range c.Waiting {
			if strings.Contains(why, schedReason) {
				unsched++
			}
		}
		return len(c.Ready) == want && unsched == int(spec.Replicas)-want
	}).WithContext(ctx).WithTimeout(readyWithin).WithPolling(time.Second).Should(BeTrue(), func() string { return c.String() })
	reasons := env.EventReasons(ctx, spec.Namespace)
	for _, r := range capacityFailures {
		Expect(reasons).NotTo(HaveKey(r), "events: %v", reasons)
	}
	return len(c.Ready), len(c.Waiting)
}
