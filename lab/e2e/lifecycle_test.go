package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/daemon"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/internal/testwait"
)

// podMapped says whether the daemon maps a resource to the pod.
func (n *node) podMapped(t *testing.T, p *pod) bool {
	t.Helper()
	maps, err := n.d.Mapping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.PodName == p.namespace+"/"+p.name {
			return true
		}
	}
	return false
}

// TestDelVariants: DEL of a pod whose netns is gone, and DEL while the
// daemon is down (the daemon's GC takes the address back later).
func TestDelVariants(t *testing.T) {
	e := newEnv(t)
	n := e.node(1, nodeOpts{})
	gone := n.newPod("gone", nil)
	gone.mustAdd("1.0.0")
	gone.closeNS()
	if err := gone.del("1.0.0", false); err != nil {
		t.Fatalf("DEL without netns: %v", err)
	}
	assertClean(t, n, gone.ip)

	orphan := n.newPod("orphan", nil)
	orphan.mustAdd("1.0.0")
	n.stop()
	if err := orphan.del("1.0.0", true); err != nil {
		t.Fatalf("DEL with the daemon stopped: %v\n%s", err, n.pluginLog())
	}
	if err := orphan.del("1.0.0", true); err != nil {
		t.Fatalf("second DEL with the daemon stopped: %v", err)
	}
	if left := n.hostState().podRelated(orphan.ip); len(left) > 0 || len(n.stateFiles()) > 0 {
		t.Fatalf("DEL with the daemon down left %v, state %v", left, n.stateFiles())
	}
	orphan.deleteObject()
	n.start(nil)
	if !n.podMapped(t, orphan) {
		t.Fatal("the restarted daemon forgot the pod whose DEL it missed (it must still account for the address)")
	}
	if err := n.d.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.podMapped(t, orphan) {
		t.Fatal("GC kept the address of a pod deleted while the daemon was down")
	}
	assertClean(t, n, orphan.ip)
}

// TestGCWithPartialValidList: the runtime lists one valid attachment;
// the plugin removes the host state of the others and the daemon releases
// them, except the sticky pod whose address stays reserved.
func TestGCWithPartialValidList(t *testing.T) {
	e := newEnv(t)
	n := e.node(1, nodeOpts{})
	keep, lost := n.newPod("keep", nil), n.newPod("lost", nil)
	sticky := n.newPod("sticky-0", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "sticky", UID: "sts-uid"}}
	})
	for _, p := range []*pod{keep, lost, sticky} {
		p.mustAdd("1.1.0")
	}
	// The runtime lost its cache of "lost": only the plugin's GC knows it.
	cache, _ := filepath.Glob(filepath.Join(n.path("cache"), "results", "*"+lost.cid+"*"))
	for _, f := range cache {
		os.Remove(f)
	}
	cni, list := n.cni("1.1.0")
	err := cni.GCNetworkList(ctxT(t), list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: keep.cid, IfName: "eth0"}}})
	if err != nil {
		t.Fatalf("GC: %v\n%s", err, n.pluginLog())
	}
	hs := n.hostState()
	if left := hs.podRelated(lost.ip, sticky.ip); len(left) > 0 {
		t.Fatalf("GC left host state of invalid attachments: %v", left)
	}
	if veths, want := hs.veths(), datapath.VethName("cali", keep.namespace, keep.name, ""); len(veths) != 1 || veths[0] != want {
		t.Fatalf("host veths after GC %v, want only the valid pod's %s", veths, want)
	}
	if !hs.has("512 to " + keep.ip.String() + "/32") {
		t.Fatalf("GC removed the valid pod's rules: %v", hs.rules)
	}
	if err := keep.check("1.1.0"); err != nil {
		t.Fatalf("valid pod after GC: %v", err)
	}
	if n.podMapped(t, lost) {
		t.Fatal("the daemon still maps the invalid attachment")
	}
	// The sticky pod's address is reserved: its next sandbox gets it back.
	old := sticky.ip
	sticky.cid += "-next"
	sticky.mustAdd("1.1.0")
	if sticky.ip != old {
		t.Fatalf("sticky pod came back with %s, want its reserved %s", sticky.ip, old)
	}
	for _, p := range []*pod{keep, sticky} {
		p.mustDel("1.1.0")
	}
	assertHostClean(t, n, keep.ip, lost.ip, sticky.ip)
	if !n.podMapped(t, sticky) || n.podMapped(t, keep) {
		t.Fatal("after DEL the sticky pod's address must stay reserved and the other pod's be released")
	}
}

// TestStatus: ready, daemon down (50), daemon initialising (50).
func TestStatus(t *testing.T) {
	e := newEnv(t)
	n := e.node(1, nodeOpts{})
	cni, list := n.cni("1.1.0")
	if err := cni.GetStatusNetworkList(ctxT(t), list); err != nil {
		t.Fatalf("STATUS with the daemon up: %v", err)
	}
	n.stop()
	err := cni.GetStatusNetworkList(ctxT(t), list)
	if cniCode(err) != 50 || !strings.Contains(err.Error(), n.socket()) {
		t.Fatalf("STATUS with the daemon down = %v, want code 50 naming the socket", err)
	}
	// A daemon whose metadata service does not answer yet is initialising.
	release := make(chan struct{})
	md := e.cloud.MetadataHandler(n.id)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		md.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { closeOnce(release) })
	cfg := n.daemonConfig(map[string]any{"metadata_endpoint": slow.URL})
	done := make(chan error, 1)
	go func() {
		d, err := daemon.New(context.Background(), daemon.Options{Mode: n.mode, Config: cfg, NodeName: n.name, Kube: clientset.Wrap(n.kube), StoreNoSync: true})
		if err == nil {
			err = d.Close()
		}
		done <- err
	}()
	testwait.For(t, settleWithin, "STATUS while initialising", func() error {
		err := cni.GetStatusNetworkList(ctxT(t), list)
		if cniCode(err) == 50 && strings.Contains(err.Error(), "initialising") {
			return nil
		}
		if err == nil {
			return errNotYet // must never pass while initialising: reported at the deadline
		}
		return err
	})
	closeOnce(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the initialising daemon never finished")
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}
