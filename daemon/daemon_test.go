package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/fakecloudtest"
	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/plugintest"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

const (
	testAK   = "LTAIdaemon"
	testSK   = "daemon-secret"
	node1    = "i-bp1lab0000000000001" // ecs.g7.xlarge
	nodeName = "node-1"
	// waitLimit bounds a wait for the daemon's goroutines, the cloud's
	// delays and the fake API server: generous, for -race on a loaded
	// machine.
	waitLimit = 30 * time.Second
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	noproxy.Unset()
	plugintest.QuietKlog() // the informer's retries while a test's API server is "down"
	// Every goroutine a daemon starts ends when Serve returns or Close
	// does: none may outlive the tests.
	goleak.VerifyTestMain(m)
}

// lab is a fakecloud, a fake API server and the paths of one node.
type lab struct {
	t      testing.TB
	cloud  *fakecloud.Cloud
	kube   *fake.Clientset
	dir    string
	apiURL string
	mdURL  string
	conf   string // eni_conf JSON
}

type labOpt func(*fakecloud.Spec, *fakecloud.Options)

func newLab(t testing.TB, opts ...labOpt) *lab {
	t.Helper()
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSK}}
	fo := fakecloud.Options{Seed: 11, TimeScale: 0.01}
	for _, o := range opts {
		o(&spec, &fo)
	}
	fo.Spec = &spec
	fc := fakecloudtest.Start(t, fo, node1)
	// unix socket paths are limited to 108 bytes: keep the directory short.
	dir, err := os.MkdirTemp("", "td")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	l := &lab{t: t, cloud: fc.Cloud, kube: kube, dir: dir, apiURL: fc.API.URL, mdURL: fc.Metadata.URL}
	l.conf = fmt.Sprintf(`{"access_key":%q,"access_secret":%q,"endpoint":%q,"metadata_endpoint":%q,
		"store_path":%q,"socket_path":%q,"max_pool_size":5,"min_pool_size":0,"service_cidr":"10.96.0.0/12",
		"cluster_id":"c-test","ip_batch_window":"10ms","throttle_window":%q,"ip_exhausted_inhibit":"300ms","gc_period":"1h","pool_check_period":"1h","metadata_lag_timeout":"20s",
		"backoff_override":{"":{"Duration":"5ms","Factor":1.2,"Steps":6},"eni_create":{"Duration":"5ms","Steps":3},
		"eni_ops":{"Duration":"5ms","Steps":6},"eni_release":{"Duration":"5ms","Steps":8},"eni_ip_ops":{"Duration":"5ms","Steps":6},
		"eni_delete_confirm":{"Duration":"5ms","Steps":8},"wait_eni_status":{"Duration":"5ms","Factor":1.2,"Steps":12},
		"meta_assign_private_ip":{"Duration":"5ms","Steps":10},"meta_unassign_private_ip":{"Duration":"5ms","Steps":10},
		"metadata":{"Duration":"5ms","Steps":4},"pool_growth":{"Duration":"20ms","Cap":"200ms"}}}`,
		testAK, testSK, fc.API.URL, fc.Metadata.URL, filepath.Join(dir, "store.db"), filepath.Join(dir, "eni.socket"),
		// The daemon knows fakecloud's throttle windows, as a node knows
		// ECS's clock minute.
		throttleWindow(spec).String())
	return l
}

// throttleWindow is spec's throttle window, fakecloud's default when unset.
func throttleWindow(spec fakecloud.Spec) time.Duration {
	if w := spec.Settings.ThrottleWindow.D(); w > 0 {
		return w
	}
	return time.Minute
}

// daemonConfig parses the lab's eni_conf.
func (l *lab) daemonConfig() *config.Config {
	l.t.Helper()
	cfg, err := config.Parse([]byte(l.conf))
	if err != nil {
		l.t.Fatal(err)
	}
	return cfg
}

// daemon starts a daemon of this lab; it stops with the test (or when
// the returned stop is called).
func (l *lab) daemon(mutate func(*Options)) (*Daemon, rpc.TerwayBackendClient, func()) {
	l.t.Helper()
	cfg, err := config.Parse([]byte(l.conf))
	if err != nil {
		l.t.Fatal(err)
	}
	o := Options{Mode: mode.ENIMultiIP, Config: cfg, NodeName: nodeName, Kube: clientset.Wrap(l.kube), StoreNoSync: true}
	if mutate != nil {
		mutate(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := New(ctx, o)
	if err != nil {
		l.t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(context.Background()) }()
	<-d.Ready()
	conn, err := grpc.NewClient("unix://"+cfg.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		l.t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			conn.Close()
			if err := d.Close(); err != nil {
				l.t.Errorf("close daemon: %v", err)
			}
			if err := <-served; err != nil {
				l.t.Errorf("serve: %v", err)
			}
		})
	}
	l.t.Cleanup(stop)
	return d, rpc.NewTerwayBackendClient(conn), stop
}

func (l *lab) pod(ns, name string, mod func(*corev1.Pod)) {
	l.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if mod != nil {
		mod(p)
	}
	if _, err := l.kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lab) deletePod(ns, name string) {
	l.t.Helper()
	if err := l.kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		l.t.Fatal(err)
	}
}

func ctxT(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func alloc(t testing.TB, c rpc.TerwayBackendClient, ns, name, container string) (*rpc.AllocIPReply, error) {
	return c.AllocIP(ctxT(t), &rpc.AllocIPRequest{K8SPodNamespace: ns, K8SPodName: name, K8SPodInfraContainerId: container,
		Netns: "/var/run/netns/" + container, IfName: "eth0"})
}

// allocOK allocates an address for the pod and fails the test if that
// fails.
func allocOK(t testing.TB, c rpc.TerwayBackendClient, ns, name, container string) *rpc.AllocIPReply {
	t.Helper()
	r, err := alloc(t, c, ns, name, container)
	if err != nil {
		t.Fatalf("allocate for %s/%s: %v", ns, name, err)
	}
	return r
}

func podIP(r *rpc.AllocIPReply) string { return r.NetConfs[0].BasicInfo.PodIP.IPv4 }

func TestAllocReleaseLifecycle(t *testing.T) {
	l := newLab(t)
	l.pod("default", "web", func(p *corev1.Pod) {
		p.Annotations = map[string]string{"k8s.aliyun.com/ingress-bandwidth": "8M"}
	})
	d, c, _ := l.daemon(nil)
	r := allocOK(t, c, "default", "web", "c1")
	nc := r.NetConfs[0]
	ip := netip.MustParseAddr(podIP(r))
	if !r.Success || r.IPType != rpc.IPType_TypeENIMultiIP || !netip.MustParsePrefix("192.168.0.0/24").Contains(ip) ||
		nc.BasicInfo.GatewayIP.IPv4 != "192.168.0.253" || nc.BasicInfo.PodCIDR.IPv4 != "192.168.0.0/24" ||
		nc.BasicInfo.ServiceCIDR.IPv4 != "10.96.0.0/12" || nc.ENIInfo.MAC == "" || nc.Pod.Ingress != 1<<20 || !nc.DefaultRoute {
		t.Fatalf("reply: %+v", r)
	}
	// The same ADD again gets the same answer.
	again, err := alloc(t, c, "default", "web", "c1")
	if err != nil || podIP(again) != podIP(r) {
		t.Fatalf("retried ADD: %v %v", again, err)
	}
	info, err := c.GetIPInfo(ctxT(t), &rpc.GetInfoRequest{K8SPodNamespace: "default", K8SPodName: "web", K8SPodInfraContainerId: "c1"})
	if err != nil || !info.Success || info.NetConfs[0].BasicInfo.PodIP.IPv4 != podIP(r) {
		t.Fatalf("GetIPInfo: %+v %v", info, err)
	}
	att, err := d.store.Get("default", "web")
	if err != nil || att.ContainerID != "c1" || att.Resources[0].IPv4 != podIP(r) || att.PodUID != "default-web" {
		t.Fatalf("store: %+v %v", att, err)
	}
	// A DEL of another (old) sandbox releases nothing.
	if _, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: "default", K8SPodName: "web", K8SPodInfraContainerId: "old"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.holds("default/web"); !ok {
		t.Fatal("a stale DEL released the address")
	}
	rel, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: "default", K8SPodName: "web", K8SPodInfraContainerId: "c1"})
	if err != nil || !rel.Success || rel.IPv4Addr.IPv4 != podIP(r) {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if _, err := d.store.Get("default", "web"); err == nil {
		t.Fatal("record kept after release")
	}
	if _, ok := d.holds("default/web"); ok {
		t.Fatal("pool still holds the address")
	}
	if _, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: "default", K8SPodName: "web", K8SPodInfraContainerId: "c1"}); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if info, err := c.GetIPInfo(ctxT(t), &rpc.GetInfoRequest{K8SPodNamespace: "default", K8SPodName: "web"}); err != nil || info.Success {
		t.Fatalf("GetIPInfo after release: %+v %v", info, err)
	}
	// Unknown pods are refused clearly.
	if _, err := alloc(t, c, "default", "ghost", "c9"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown pod: %v", err)
	}
}

func TestStickyAcrossRecreation(t *testing.T) {
	l := newLab(t)
	sts := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid"}}
	}
	l.pod("db", "db-0", sts)
	d, c, _ := l.daemon(nil)
	r := allocOK(t, c, "db", "db-0", "s1")
	if _, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: "db", K8SPodName: "db-0", K8SPodInfraContainerId: "s1"}); err != nil {
		t.Fatal(err)
	}
	l.deletePod("db", "db-0")
	l.pod("other", "hungry", nil)
	if o, err := alloc(t, c, "other", "hungry", "h1"); err != nil || podIP(o) == podIP(r) {
		t.Fatalf("the reserved address went elsewhere: %v %v", o, err)
	}
	l.pod("db", "db-0", sts)
	again, err := alloc(t, c, "db", "db-0", "s2")
	if err != nil || podIP(again) != podIP(r) {
		t.Fatalf("re-created StatefulSet pod got %v, want %s (%v)", again, podIP(r), err)
	}
	_ = d
}

func TestSecondDaemonRefused(t *testing.T) {
	l := newLab(t)
	l.daemon(nil)
	cfg, _ := config.Parse([]byte(l.conf))
	_, err := New(ctxT(t), Options{Mode: mode.ENIMultiIP, Config: cfg, NodeName: nodeName, Kube: clientset.Wrap(l.kube), LockTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "another terwayd holds") {
		t.Fatalf("second daemon: %v", err)
	}
}

// TestRestartKeepsEverything allocates, stops the daemon, deletes some
// pods while it is down and starts a new one: live pods keep their
// addresses, GC releases the dead pods' ones, and nothing is handed out
// twice.
func TestRestartKeepsEverything(t *testing.T) {
	l := newLab(t)
	for i := 0; i < 12; i++ {
		l.pod("ns", fmt.Sprintf("p%d", i), nil)
	}
	_, c, stop := l.daemon(nil)
	before := map[string]string{}
	for i := 0; i < 12; i++ {
		r := allocOK(t, c, "ns", fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
		before[fmt.Sprintf("ns/p%d", i)] = podIP(r)
	}
	stop()
	for i := 0; i < 3; i++ {
		l.deletePod("ns", fmt.Sprintf("p%d", i))
	}
	d2, c2, _ := l.daemon(nil)
	for i := 3; i < 12; i++ {
		key := fmt.Sprintf("ns/p%d", i)
		held, ok := d2.holds(key)
		if !ok || held.ip.IPv4.String() != before[key] {
			t.Fatalf("%s lost its address across the restart", key)
		}
	}
	if err := d2.GC(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, ok := d2.holds(fmt.Sprintf("ns/p%d", i)); ok {
			t.Fatalf("GC kept the address of deleted pod p%d", i)
		}
	}
	l.pod("ns", "new", nil)
	r := allocOK(t, c2, "ns", "new", "cn")
	for k, ip := range before {
		if ip == podIP(r) && !strings.HasPrefix(k, "ns/p0") && !strings.HasPrefix(k, "ns/p1") && !strings.HasPrefix(k, "ns/p2") {
			t.Fatalf("%s handed out again while %s holds it", ip, k)
		}
	}
}

func TestMaxPodsAnnotation(t *testing.T) {
	l := newLab(t)
	l.daemon(nil)
	testwait.For(t, 10*time.Second, "the node's max-available-ip annotation", func() error {
		n, err := l.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
		if err == nil && n.Annotations["k8s.aliyun.com/max-available-ip"] == "45" {
			return nil
		}
		return fmt.Errorf("node annotations %v (%v)", n.GetAnnotations(), err)
	})
}
