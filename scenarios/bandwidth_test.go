package scenarios

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/workload"
)

// The bandwidth scenario: a limit low enough for the machine to hold it
// easily, a file that takes seconds at that rate, and the margins: the
// limited transfer may exceed the limit by 20 % (the token bucket's burst
// and the clock's steps), the unlimited one must be three times faster.
const (
	bandwidthLimit  = "10M"
	bandwidthFile   = "big"
	bandwidthSize   = 4 << 20
	limitedMargin   = 1.2
	unlimitedFactor = 3
)

var _ = Describe("Bandwidth limits from pod annotations", Ordered, ContinueOnFailure, Serial,
	Label(labelFeature, string(mode.ENIMultiIP), string(mode.VPC)), func() {
		var (
			rate             uint64 // bytes per second
			limited, servers []corev1.Pod
			prober           workload.Prober
		)

		BeforeAll(func(ctx SpecContext) {
			tw := env.Terway(ctx)
			if tw.Mode == mode.ENIOnly {
				Skip("the scenario uses veth datapaths (ENIMultiIP, VPC); ENIOnly pods take whole ENIs")
			}
			var err error
			rate, err = k8s.ParseBandwidth(bandwidthLimit)
			Expect(err).NotTo(HaveOccurred())
			node := env.SchedulableNode(ctx)
			ann := map[string]string{k8s.AnnotationIngress: bandwidthLimit, k8s.AnnotationEgress: bandwidthLimit}
			// Everything on one node: the limit, not the fabric, is measured.
			_, limited, _ = deployWorkload(ctx, env, workload.Spec{Namespace: uniqueNamespace("bw-limited"), Name: "limited",
				Replicas: 1, Node: node.Name, Annotations: ann}, readyWithin)
			_, servers, _ = deployWorkload(ctx, env, workload.Spec{Namespace: uniqueNamespace("bw-free"), Name: "free",
				Replicas: 2, Node: node.Name}, readyWithin)
			prober = workload.Prober{Runner: env.Exec}
			for _, p := range []corev1.Pod{limited[0], servers[0]} {
				Expect(prober.ServeFile(ctx, p, bandwidthFile, bandwidthSize)).To(Succeed())
			}
		}, NodeTimeout(readyWithin+2*time.Minute))

		It("puts a tbf qdisc at the annotated rate on the pod's host end (ingress) and its eth0 (egress) (node and pod namespaces)", func(ctx SpecContext) {
			env.RequireLab()
			p := limited[0]
			host := tbfRates(env.NodeNetNS(p.Spec.NodeName), hostEndOf(env.NodeNetNS(p.Spec.NodeName), p))
			Expect(host).To(ConsistOf(rate), "tbf on the host end of %s in node %s", p.Name, p.Spec.NodeName)
			Expect(tbfRates(env.PodNetNS(ctx, p), "eth0")).To(ConsistOf(rate), "tbf on eth0 in %s", p.Name)
			Expect(tbfRates(env.PodNetNS(ctx, servers[0]), "eth0")).To(BeEmpty(), "an unlimited pod has a tbf")
		}, SpecTimeout(time.Minute))

		It("holds a transfer from the limited pod to its egress limit, and not one from an unlimited pod (API server: exec)", func(ctx SpecContext) {
			client := servers[1]
			limitBits := float64(rate) * 8
			slow := download(ctx, prober, client, limited[0])
			fast := download(ctx, prober, client, servers[0])
			AddReportEntry("transfers", fmt.Sprintf("limit %.1f Mbit/s; limited pod: %s; unlimited pod: %s", limitBits/1e6, slow, fast))
			Expect(slow.BitsPerSecond()).To(BeNumerically("<=", limitedMargin*limitBits), "limited: %s", slow)
			Expect(fast.BitsPerSecond()).To(BeNumerically(">", unlimitedFactor*limitBits), "unlimited: %s", fast)
		}, SpecTimeout(3*time.Minute))
	})

// download fetches the scenario's file from to in from, whole.
func download(ctx context.Context, p workload.Prober, from, to corev1.Pod) workload.Transfer {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t, err := p.Download(ctx, from, to, bandwidthFile)
	Expect(err).NotTo(HaveOccurred())
	Expect(t.Bytes).To(BeEquivalentTo(bandwidthSize), "%s -> %s: short transfer", from.Name, to.Name)
	return t
}
