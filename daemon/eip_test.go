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

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// eipLab is a lab whose daemon gives EIPs (enable_eip_pool), with robbing
// as asked.
func eipLab(t *testing.T, rob bool) (*lab, *Daemon, rpc.TerwayBackendClient) {
	t.Helper()
	l := newLab(t)
	extra := `"enable_eip_pool":"true"`
	if rob {
		extra += `,"allow_eip_rob":"true"`
	}
	l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"max_pool_size":5,"sticky_time":"10m",`+extra, 1)
	d, c, _ := l.daemon(nil)
	return l, d, c
}

func withAnnotations(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// eipOfPod is the EIP fakecloud has bound to addr, if any.
func eipOfPod(l *lab, addr string) (fakecloud.EIPView, bool) {
	for _, e := range l.cloud.World().EIPs {
		if e.PrivateIP == addr {
			return e, true
		}
	}
	return fakecloud.EIPView{}, false
}

func release(t *testing.T, c rpc.TerwayBackendClient, ns, name, container string) {
	t.Helper()
	if _, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: ns, K8SPodName: name, K8SPodInfraContainerId: container}); err != nil {
		t.Fatalf("release %s/%s: %v", ns, name, err)
	}
}

// A pod asking for an EIP gets one bound to its address (InUse, with the
// bandwidth asked, in the bandwidth package asked), its annotation says
// which, and its deletion releases it; a pod that asks for none gets none.
func TestEIPAllocatedAndReleased(t *testing.T) {
	l, d, c := eipLab(t, false)
	l.pod("default", "public", withAnnotations(k8s.AnnotationPodWithEIP, "true", k8s.AnnotationEIPBandwidth, "12",
		k8s.AnnotationEIPBandwidthPackage, fakecloud.DefaultBandwidthPackageID))
	l.pod("default", "private", nil)
	r := allocOK(t, c, "default", "public", "c1")
	e, ok := eipOfPod(l, podIP(r))
	if !ok || e.Status != "InUse" || e.BandwidthPackageID != fakecloud.DefaultBandwidthPackageID {
		t.Fatalf("EIP of %s: %+v (found %v)", podIP(r), e, ok)
	}
	p, err := l.kube.CoreV1().Pods("default").Get(context.Background(), "public", metav1.GetOptions{})
	if err != nil || p.Annotations[k8s.AnnotationAllocatedEIP] != e.Address {
		t.Fatalf("pod annotation %q, want %s (%v)", p.Annotations[k8s.AnnotationAllocatedEIP], e.Address, err)
	}
	maps, err := d.Mapping(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range maps {
		if m.PodName == "default/public" && m.ResourceName == e.ID && strings.Contains(m.FactoryResourceName, e.Address) {
			found = true
		}
	}
	if !found {
		t.Errorf("the mapping (terway-cli mapping) shows no EIP %s for default/public: %v", e.ID, maps)
	}
	priv := allocOK(t, c, "default", "private", "c2")
	if _, ok := eipOfPod(l, podIP(priv)); ok || len(l.cloud.World().EIPs) != 1 {
		t.Fatalf("a pod that asks for no EIP got one: %+v", l.cloud.World().EIPs)
	}
	// A retried ADD gets the same answer and allocates nothing more.
	allocOK(t, c, "default", "public", "c1")
	if n := len(l.cloud.World().EIPs); n != 1 {
		t.Fatalf("%d EIPs after a retried ADD", n)
	}
	release(t, c, "default", "public", "c1")
	if n := len(l.cloud.World().EIPs); n != 0 {
		t.Fatalf("EIPs after the pod's release: %+v", l.cloud.World().EIPs)
	}
}

// A user's EIP (pod-eip-instanceid) is bound and, when the pod goes, only
// unbound; one bound elsewhere is refused without allow_eip_rob.
func TestEIPOfTheUser(t *testing.T) {
	l, d, c := eipLab(t, false)
	user, err := d.node.API.AllocateEIP(ctxT(t), cloud.AllocateEIPRequest{IntentKey: "user"})
	if err != nil {
		t.Fatal(err)
	}
	l.pod("default", "given", withAnnotations(k8s.AnnotationEIPInstanceID, user.ID))
	r := allocOK(t, c, "default", "given", "c1")
	if e, ok := eipOfPod(l, podIP(r)); !ok || e.ID != user.ID || e.Status != "InUse" {
		t.Fatalf("the user's EIP: %+v %v", e, ok)
	}
	l.pod("default", "thief", withAnnotations(k8s.AnnotationEIPInstanceID, user.ID))
	_, err = alloc(t, c, "default", "thief", "c2")
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "allow_eip_rob is off") {
		t.Fatalf("a second pod asking for a bound EIP without allow_eip_rob: %v", err)
	}
	release(t, c, "default", "given", "c1")
	got, err := d.node.API.WaitEIPStatus(ctxT(t), user.ID, cloud.EIPAvailable)
	if err != nil || got.InstanceID != "" {
		t.Fatalf("the user's EIP after the pod: %+v %v, want it kept, Available", got, err)
	}
}

// With allow_eip_rob a pod takes a user's EIP bound to another pod.
func TestEIPRob(t *testing.T) {
	l, d, c := eipLab(t, true)
	user, err := d.node.API.AllocateEIP(ctxT(t), cloud.AllocateEIPRequest{IntentKey: "user"})
	if err != nil {
		t.Fatal(err)
	}
	l.pod("default", "first", withAnnotations(k8s.AnnotationEIPInstanceID, user.ID))
	l.pod("default", "second", withAnnotations(k8s.AnnotationEIPInstanceID, user.ID))
	allocOK(t, c, "default", "first", "c1")
	r := allocOK(t, c, "default", "second", "c2")
	if e, ok := eipOfPod(l, podIP(r)); !ok || e.ID != user.ID || e.Status != "InUse" {
		t.Fatalf("robbed EIP: %+v %v", e, ok)
	}
	// The EIP is dropped at once from the record of the pod it was taken
	// from (GC's reconcile does it for other nodes).
	first, err := d.store.Get("default", "first")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.EIP(); ok {
		t.Fatalf("the robbed pod's record still has the EIP: %+v", first.Resources)
	}
	release(t, c, "default", "first", "c1")
	if e, ok := eipOfPod(l, podIP(r)); !ok || e.Status != "InUse" {
		t.Fatalf("releasing the robbed pod touched the EIP: %+v %v", e, ok)
	}
}

// A sticky pod keeps its EIP across re-creation: bound on while its
// address is reserved, the same EIP after.
func TestEIPStickyPod(t *testing.T) {
	l, _, c := eipLab(t, false)
	sts := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid"}}
		withAnnotations(k8s.AnnotationPodWithEIP, "true")(p)
	}
	l.pod("db", "db-0", sts)
	r := allocOK(t, c, "db", "db-0", "s1")
	e, _ := eipOfPod(l, podIP(r))
	release(t, c, "db", "db-0", "s1")
	if kept, ok := eipOfPod(l, podIP(r)); !ok || kept.ID != e.ID || kept.Status != "InUse" {
		t.Fatalf("a sticky pod's EIP after its release: %+v %v", kept, ok)
	}
	l.deletePod("db", "db-0")
	l.pod("db", "db-0", sts)
	again := allocOK(t, c, "db", "db-0", "s2")
	if got, ok := eipOfPod(l, podIP(again)); !ok || got.ID != e.ID || len(l.cloud.World().EIPs) != 1 {
		t.Fatalf("re-created sticky pod: %+v, want EIP %s again (EIPs %+v)", got, e.ID, l.cloud.World().EIPs)
	}
}

// An EIP the daemon allocated whose record never made it (the answer of a
// lost AllocIP) is released by GC; a malformed annotation fails AllocIP
// with InvalidArgument and allocates nothing.
func TestEIPUnrecordedIsSwept(t *testing.T) {
	l, d, c := eipLab(t, false)
	orphan, err := d.node.API.AllocateEIP(ctxT(t), cloud.AllocateEIPRequest{IntentKey: "lost", Name: d.eipName()})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := d.node.API.AllocateEIP(ctxT(t), cloud.AllocateEIPRequest{IntentKey: "theirs", Name: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	l.pod("default", "bad", withAnnotations(k8s.AnnotationPodWithEIP, "true", k8s.AnnotationEIPBandwidth, "lots"))
	if _, err := alloc(t, c, "default", "bad", "c1"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed EIP annotation: %v", err)
	}
	if err := d.sweepEIPs(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range l.cloud.World().EIPs {
		ids = append(ids, e.ID)
	}
	if len(ids) != 1 || ids[0] != foreign.ID {
		t.Fatalf("EIPs after the sweep: %v, want only %s (not %s)", ids, foreign.ID, orphan.ID)
	}
}

// An AllocIP whose EIP association keeps failing fails, leaves no EIP
// behind, and a retry once the cloud recovers succeeds.
func TestEIPAssociateFailsThenRecovers(t *testing.T) {
	l, _, c := eipLab(t, false)
	if _, err := l.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultError, Action: "AssociateEipAddress", Code: "InvalidParameter", Status: 400}); err != nil {
		t.Fatal(err)
	}
	l.pod("default", "public", withAnnotations(k8s.AnnotationPodWithEIP, "true"))
	if _, err := alloc(t, c, "default", "public", "c1"); err == nil {
		t.Fatal("AllocIP succeeded while every association fails")
	}
	testwait.For(t, 10*time.Second, "the failed EIP released", func() error {
		if n := len(l.cloud.World().EIPs); n != 0 {
			return fmt.Errorf("%d EIPs left: %+v", n, l.cloud.World().EIPs)
		}
		return nil
	})
	l.cloud.ClearFaults()
	r := allocOK(t, c, "default", "public", "c1")
	if e, ok := eipOfPod(l, podIP(r)); !ok || e.Status != "InUse" {
		t.Fatalf("after recovery: %+v %v", e, ok)
	}

}

// GC drops from a record the user EIP the cloud no longer binds to its
// pod (taken by a pod of another node, here by hand), and releasing that
// pod then leaves the EIP where it is.
func TestEIPTakenElsewhereIsDropped(t *testing.T) {
	l, d, c := eipLab(t, false)
	user, err := d.node.API.AllocateEIP(ctxT(t), cloud.AllocateEIPRequest{IntentKey: "user"})
	if err != nil {
		t.Fatal(err)
	}
	l.pod("default", "given", withAnnotations(k8s.AnnotationEIPInstanceID, user.ID))
	r := allocOK(t, c, "default", "given", "c1")
	l.pod("default", "other", nil)
	other := allocOK(t, c, "default", "other", "c2")
	att, _ := d.store.Get("default", "given")
	res, _ := att.EIP()
	api := d.node.API
	if err := api.UnassociateEIP(ctxT(t), user.ID, res.ENIID, netip.MustParseAddr(podIP(r))); err != nil {
		t.Fatal(err)
	}
	if _, err := api.WaitEIPStatus(ctxT(t), user.ID, cloud.EIPAvailable); err != nil {
		t.Fatal(err)
	}
	if err := api.AssociateEIP(ctxT(t), user.ID, res.ENIID, netip.MustParseAddr(podIP(other))); err != nil {
		t.Fatal(err)
	}
	if _, err := api.WaitEIPStatus(ctxT(t), user.ID, cloud.EIPInUse); err != nil {
		t.Fatal(err)
	}
	if err := d.sweepEIPs(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if att, _ := d.store.Get("default", "given"); len(att.Resources) != 1 {
		t.Fatalf("the record keeps an EIP the cloud binds elsewhere: %+v", att.Resources)
	}
	release(t, c, "default", "given", "c1")
	if e, ok := eipOfPod(l, podIP(other)); !ok || e.ID != user.ID || e.Status != "InUse" {
		t.Fatalf("releasing the pod touched the EIP bound elsewhere: %+v %v", e, ok)
	}
}
