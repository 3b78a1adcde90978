package scenarios

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/workload"
)

var _ = Describe("ENIOnly: exclusive ENIs through aliyun/eni", Ordered, ContinueOnFailure, Serial, Label(labelFeature, string(mode.ENIOnly)), func() {
	var (
		w       *workload.Workload
		pods    []corev1.Pod
		deleted bool
	)

	BeforeAll(func(ctx SpecContext) {
		env.RequireMode(ctx, mode.ENIOnly)
		env.RequireCloud()
		node := env.SchedulableNode(ctx)
		free := min(freeENIs(ctx, []corev1.Node{node})[node.Name], 2)
		if free == 0 {
			Skip("node " + node.Name + " has no free aliyun/eni")
		}
		w, pods, _ = deployWorkload(ctx, env, workload.Spec{Namespace: uniqueNamespace("enionly"), Replicas: int32(free),
			ExclusiveENI: true, Node: node.Name}, readyWithin)
	}, NodeTimeout(readyWithin+time.Minute))

	It("gives each pod a whole ENI of its node's instance, its primary address the pod's (API server, world)", func(ctx SpecContext) {
		world := env.World(ctx)
		Expect(CheckPodAddresses(mode.ENIOnly, world, env.Nodes(ctx), pods)).To(BeEmpty())
		seen := map[string]string{}
		for _, p := range pods {
			e := podENI(world, p)
			Expect(seen).NotTo(HaveKey(e.ID), "%s and %s share ENI %s", p.Name, seen[e.ID], e.ID)
			seen[e.ID] = p.Name
			Expect(e.IPv4).To(BeEmpty(), "ENI %s of %s has secondary addresses", e.ID, p.Name)
			q := p.Spec.Containers[0].Resources.Limits[workload.ENIResource]
			Expect(q.Value()).To(BeEquivalentTo(1))
		}
	}, SpecTimeout(time.Minute))

	It("moves the ENI into the pod as eth0 (pod and node namespaces)", func(ctx SpecContext) {
		world := env.World(ctx)
		for _, p := range pods {
			e := podENI(world, p)
			res, err := env.Exec.Exec(ctx, p.Namespace, p.Name, "", []string{"cat", "/sys/class/net/eth0/address"})
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.TrimSpace(res.Stdout)).To(Equal(strings.ToLower(e.MAC)), "eth0 of %s", p.Name)
			if env.Lab != nil {
				Expect(linkMACs(env.NodeNetNS(p.Spec.NodeName))).NotTo(ContainElement(strings.ToLower(e.MAC)),
					"ENI %s of %s is still in node %s's namespace", e.ID, p.Name, p.Spec.NodeName)
			}
		}
	}, SpecTimeout(time.Minute))

	itDeletesPodsAndAuditsClean(&w, &deleted)
})

var _ = Describe("VPC: a route entry per node podCIDR", Serial, Label(labelFeature, string(mode.VPC)), func() {
	It("has one entry per node, podCIDR to the node's instance, in the VPC's route table (API server, world)", func(ctx SpecContext) {
		env.RequireMode(ctx, mode.VPC)
		env.RequireCloud()
		world := env.World(ctx)
		var entries []admin.RouteInfo
		for _, t := range world.RouteTables {
			entries = append(entries, t.Entries...)
		}
		for _, n := range env.Nodes(ctx) {
			inst, ok := NodeInstance(n, world)
			Expect(ok).To(BeTrue(), "node %s has no instance", n.Name)
			cidrs := n.Spec.PodCIDRs
			Expect(cidrs).NotTo(BeEmpty(), "node %s has no podCIDR", n.Name)
			for _, c := range cidrs {
				dst := netip.MustParsePrefix(c)
				var to []string
				for _, e := range entries {
					if e.Destination == dst {
						to = append(to, fmt.Sprintf("%s %s", e.NextHopType, e.NextHopID))
					}
				}
				Expect(to).To(Equal([]string{"Instance " + inst}), "route entries for %s (node %s)", dst, n.Name)
			}
		}
	}, SpecTimeout(time.Minute))
})

// podENI is the ENI whose primary address is the pod's.
func podENI(world *admin.WorldView, p corev1.Pod) admin.ENIView {
	GinkgoHelper()
	a := netip.MustParseAddr(p.Status.PodIP)
	for _, e := range world.ENIs {
		if e.PrimaryIP == a {
			return e
		}
	}
	Fail(fmt.Sprintf("no ENI has %s's address %s as its primary", p.Name, a))
	return admin.ENIView{}
}
