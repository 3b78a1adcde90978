package scenarios

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"
	"github.com/containernetworking/plugins/pkg/ns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/fabric"
	"github.com/terway-sim/terway/lab/workload"
)

// eipSticky is the reservation of the StatefulSet spec: the EIP stays
// bound that long after its pod goes.
const eipSticky = 10 * time.Second

var _ = Describe("EIP per pod", Ordered, ContinueOnFailure, Serial, Label(labelSmoke, string(mode.ENIMultiIP)), func() {
	var (
		node     corev1.Node
		internet *internetSide
	)

	BeforeAll(func(ctx SpecContext) {
		env.RequireMode(ctx, mode.ENIMultiIP)
		env.RequireCloud()
		env.RequireLab()
		node = env.SchedulableNode(ctx)
		env.NodeConfig(node.Name).Apply(ctx, map[string]any{"enable_eip_pool": "true", "allow_eip_rob": "true",
			"sticky_time": eipSticky.String(), "gc_period": "5s"})
		internet = newInternetSide(env.Lab.NetNSDir, env.Lab.FabricName)
		DeferCleanup(internet.close)
	}, NodeTimeout(3*time.Minute))

	It("reaches a pod-with-eip pod from the internet at its EIP; the internet sees the EIP as its source; a pod without one has no path", func(ctx SpecContext) {
		spec := workload.Spec{Namespace: uniqueNamespace("eip"), Name: "public", Replicas: 1, Node: node.Name,
			Annotations: map[string]string{k8s.AnnotationPodWithEIP: "true"}}
		w, pods, _ := deployWorkload(ctx, env, spec, readyWithin)
		p := pods[0]
		e := boundEIP(ctx, p)
		By(fmt.Sprintf("%s (%s) has EIP %s (%s)", p.Name, p.Status.PodIP, e.Address, e.ID))
		Eventually(func() (string, error) { return internet.get(ctx, e.Address+":8080") }).
			WithTimeout(30 * time.Second).WithPolling(time.Second).Should(ContainSubstring(p.Name))
		out, err := podGet(ctx, p, "http://"+internet.addr+"/")
		Expect(err).NotTo(HaveOccurred(), "pod %s to the internet: %s", p.Name, out)
		Expect(internet.sawPeer(e.Address)).To(BeTrue(), "the internet saw %v, want the EIP %s", internet.peers(), e.Address)

		private := workload.Spec{Namespace: uniqueNamespace("eip"), Name: "private", Replicas: 1, Node: node.Name}
		_, ppods, _ := deployWorkload(ctx, env, private, readyWithin)
		_, err = podGet(ctx, ppods[0], "http://"+internet.addr+"/")
		Expect(err).To(HaveOccurred(), "a pod without an EIP reached the internet")

		By("deleting the pod releases its EIP (world)")
		Expect(w.Delete(ctx)).To(Succeed())
		Eventually(func(ctx SpecContext) *admin.EIPView { return eipByID(ctx, e.ID) }).WithContext(ctx).
			WithTimeout(time.Minute).WithPolling(time.Second).Should(BeNil())
	}, SpecTimeout(readyWithin*2+2*time.Minute))

	It("keeps a StatefulSet pod's EIP across re-creation", func(ctx SpecContext) {
		spec := workload.Spec{Namespace: uniqueNamespace("eip"), Name: "db", Replicas: 1, StatefulSet: true, Node: node.Name,
			Annotations: map[string]string{k8s.AnnotationPodWithEIP: "true"}}
		w, pods, _ := deployWorkload(ctx, env, spec, readyWithin)
		first := pods[0]
		e := boundEIP(ctx, first)
		Expect(env.Kube.CoreV1().Pods(first.Namespace).Delete(ctx, first.Name, metav1.DeleteOptions{})).To(Succeed())
		var next corev1.Pod
		Eventually(func(ctx SpecContext) bool {
			ps, err := w.Pods(ctx)
			Expect(err).NotTo(HaveOccurred())
			c := workload.Census(ps)
			if len(c.Ready) == 1 && c.Ready[0].UID != first.UID {
				next = c.Ready[0]
				return true
			}
			return false
		}).WithContext(ctx).WithTimeout(readyWithin).WithPolling(time.Second).Should(BeTrue())
		again := boundEIP(ctx, next)
		Expect(again.ID).To(Equal(e.ID), "the successor of %s got another EIP", first.Name)
		By("after the reservation ends, the EIP goes (world)")
		Expect(w.Delete(ctx)).To(Succeed())
		Eventually(func(ctx SpecContext) *admin.EIPView { return eipByID(ctx, e.ID) }).WithContext(ctx).
			WithTimeout(eipSticky + time.Minute).WithPolling(2 * time.Second).Should(BeNil())
	}, SpecTimeout(readyWithin*2+eipSticky+2*time.Minute))

	It("binds a given pod-eip-instanceid, keeps it when the pod goes, and allow_eip_rob moves it to another pod", func(ctx SpecContext) {
		api := operatorVPC()
		alloc, err := api.AllocateEipAddress(vpc.CreateAllocateEipAddressRequest())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			// Unbound by the pods' deletion first (their cleanup ran).
			Eventually(func() error {
				r := vpc.CreateReleaseEipAddressRequest()
				r.AllocationId = alloc.AllocationId
				_, err := api.ReleaseEipAddress(r)
				return err
			}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		}, NodeTimeout(2*time.Minute))
		given := map[string]string{k8s.AnnotationEIPInstanceID: alloc.AllocationId}
		a := workload.Spec{Namespace: uniqueNamespace("eip"), Name: "first", Replicas: 1, Node: node.Name, Annotations: given}
		wa, apods, _ := deployWorkload(ctx, env, a, readyWithin)
		Expect(boundEIP(ctx, apods[0]).ID).To(Equal(alloc.AllocationId))

		b := workload.Spec{Namespace: uniqueNamespace("eip"), Name: "second", Replicas: 1, Node: node.Name, Annotations: given}
		_, bpods, _ := deployWorkload(ctx, env, b, readyWithin)
		Expect(boundEIP(ctx, bpods[0]).ID).To(Equal(alloc.AllocationId), "allow_eip_rob did not move the EIP")

		By("the pods' deletion unbinds the user's EIP and keeps it")
		Expect(wa.Delete(ctx)).To(Succeed())
		Eventually(func(ctx SpecContext) *admin.EIPView { return eipByID(ctx, alloc.AllocationId) }).WithContext(ctx).
			WithTimeout(time.Minute).WithPolling(time.Second).Should(HaveField("PrivateIP", bpods[0].Status.PodIP),
			"deleting the pod it was taken from moved the EIP")
	}, SpecTimeout(readyWithin*2+2*time.Minute))

	It("leaves the audit clean", func(ctx SpecContext) {
		r := env.Audit(ctx, time.Minute)
		Expect(r.Findings).To(BeEmpty(), reportText(r))
	}, SpecTimeout(2*time.Minute))
})

// boundEIP waits for the pod's allocated-eipAddress annotation and the
// world's EIP of that address bound to the pod's address, and returns it.
func boundEIP(ctx context.Context, p corev1.Pod) admin.EIPView {
	GinkgoHelper()
	var e admin.EIPView
	Eventually(func(ctx SpecContext) error {
		cur, err := env.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		addr := cur.Annotations[k8s.AnnotationAllocatedEIP]
		for _, x := range env.World(ctx).EIPs {
			if x.Address == addr && x.PrivateIP == cur.Status.PodIP && x.Status == admin.EIPInUse {
				e = x
				return nil
			}
		}
		return fmt.Errorf("pod %s (%s) annotated with EIP %q, bound EIPs %v", p.Name, cur.Status.PodIP, addr, env.World(ctx).EIPs)
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return e
}

// podGet fetches url from inside the pod (busybox wget), giving up after
// 5 seconds.
func podGet(ctx context.Context, p corev1.Pod, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := env.Exec.Exec(ctx, p.Namespace, p.Name, "", []string{"wget", "-qO-", url})
	return res.Stdout + res.Stderr, err
}

// eipByID is the world's EIP, or nil once it is released.
func eipByID(ctx context.Context, id string) *admin.EIPView {
	for _, e := range env.World(ctx).EIPs {
		if e.ID == id {
			return &e
		}
	}
	return nil
}

// operatorVPC is the real SDK's VPC client with the lab's operator
// AccessKey: a user's calls, out of band of the daemons.
func operatorVPC() *vpc.Client {
	GinkgoHelper()
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	st := env.Lab
	c, err := vpc.NewClientWithOptions(st.Region, cfg, credentials.NewAccessKeyCredential(st.OperatorAccessKeyID, st.OperatorAccessKeySecret))
	Expect(err).NotTo(HaveOccurred())
	u, err := url.Parse(st.FakecloudURL)
	Expect(err).NotTo(HaveOccurred())
	c.Domain = u.Host
	return c
}

// internetSide is an HTTP server in the lab's internet namespace that
// records its peers, and a client dialling from there.
type internetSide struct {
	path, addr string
	srv        *http.Server
	mu         sync.Mutex
	seen       []string
}

func newInternetSide(dir, fabricName string) *internetSide {
	GinkgoHelper()
	s := &internetSide{path: filepath.Join(dir, fabricName+".internet"), addr: netip.AddrPortFrom(fabric.InternetAddr, 8081).String()}
	var ln net.Listener
	Expect(s.do(func() error {
		var err error
		ln, err = net.Listen("tcp", s.addr)
		return err
	})).To(Succeed())
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		s.mu.Lock()
		s.seen = append(s.seen, host)
		s.mu.Unlock()
		_, _ = io.WriteString(w, "hello from the internet\n")
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s
}

// do runs fn on a thread in the internet namespace.
func (s *internetSide) do(fn func() error) error {
	n, err := ns.GetNS(s.path)
	if err != nil {
		return err
	}
	defer n.Close()
	return n.Do(func(ns.NetNS) error { return fn() })
}

// get fetches http://target/ from the internet.
func (s *internetSide) get(ctx context.Context, target string) (string, error) {
	var conn net.Conn
	if err := s.do(func() error {
		var err error
		conn, err = (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", target)
		return err
	}); err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", target); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}

func (s *internetSide) peers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func (s *internetSide) sawPeer(a string) bool {
	for _, p := range s.peers() {
		if p == a {
			return true
		}
	}
	return false
}

func (s *internetSide) close(ctx context.Context) { _ = s.srv.Shutdown(ctx) }
