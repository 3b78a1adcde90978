package scenarios

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/workload"
)

// anyModePodsPerNode is how many pods the mode-agnostic scenario puts on
// each node (fewer where free aliyun/eni is short, in ENIOnly).
const anyModePodsPerNode = 2

var _ = Describe("Pod networking in any mode", Ordered, ContinueOnFailure, Serial, Label(labelSmoke, labelAnyMode), func() {
	var (
		tw      workload.Terway
		w       *workload.Workload
		pods    []corev1.Pod
		svc     *corev1.Service
		deleted bool
	)

	BeforeAll(func(ctx SpecContext) {
		tw = env.Terway(ctx)
		nodes := env.SchedulableNodes(ctx)
		if len(nodes) == 0 {
			Skip("no schedulable node")
		}
		replicas := anyModePodsPerNode * len(nodes)
		exclusive := tw.Mode == mode.ENIOnly
		if exclusive {
			// Each pod takes a whole ENI, and a node has only a few.
			replicas = 0
			for _, free := range freeENIs(ctx, nodes) {
				replicas += min(anyModePodsPerNode, free)
			}
			if replicas == 0 {
				Skip("ENIOnly: no node has a free aliyun/eni")
			}
		}
		spec := workload.Spec{Namespace: uniqueNamespace("anymode"), Replicas: int32(replicas),
			ExclusiveENI: exclusive, Spread: len(nodes) > 1}
		By(fmt.Sprintf("deploying %d pods (mode %s, exclusive ENI %v) in %s", replicas, tw.Mode, exclusive, spec.Namespace))
		var rec *workload.LatencyRecorder
		w, pods, rec = deployWorkload(ctx, env, spec, readyWithin)
		Expect(rec.Wait(ctx, replicas)).To(Succeed())
		AddReportEntry("ready latency (creationTimestamp -> Ready seen)", workload.Summarize(rec.Latencies()).String())
		var err error
		svc, err = w.ServiceObject(ctx)
		Expect(err).NotTo(HaveOccurred())
	}, NodeTimeout(readyWithin+time.Minute))

	It("gives every pod an address where its mode puts it (VPC: tier 1; ENI modes: tier 2)", func(ctx SpecContext) {
		var problems []string
		if tw.Mode == mode.VPC {
			problems = CheckPodAddresses(tw.Mode, nil, env.Nodes(ctx), pods)
		} else {
			env.RequireCloud()
			problems = CheckPodAddresses(tw.Mode, env.World(ctx), env.Nodes(ctx), pods)
		}
		Expect(problems).To(BeEmpty(), strings.Join(problems, "\n"))
	}, SpecTimeout(time.Minute))

	It("connects pods on the same node, across nodes and to the Service", func(ctx SpecContext) {
		reportChecks(workload.Prober{Runner: env.Exec}.CheckAll(ctx, pods, svc))
	}, SpecTimeout(3*time.Minute))

	itDeletesPodsAndAuditsClean(&w, &deleted)
})

// freeENIs is, per node, its allocatable aliyun/eni less what pods on it
// (not finished) request.
func freeENIs(ctx context.Context, nodes []corev1.Node) map[string]int {
	GinkgoHelper()
	free := map[string]int{}
	for _, n := range nodes {
		q := n.Status.Allocatable[workload.ENIResource]
		free[n.Name] = int(q.Value())
	}
	for _, p := range env.AllPods(ctx) {
		if _, ok := free[p.Spec.NodeName]; !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			q := c.Resources.Requests[workload.ENIResource]
			free[p.Spec.NodeName] -= int(q.Value())
		}
	}
	return free
}
