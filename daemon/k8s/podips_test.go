package k8s

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/internal/testwait"
)

func TestPodIPsValue(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	for _, tc := range []struct {
		in   []netip.Addr
		want string
	}{
		{[]netip.Addr{a("192.168.0.7")}, "192.168.0.7"},
		{[]netip.Addr{a("fd00::7"), a("192.168.0.7")}, "192.168.0.7,fd00::7"},
		{[]netip.Addr{a("192.168.0.7"), {}}, "192.168.0.7"},
		{[]netip.Addr{a("::ffff:192.168.0.7")}, "192.168.0.7"},
		{nil, ""},
	} {
		if got := PodIPsValue(tc.in...); got != tc.want {
			t.Errorf("PodIPsValue(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestPatchPodIPs: the annotation is written with a merge patch that
// touches only metadata.annotations; a pod that already has the value is
// not patched again; a missing pod is NotFound; a pod of the same name
// with another UID is ErrPodReplaced. The value reads back as
// Pod.AnnotatedIPs, never as Pod.IPs (which is what the kubelet reports).
func TestPatchPodIPs(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1",
		Annotations: map[string]string{"other": "kept"}}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	cs := fake.NewClientset(pod)
	c := New(clientset.Wrap(cs), "node-1", nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	patches := func() (n int, last k8stesting.PatchAction) {
		for _, a := range cs.Actions() {
			if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "pods" {
				n, last = n+1, p
			}
		}
		return n, last
	}

	patched, err := c.PatchPodIPs(ctx, "ns", "web", "u1", "192.168.0.7,fd00::7")
	if err != nil || !patched {
		t.Fatalf("PatchPodIPs = %v, %v", patched, err)
	}
	n, last := patches()
	if n != 1 || last.GetPatchType() != types.MergePatchType ||
		string(last.GetPatch()) != `{"metadata":{"annotations":{"k8s.aliyun.com/pod-ips":"192.168.0.7,fd00::7"}}}` {
		t.Fatalf("%d patches, last %s %s", n, last.GetPatchType(), last.GetPatch())
	}
	got, err := cs.CoreV1().Pods("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || got.Annotations[AnnotationPodIPs] != "192.168.0.7,fd00::7" || got.Annotations["other"] != "kept" {
		t.Fatalf("pod annotations %v (%v)", got.Annotations, err)
	}
	testwait.For(t, 10*time.Second, "the informer to show the annotation as Pod.AnnotatedIPs (and only there)", func() error {
		p, err := c.Pod(ctx, "ns", "web")
		if err == nil && len(p.AnnotatedIPs) == 2 && p.AnnotatedIPs[0] == netip.MustParseAddr("192.168.0.7") &&
			p.AnnotatedIPs[1] == netip.MustParseAddr("fd00::7") && len(p.IPs) == 0 {
			return nil
		}
		return fmt.Errorf("pod %+v, %v", p, err)
	})
	if patched, err := c.PatchPodIPs(ctx, "ns", "web", "u1", "192.168.0.7,fd00::7"); err != nil || patched {
		t.Errorf("same value again: patched %v, %v; want skipped", patched, err)
	}
	if n, _ := patches(); n != 1 {
		t.Errorf("%d patches after the same value again, want 1", n)
	}
	if _, err := c.PatchPodIPs(ctx, "ns", "web", "u0", "192.168.0.8"); !errors.Is(err, ErrPodReplaced) {
		t.Errorf("another UID: %v, want ErrPodReplaced", err)
	}
	if _, err := c.PatchPodIPs(ctx, "ns", "gone", "", "192.168.0.9"); !IsNotFound(err) {
		t.Errorf("missing pod: %v, want NotFound", err)
	}
}
