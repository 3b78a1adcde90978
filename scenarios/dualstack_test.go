package scenarios

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/lab/workload"
)

var _ = Describe("Dual stack", Ordered, ContinueOnFailure, Serial, Label(labelFeature, string(mode.ENIMultiIP), labelDualStack), func() {
	var pods []corev1.Pod

	BeforeAll(func(ctx SpecContext) {
		tw := env.RequireMode(ctx, mode.ENIMultiIP)
		if tw.IPStack != config.IPStackDual {
			Skip("eni_conf ip_stack is " + tw.IPStack + ", not dual (terway-lab up --ip-stack dual)")
		}
		env.RequireCloud()
		nodes := env.SchedulableNodes(ctx)
		_, pods, _ = deployWorkload(ctx, env, workload.Spec{Namespace: uniqueNamespace("dual"), Replicas: int32(2 * len(nodes)),
			Spread: len(nodes) > 1}, readyWithin)
	}, NodeTimeout(readyWithin+time.Minute))

	It("gives every pod an IPv4 and an IPv6 address of an ENI of its node's instance (API server, world)", func(ctx SpecContext) {
		for _, p := range pods {
			var v4, v6 int
			for _, ip := range p.Status.PodIPs {
				if netip.MustParseAddr(ip.IP).Is4() {
					v4++
				} else {
					v6++
				}
			}
			Expect([]int{v4, v6}).To(Equal([]int{1, 1}), "%s podIPs %v", p.Name, p.Status.PodIPs)
		}
		Expect(CheckPodAddresses(mode.ENIMultiIP, env.World(ctx), env.Nodes(ctx), pods)).To(BeEmpty())
	}, SpecTimeout(time.Minute))

	It("connects pod to pod over IPv6, on a node and across nodes (API server: exec)", func(ctx SpecContext) {
		for _, pair := range append(workload.SameNodePairs(pods), workload.CrossNodePairs(pods)...) {
			to := podIPv6(pair.To)
			url := "http://" + net.JoinHostPort(to, strconv.Itoa(workload.DefaultPort)) + "/"
			getCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, err := env.Exec.Exec(getCtx, pair.From.Namespace, pair.From.Name, "", []string{"wget", "-qO-", url})
			cancel()
			Expect(err).NotTo(HaveOccurred(), "%s -> %s: %s", pair.From.Name, url, res.Stderr)
			Expect(strings.TrimSpace(res.Stdout)).To(Equal(pair.To.Name))
		}
	}, SpecTimeout(3*time.Minute))
})

// podIPv6 is the pod's IPv6 address.
func podIPv6(p corev1.Pod) string {
	GinkgoHelper()
	for _, ip := range p.Status.PodIPs {
		if netip.MustParseAddr(ip.IP).Is6() {
			return ip.IP
		}
	}
	Fail(p.Name + " has no IPv6 address")
	return ""
}
