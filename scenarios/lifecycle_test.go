package scenarios

import (
	"context"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/workload"
)

// lifecyclePods run on the node that joins.
const lifecyclePods = 4

var _ = Describe("Node lifecycle", Ordered, ContinueOnFailure, Serial, Label(labelFeature, string(mode.ENIMultiIP)), func() {
	var (
		ctl     *cluster.Control
		joined  cluster.NodeState
		vswitch admin.VSwitchView // the new node's, before it joined
		w       *workload.Workload
	)

	BeforeAll(func(ctx SpecContext) {
		env.RequireMode(ctx, mode.ENIMultiIP)
		env.RequireCloud()
		env.RequireLab()
		var err error
		ctl, err = cluster.DialControl(env.Lab.Dir)
		Expect(err).NotTo(HaveOccurred())
		// After the last spec (one registered in a spec would run when
		// that spec ends): a failed spec must not leave the node behind
		// for the rest of the suite.
		DeferCleanup(func(ctx SpecContext) {
			if w != nil {
				Expect(w.Delete(ctx)).To(Succeed())
			}
			if joined.Name == "" {
				return
			}
			if _, err := env.Kube.CoreV1().Nodes().Get(ctx, joined.Name, metav1.GetOptions{}); err == nil {
				Expect(ctl.ReleaseNode(ctx, joined.Name)).To(Succeed())
			}
		}, NodeTimeout(3*time.Minute))
	})

	It("joins a new instance as a node that serves pods (API server, world, node namespaces)", func(ctx SpecContext) {
		before := env.World(ctx)
		var err error
		By("adding a node: an instance started in fakecloud, its kubelet and terway")
		joined, err = ctl.AddNode(ctx)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("joined", joined.Name+" on "+joined.InstanceID)
		inst, ok := instanceOf(env.World(ctx), joined.InstanceID)
		Expect(ok).To(BeTrue(), "instance %s is not in the world", joined.InstanceID)
		Expect(inst.Status).To(Equal("Running"))
		Expect(inst.ENIs).NotTo(BeEmpty())
		for _, s := range before.VSwitches {
			if s.ID == inst.ENIs[0].VSwitchID {
				vswitch = s
			}
		}
		Expect(vswitch.ID).NotTo(BeEmpty(), "the new node's vSwitch %s is not in the world", inst.ENIs[0].VSwitchID)

		spec := workload.Spec{Namespace: uniqueNamespace("join"), Replicas: lifecyclePods, Node: joined.Name}
		// Not deployWorkload: its cleanup would delete the pods when this
		// spec ends, and the drain spec needs them (BeforeAll's cleanup
		// deletes them).
		w, err = workload.New(env.Kube, spec)
		Expect(err).NotTo(HaveOccurred())
		Expect(w.Deploy(ctx)).To(Succeed())
		waitCtx, cancel := context.WithTimeout(ctx, readyWithin)
		defer cancel()
		pods, err := w.WaitReady(waitCtx, lifecyclePods)
		Expect(err).NotTo(HaveOccurred())
		Expect(CheckPodAddresses(mode.ENIMultiIP, env.World(ctx), env.Nodes(ctx), pods)).To(BeEmpty())
		By("pods on the new node reach each other and the Service")
		svc, err := w.ServiceObject(ctx)
		Expect(err).NotTo(HaveOccurred())
		reportChecks(workload.Prober{Runner: env.Exec}.CheckAll(ctx, pods, svc))
		By("the audit, with the new node in the lab's state, is clean")
		st := env.LabState()
		Expect(slices.ContainsFunc(st.Nodes, func(n cluster.NodeState) bool { return n.Name == joined.Name })).To(BeTrue(),
			"the lab's state does not list %s", joined.Name)
		r, err := audit.RunUntilClean(ctx, st.AuditInput(env.Kube), auditWithin)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Clean()).To(BeTrue(), "audit with %s:\n%s", joined.Name, reportText(r))
		Expect(slices.ContainsFunc(r.Nodes, func(n audit.NodeReport) bool { return n.Name == joined.Name })).To(BeTrue(),
			"the audit did not look at %s", joined.Name)
	}, SpecTimeout(readyWithin+5*time.Minute))

	It("drains and removes the node, leaving nothing of it in the cloud (API server, world, audit)", func(ctx SpecContext) {
		Expect(joined.Name).NotTo(BeEmpty(), "no node joined")
		By("removing " + joined.Name + ": cordon, drain, instance released, Node deleted")
		Expect(ctl.RemoveNode(ctx, joined.Name)).To(Succeed())
		_, err := env.Kube.CoreV1().Nodes().Get(ctx, joined.Name, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Node %s after removal: %v", joined.Name, err)

		// Pods the drain evicted may still be terminating when the node
		// goes; the pod GC deletes those of a Node that no longer exists.
		Eventually(func(ctx SpecContext) []string {
			pods, err := w.Pods(ctx)
			Expect(err).NotTo(HaveOccurred())
			var bound []string
			for _, p := range pods {
				if p.Spec.NodeName == joined.Name {
					bound = append(bound, p.Name)
				}
			}
			return bound
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(BeEmpty(),
			"pods still bound to the removed node")
		world := env.World(ctx)
		if inst, ok := instanceOf(world, joined.InstanceID); ok {
			Expect(inst.Status).NotTo(Equal("Running"), "instance %s after release", joined.InstanceID)
		}
		for _, e := range world.ENIs {
			Expect(e.InstanceID).NotTo(Equal(joined.InstanceID), "ENI %s still attached to the released instance", e.ID)
			Expect(e.Tags[cloud.TagInstanceID]).NotTo(Equal(joined.InstanceID),
				"ENI %s (%s) of the released instance is left in the cloud", e.ID, e.Status)
		}
		if !slices.ContainsFunc(env.Nodes(ctx), func(n corev1.Node) bool { return onVSwitch(ctx, n, vswitch.ID) }) {
			// No other node uses the vSwitch: every address the node
			// took is free again.
			Expect(vswitchView(ctx, vswitch.ID).Available).To(Equal(vswitch.Available),
				"vSwitch %s has %d free addresses, %d before %s joined", vswitch.ID,
				vswitchView(ctx, vswitch.ID).Available, vswitch.Available, joined.Name)
		}
		r := env.Audit(ctx, auditWithin)
		Expect(r.Clean()).To(BeTrue(), "audit after the removal:\n%s", reportText(r))
		Expect(w.Delete(ctx)).To(Succeed())
	}, SpecTimeout(10*time.Minute))
})

// instanceOf finds an instance in the world.
func instanceOf(w *admin.WorldView, id string) (admin.InstanceInfo, bool) {
	i := slices.IndexFunc(w.Instances, func(in admin.InstanceInfo) bool { return in.ID == id })
	if i < 0 {
		return admin.InstanceInfo{}, false
	}
	return w.Instances[i], true
}

// onVSwitch reports whether node's instance has its primary ENI in id.
func onVSwitch(ctx context.Context, node corev1.Node, id string) bool {
	inst, _ := env.NodeInstance(ctx, node)
	return len(inst.ENIs) > 0 && inst.ENIs[0].VSwitchID == id
}
