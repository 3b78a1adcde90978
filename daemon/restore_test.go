package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// storeLoss is what happens to the store while the daemon is down.
type storeLoss string

const (
	storeMissing       storeLoss = "missing"
	storeEmpty         storeLoss = "zero-length"
	storeOlder         storeLoss = "older copy"
	storeOtherInstance storeLoss = "another instance's copy"
)

// truthSources says which of the node's truths a restore may read.
type truthSources struct {
	name string
	// podIPs: the pods' status.podIPs are set, as the kubelet does.
	podIPs bool
	// apiDown: the API server cannot be read when the daemon starts.
	apiDown bool
	host    bool // the pods' host routes exist in the host namespace
	plugin  bool // the plugin's attachment records exist
}

// restoreRig drives one row: 30 running pods, a lost store, a restart.
type restoreRig struct {
	*lab
	t        *testing.T
	stateDir string
	host     *hostNS
	apiDown  atomic.Bool
	running  map[string]string // pod key -> its address
}

func newRestoreRig(t *testing.T, src truthSources) *restoreRig {
	l := newLab(t)
	r := &restoreRig{lab: l, t: t, stateDir: filepath.Join(l.dir, "cni"), running: map[string]string{}}
	l.conf = strings.Replace(l.conf, `"gc_period":"1h"`,
		fmt.Sprintf(`"gc_period":"1h","kube_sync_timeout":"300ms","cni_state_dir":%q`, r.stateDir), 1)
	if src.host {
		r.host = newHostNS(t)
	}
	// The API server "goes down" for the pods: list, watch and get fail.
	down := func(k8stesting.Action) (bool, runtime.Object, error) {
		if r.apiDown.Load() {
			return true, nil, errors.New("connection refused (test: API server down)")
		}
		return false, nil, nil
	}
	for _, verb := range []string{"list", "get"} {
		l.kube.PrependReactor(verb, "pods", down)
	}
	l.kube.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if r.apiDown.Load() {
			return true, nil, errors.New("connection refused (test: API server down)")
		}
		return false, nil, nil
	})
	return r
}

// daemonC starts a daemon of the rig (with the host namespace when the
// row has one).
func (r *restoreRig) daemonC(mutate func(*Options)) (*Daemon, rpc.TerwayBackendClient, func()) {
	return r.daemon(func(o *Options) {
		if r.host != nil {
			o.HostNetNS = r.host.ns.Path()
		}
		if mutate != nil {
			mutate(o)
		}
	})
}

func (r *restoreRig) alloc(c rpc.TerwayBackendClient, name string) string {
	r.t.Helper()
	rep, err := alloc(r.t, c, "ns", name, name+"-c")
	if err != nil {
		r.t.Fatalf("alloc %s: %v", name, err)
	}
	return podIP(rep)
}

// release deletes a pod as a DEL and the API server would.
func (r *restoreRig) release(c rpc.TerwayBackendClient, name string) {
	r.t.Helper()
	if _, err := c.ReleaseIP(ctxT(r.t), &rpc.ReleaseIPRequest{K8SPodNamespace: "ns", K8SPodName: name, K8SPodInfraContainerId: name + "-c"}); err != nil {
		r.t.Fatal(err)
	}
	r.deletePod("ns", name)
}

// publish makes the running pods' addresses visible in the sources the
// row has.
func (r *restoreRig) publish(src truthSources) {
	r.t.Helper()
	for key, ip := range r.running {
		ns, name, _ := strings.Cut(key, "/")
		if src.podIPs {
			p, err := r.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				r.t.Fatal(err)
			}
			p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
			if _, err := r.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
				r.t.Fatal(err)
			}
		}
		if src.host {
			r.host.podRoutes(ip)
		}
		if src.plugin {
			r.writeRecord(ns, name, ip)
		}
	}
}

// writeRecord writes an attachment record in the plugin's format (see
// cni.ReadRecords; cni's own test pins that the plugin writes it so).
func (r *restoreRig) writeRecord(ns, name, ip string) {
	r.t.Helper()
	if err := os.MkdirAll(r.stateDir, 0o700); err != nil {
		r.t.Fatal(err)
	}
	cid := name + "-c"
	rec := map[string]any{"version": 1, "containerID": cid, "ifName": "eth0", "ipType": "TypeENIMultiIP",
		"pod":  map[string]string{"namespace": ns, "name": name, "infraContainerID": cid},
		"spec": map[string]any{"kind": "PolicyRoute", "ifName": "eth0", "hostVeth": "calitest", "podNetns": "/var/run/netns/" + cid, "ipv4": ip}}
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(r.stateDir, cid+"-eth0.json"), b, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// lose applies the store loss; older is a copy taken earlier.
func (r *restoreRig) lose(loss storeLoss, older []byte) {
	r.t.Helper()
	path := r.daemonConfig().StorePath
	var err error
	switch loss {
	case storeMissing:
		err = os.Remove(path)
	case storeEmpty:
		err = os.Truncate(path, 0)
	case storeOlder:
		err = os.WriteFile(path, older, 0o600)
	case storeOtherInstance:
		if err = os.WriteFile(path, older, 0o600); err == nil {
			var st *store.Store
			if st, err = store.Open(path, store.Options{NoSync: true}); err == nil {
				err = errors.Join(st.SetInstance("i-bp1someoneelse0001"), st.Close())
			}
		}
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// cloudAddresses lists the addresses assigned to the node's ENIs.
func (r *restoreRig) cloudAddresses() map[string]bool {
	out := map[string]bool{}
	for _, e := range r.cloud.ENIs() {
		if e.InstanceID != node1 || e.Type != fakecloud.ENITypeSecondary {
			continue
		}
		out[e.PrimaryIP.String()] = true
		for _, a := range e.IPv4 {
			out[a.String()] = true
		}
	}
	return out
}

// checkAssigned fails for every running pod whose address the cloud no
// longer assigns to the node.
func (r *restoreRig) checkAssigned(when string) {
	r.t.Helper()
	have := r.cloudAddresses()
	var lost []string
	for key, ip := range r.running {
		if !have[ip] {
			lost = append(lost, key+" "+ip)
		}
	}
	if len(lost) > 0 {
		r.t.Errorf("%s: %d running pods' addresses were returned to the cloud: %v", when, len(lost), lost)
	}
}

// settle waits until the pool has no more idle addresses than
// max_pool_size (5) and no cloud call in flight that adds addresses
// (Inflight) or gives them back (addresses "releasing"), so that anything
// it would give back is gone from the cloud.
func (l *lab) settle(d *Daemon) {
	l.t.Helper()
	testwait.For(l.t, waitLimit, "the pool to settle", func() error {
		st := d.pool.Stats()
		releasing := 0
		for _, a := range d.pool.Addresses() {
			if a.State == "releasing" {
				releasing++
			}
		}
		if st.Inflight != 0 || st.Pending || st.Idle > 5 || releasing != 0 {
			return fmt.Errorf("pool %+v, %d addresses being given back", st, releasing)
		}
		return nil
	})
}

// TestRestoreFromNodeTruth stops a daemon with 30 running pods, loses its
// store in four ways, and restarts it with all of the node's truths, or
// with the API server unreachable: no running pod's address is handed to
// a new pod or returned to the cloud. Each source alone (API server, host
// routes, plugin records) is enough too, against the hardest loss: an
// older copy whose stale records name addresses other pods hold now.
func TestRestoreFromNodeTruth(t *testing.T) {
	type row struct {
		src  truthSources
		loss storeLoss
	}
	var rows []row
	for _, src := range []truthSources{
		{name: "all sources", podIPs: true, host: true, plugin: true},
		{name: "API server unreachable", apiDown: true, host: true, plugin: true},
	} {
		for _, loss := range []storeLoss{storeMissing, storeEmpty, storeOlder, storeOtherInstance} {
			rows = append(rows, row{src, loss})
		}
	}
	for _, src := range []truthSources{
		{name: "API server only", podIPs: true},
		{name: "host rules only", apiDown: true, host: true},
		{name: "plugin records only", apiDown: true, plugin: true},
	} {
		rows = append(rows, row{src, storeOlder})
	}
	for _, r := range rows {
		t.Run(r.src.name+"/"+string(r.loss), func(t *testing.T) {
			t.Parallel()
			restoreRow(t, r.src, r.loss)
		})
	}
}

func restoreRow(t *testing.T, src truthSources, loss storeLoss) {
	r := newRestoreRig(t, src)
	for i := 0; i < 30; i++ {
		r.pod("ns", fmt.Sprintf("p%d", i), nil)
	}
	for i := 0; i < 5; i++ {
		r.pod("ns", fmt.Sprintf("gone%d", i), nil)
	}
	for i := 0; i < 10; i++ {
		r.pod("ns", fmt.Sprintf("new%d", i), nil)
	}
	// The older copy: 15 pods, 5 of which go away later, and whose
	// addresses later pods get.
	_, c, stop := r.daemonC(nil)
	for i := 0; i < 5; i++ {
		r.alloc(c, fmt.Sprintf("gone%d", i))
	}
	for i := 0; i < 10; i++ {
		r.running[fmt.Sprintf("ns/p%d", i)] = r.alloc(c, fmt.Sprintf("p%d", i))
	}
	stop()
	older, err := os.ReadFile(r.daemonConfig().StorePath)
	if err != nil {
		t.Fatal(err)
	}
	_, c, stop = r.daemonC(nil)
	for i := 0; i < 5; i++ {
		r.release(c, fmt.Sprintf("gone%d", i))
	}
	for i := 10; i < 30; i++ {
		r.running[fmt.Sprintf("ns/p%d", i)] = r.alloc(c, fmt.Sprintf("p%d", i))
	}
	r.publish(src)
	stop()

	r.lose(loss, older)
	r.apiDown.Store(src.apiDown)
	d, c, _ := r.daemonC(nil)
	if d.apiRead.Load() == src.apiDown {
		t.Fatalf("API server read at restore: %v, want %v", d.apiRead.Load(), !src.apiDown)
	}
	r.settle(d)
	r.checkAssigned("after the restart")
	if src.apiDown {
		if err := d.GC(ctxT(t)); err == nil {
			t.Error("GC ran before the API server was read")
		}
		r.apiDown.Store(false)
		testwait.Until(t, waitLimit, "the daemon to read the API server", func() bool { return d.apiRead.Load() })
	}
	if err := d.GC(ctxT(t)); err != nil {
		t.Fatalf("GC: %v", err)
	}
	r.settle(d)
	r.checkAssigned("after GC")
	taken := map[string]string{}
	for key, ip := range r.running {
		taken[ip] = key
	}
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("new%d", i)
		ip := r.alloc(c, name)
		if prev, dup := taken[ip]; dup {
			t.Errorf("%s got %s, which running pod %s holds", name, ip, prev)
		}
		taken[ip] = "ns/" + name
	}
	r.checkAssigned("after new pods")
}

// TestTruncatedStoreKeepsRunningPodsAddresses is finding 1 of the trust
// issue as it was found: 30 running pods, the store truncated to zero
// bytes while the daemon is down (max_pool_size 5). The daemon used to
// adopt the 30 addresses as idle, give 25 back to the vSwitch and hand
// the rest to new pods. It uses only what the daemon had then (the API
// server's pods), so that it runs against that code too.
func TestTruncatedStoreKeepsRunningPodsAddresses(t *testing.T) {
	l := newLab(t)
	for i := 0; i < 35; i++ {
		l.pod("ns", fmt.Sprintf("p%d", i), nil)
	}
	_, c, stop := l.daemon(nil)
	running := map[string]string{}
	for i := 0; i < 30; i++ {
		r := allocOK(t, c, "ns", fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
		ip := podIP(r)
		running[ip] = fmt.Sprintf("p%d", i)
		p, err := l.kube.CoreV1().Pods("ns").Get(context.Background(), fmt.Sprintf("p%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		if _, err := l.kube.CoreV1().Pods("ns").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := os.Truncate(l.daemonConfig().StorePath, 0); err != nil {
		t.Fatal(err)
	}
	d, c, _ := l.daemon(nil)
	l.settle(d)
	assigned := map[string]bool{}
	for _, e := range l.cloud.ENIs() {
		if e.InstanceID == node1 && e.Type == fakecloud.ENITypeSecondary {
			assigned[e.PrimaryIP.String()] = true
			for _, a := range e.IPv4 {
				assigned[a.String()] = true
			}
		}
	}
	lost := 0
	for ip := range running {
		if !assigned[ip] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of 30 running pods' addresses were returned to the cloud", lost)
	}
	for i := 30; i < 35; i++ {
		r := allocOK(t, c, "ns", fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
		if owner, dup := running[podIP(r)]; dup {
			t.Errorf("p%d got %s, which running pod %s holds", i, podIP(r), owner)
		}
	}
}
