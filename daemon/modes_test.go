package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

func TestENIOnlyMode(t *testing.T) {
	l := newLab(t)
	l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"max_pool_size":0`, 1)
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		l.pod("eo", n, nil)
	}
	d, c, _ := l.daemon(func(o *Options) { o.Mode = mode.ENIOnly })
	macs := map[string]bool{}
	for _, n := range []string{"a", "b", "c"} {
		r := allocOK(t, c, "eo", n, "c-"+n)
		nc := r.NetConfs[0]
		if r.IPType != rpc.IPType_TypeVPCENI || nc.ENIInfo.MAC == "" || macs[nc.ENIInfo.MAC] ||
			nc.BasicInfo.GatewayIP.IPv4 != "192.168.0.253" {
			t.Fatalf("pod %s: %+v", n, r)
		}
		macs[nc.ENIInfo.MAC] = true
	}
	// ecs.g7.xlarge: 3 secondary ENIs, so a 4th pod cannot have one.
	if _, err := alloc(t, c, "eo", "d", "c-d"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("4th exclusive ENI: %v", err)
	}
	if _, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: "eo", K8SPodName: "a", K8SPodInfraContainerId: "c-a"}); err != nil {
		t.Fatal(err)
	}
	// With max_pool_size 0 the idle ENI is detached and deleted.
	testwait.For(t, 20*time.Second, "the idle ENI deleted", func() error {
		n := 0
		for _, e := range l.cloud.ENIs() {
			if e.Type == fakecloud.ENITypeSecondary {
				n++
			}
		}
		if n != 2 {
			return fmt.Errorf("%d secondary ENIs after releasing one of 3", n)
		}
		return nil
	})
	if _, err := alloc(t, c, "eo", "d", "c-d"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if st := d.pool.Stats(); st.InUse != 3 {
		t.Fatalf("stats %+v", st)
	}
	// A pod arriving while the last free slot's ENI is still being
	// detached waits for it instead of failing.
	if _, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: "eo", K8SPodName: "b", K8SPodInfraContainerId: "c-b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := alloc(t, c, "eo", "e", "c-e"); err != nil {
		t.Fatalf("right after a release: %v", err)
	}
}

func TestVPCMode(t *testing.T) {
	l := newLab(t)
	n, _ := l.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	n.Spec.PodCIDR = "172.20.1.0/24"
	if _, err := l.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.pod("v", "plain", nil)
	l.pod("v", "plain2", nil)
	l.pod("v", "exclusive", func(p *corev1.Pod) { p.Annotations = map[string]string{"k8s.aliyun.com/ENI": "true"} })
	_, c, _ := l.daemon(func(o *Options) { o.Mode = mode.VPC })
	r := allocOK(t, c, "v", "plain", "c1")
	ip := netip.MustParseAddr(podIP(r))
	if r.IPType != rpc.IPType_TypeVPCIP || !netip.MustParsePrefix("172.20.1.0/24").Contains(ip) || ip == netip.MustParseAddr("172.20.1.0") ||
		r.NetConfs[0].BasicInfo.PodCIDR.IPv4 != "172.20.1.0/24" || r.NetConfs[0].ENIInfo != nil {
		t.Fatalf("VPC pod: %+v", r)
	}
	r2, err := alloc(t, c, "v", "plain2", "c2")
	if err != nil || podIP(r2) == podIP(r) {
		t.Fatalf("second VPC pod: %v %v", r2, err)
	}
	ex := allocOK(t, c, "v", "exclusive", "c3")
	if ex.IPType != rpc.IPType_TypeVPCENI || ex.NetConfs[0].ENIInfo.MAC == "" ||
		!netip.MustParsePrefix("192.168.0.0/24").Contains(netip.MustParseAddr(podIP(ex))) {
		t.Fatalf("exclusive pod in VPC mode: %+v", ex)
	}
	// Without a podCIDR VPC mode refuses to start with a clear message.
	l2 := newLab(t)
	cfgErr := func() error {
		cfg := l2.daemonConfig()
		_, err := New(ctxT(t), Options{Mode: mode.VPC, Config: cfg, NodeName: nodeName, Kube: clientset.Wrap(l2.kube), StoreNoSync: true})
		return err
	}()
	if cfgErr == nil || !strings.Contains(cfgErr.Error(), "podCIDR") {
		t.Fatalf("VPC mode without podCIDR: %v", cfgErr)
	}
}

func TestDualStack(t *testing.T) {
	l := newLab(t)
	l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"ip_stack":"dual","max_pool_size":5`, 1)
	l.pod("ds", "a", nil)
	_, c, _ := l.daemon(nil)
	r := allocOK(t, c, "ds", "a", "c1")
	b := r.NetConfs[0].BasicInfo
	v6, err := netip.ParseAddr(b.PodIP.IPv6)
	if err != nil || !r.IPv6 || !netip.MustParsePrefix(b.PodCIDR.IPv6).Contains(v6) || b.GatewayIP.IPv6 == "" {
		t.Fatalf("dual stack reply: %+v", b)
	}
}
