package scenarios

import (
	"fmt"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/workload"
)

// dynVSwitchPods run on the node after its dynamic config names another
// vSwitch: fewer than one ENI holds, so all land on the one new ENI.
const dynVSwitchPods = 4

var _ = Describe("vSwitch under a node's dynamic config", Ordered, ContinueOnFailure, Serial, Label(labelFeature, string(mode.ENIMultiIP)), func() {
	var (
		node       corev1.Node
		inst       admin.InstanceInfo
		conf       *NodeConfig
		own, spare string
		spareCIDR  netip.Prefix
	)

	BeforeAll(func(ctx SpecContext) {
		env.RequireMode(ctx, mode.ENIMultiIP)
		env.RequireCloud()
		node = env.SchedulableNode(ctx)
		var world *admin.WorldView
		inst, world = env.NodeInstance(ctx, node)
		own = inst.ENIs[0].VSwitchID
		for _, v := range world.VSwitches {
			if v.ZoneID == inst.ZoneID && v.ID != own && v.VPCID == inst.VPCID {
				spare, spareCIDR = v.ID, v.CIDR
				break
			}
		}
		Expect(spare).NotTo(BeEmpty(), "zone %s has no vSwitch but %s (%s's): the lab's default world has a pod vSwitch in each zone",
			inst.ZoneID, own, node.Name)
		conf = env.NodeConfig(node.Name)
	})

	// secondaryENIs are the node's secondary ENIs in the world, by vSwitch.
	secondaryENIs := func(ctx SpecContext) map[string][]string {
		out := map[string][]string{}
		for _, e := range env.World(ctx).ENIs {
			if e.InstanceID == inst.ID && e.Type == eniSecondary {
				out[e.VSwitchID] = append(out[e.VSwitchID], e.ID)
			}
		}
		return out
	}

	It("moves the node's new ENIs to the vSwitch its dynamic config names (world, API server)", func(ctx SpecContext) {
		Expect(HeldAddresses(env.AllPods(ctx))[node.Name]).To(BeEmpty(), "pods on %s hold addresses of its ENIs, which would keep them", node.Name)
		By("on the base config, pods get addresses of an ENI in the node's own vSwitch")
		first := workload.Spec{Namespace: uniqueNamespace("dynvsw"), Replicas: 2, Node: node.Name}
		w0, _, _ := deployWorkload(ctx, env, first, readyWithin)
		Expect(secondaryENIs(ctx)).To(HaveKey(own), "no ENI of %s's own vSwitch %s under pods", node.Name, own)
		Expect(w0.Scale(ctx, 0)).To(Succeed())
		Expect(w0.WaitGone(ctx)).To(Succeed())

		conf.Apply(ctx, map[string]any{"vswitches": map[string][]string{inst.ZoneID: {spare}},
			"min_pool_size": 0, "max_pool_size": 0})
		By("the empty pool lets every ENI of the old vSwitch go")
		Eventually(secondaryENIs).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(BeEmpty())

		spec := workload.Spec{Namespace: uniqueNamespace("dynvsw"), Replicas: dynVSwitchPods, Node: node.Name}
		w, pods, _ := deployWorkload(ctx, env, spec, readyWithin)
		Expect(CheckPodAddresses(mode.ENIMultiIP, env.World(ctx), env.Nodes(ctx), pods)).To(BeEmpty())
		for _, p := range pods {
			for _, s := range podIPs(p) {
				a, err := netip.ParseAddr(s)
				Expect(err).NotTo(HaveOccurred())
				if a.Is4() {
					Expect(spareCIDR.Contains(a)).To(BeTrue(), "%s/%s has %s, outside %s %s", p.Namespace, p.Name, a, spare, spareCIDR)
				}
			}
		}
		enis := secondaryENIs(ctx)
		AddReportEntry("secondary ENIs of "+node.Name+" by vSwitch", fmt.Sprint(enis))
		Expect(enis).To(HaveLen(1), "ENIs outside %s: %v", spare, enis)
		Expect(enis).To(HaveKey(spare))

		By("the pods on the new vSwitch reach each other and the Service")
		svc, err := w.ServiceObject(ctx)
		Expect(err).NotTo(HaveOccurred())
		reportChecks(workload.Prober{Runner: env.Exec}.CheckAll(ctx, pods, svc))
	}, SpecTimeout(2*readyWithin+5*time.Minute))

	It("leaves the audit clean (tier 3)", func(ctx SpecContext) {
		env.RequireLab()
		r := env.Audit(ctx, auditWithin)
		Expect(r.Clean()).To(BeTrue(), reportText(r))
	}, SpecTimeout(auditWithin+time.Minute))
})
