package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/daemon"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/daemontest"
	"github.com/terway-sim/terway/internal/fakecloudtest"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/lab/fabric"
)

const (
	testAK, testSK = "LTAIauditTestKey", "audit-test-secret"
	adminToken     = "audit-admin-token"
	instance1      = "i-bp1lab0000000000001"
	vswitch1       = "vsw-bp1lab0000000000001"
	nodeName       = "node-1"
)

// labEnv is fakecloud, the lab fabric (real node namespaces) and one node
// with an in-process daemon, driven by the real CNI plugin through
// libcni; the API server is a fake clientset.
type labEnv struct {
	t      *testing.T
	cloud  *fakecloud.Cloud
	fabric *fabric.Fabric
	api    *httptest.Server
	kube   *fake.Clientset
	ln     *daemontest.Node
	conn   *grpc.ClientConn
	// stopDaemon stops node-1's daemon (also at the end of the test).
	stopDaemon func()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newLabEnv(t *testing.T) *labEnv {
	t.Helper()
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSK}}
	l := fakecloudtest.StartLab(t, "a", fakecloud.Options{Spec: &spec, Seed: 11, TimeScale: 0.01, AdminToken: adminToken})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec: corev1.NodeSpec{ProviderID: fakecloud.DefaultRegion + "." + instance1}}
	e := &labEnv{t: t, cloud: l.Cloud, fabric: l.Fabric, api: l.API, kube: fake.NewClientset(node),
		ln: daemontest.NewNode(t, l.Fabric, instance1)}
	e.startDaemon()
	return e
}

func (e *labEnv) path(p ...string) string { return e.ln.Path(p...) }

// startDaemon runs node-1's daemon with a warm pool of two idle
// addresses; GC and pool sync are far away so that nothing the tests
// inject is repaired behind their back.
func (e *labEnv) startDaemon() {
	bo := map[string]any{"Duration": "5ms", "Factor": 1.2, "Steps": 8}
	cfg := daemontest.Config(e.t, e.kube, nodeName, map[string]any{
		"endpoint": e.api.URL, "metadata_endpoint": e.fabric.MetadataEndpoint(),
		"store_path": e.path("store.db"), "socket_path": e.path("eni.socket"),
		"max_pool_size": 5, "min_pool_size": 2, "service_cidr": "10.96.0.0/12", "cluster_id": "c-audit",
		"ip_batch_window": "10ms", "gc_period": "1h", "pool_check_period": "1h", "metadata_lag_timeout": "20s",
		"cni_conf_dir": e.path("net.d"), "cni_bin_dir": pluginBin, "cni_cache_dir": e.path("cache"),
		"backoff_override": map[string]any{"": bo, "eni_create": bo, "eni_ops": bo, "eni_release": bo, "eni_ip_ops": bo,
			"eni_delete_confirm": bo, "wait_eni_status": bo, "meta_assign_private_ip": bo, "meta_unassign_private_ip": bo,
			"metadata": bo},
	})
	_, e.stopDaemon = e.ln.Start(e.t, daemon.Options{Mode: mode.ENIMultiIP, Config: cfg, NodeName: nodeName, Kube: clientset.Wrap(e.kube)})
}

// input is the audit's view of this lab.
func (e *labEnv) input() Input {
	return Input{FakecloudURL: e.api.URL, AdminToken: adminToken, Kube: e.kube, Mode: mode.ENIMultiIP,
		Nodes: []NodeInput{{Name: nodeName, InstanceID: instance1, NetNS: e.ln.NetNSPath(), Socket: e.path("eni.socket")}}}
}

// conflist is the node's network configuration with the terway plugin.
func (e *labEnv) conflist() *libcni.NetworkConfigList {
	raw, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "terway", "plugins": []any{map[string]any{
		"type": "terway", "socket_path": e.path("eni.socket"), "state_dir": e.path("state"),
		"eniip_virtual_type": "Veth", "mtu": 1500, "log_file": e.path("plugin.log")}}})
	if err != nil {
		e.t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}

// addPod creates the pod object, runs CNI ADD in the node's namespace as
// a runtime would and reports the address as the kubelet would.
func (e *labEnv) addPod(name string) netip.Addr {
	t := e.t
	t.Helper()
	ctx := ctxT(t)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "audit", Name: name, UID: k8stypes.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := e.kube.CoreV1().Pods("audit").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podNS := testnetns.ForTest(t)
	cni := e.ln.CNI(pluginBin)
	rt := &libcni.RuntimeConf{ContainerID: "c-" + name, NetNS: podNS.Path(), IfName: "eth0", Args: [][2]string{
		{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "audit"}, {"K8S_POD_NAME", name},
		{"K8S_POD_INFRA_CONTAINER_ID", "c-" + name}, {"K8S_POD_UID", "uid-" + name}}}
	res, err := cni.AddNetworkList(ctx, e.conflist(), rt)
	if err != nil {
		plog, _ := os.ReadFile(e.path("plugin.log"))
		t.Fatalf("CNI ADD %s: %v\nplugin log:\n%s", name, err, plog)
	}
	r, err := current.NewResultFromResult(res)
	if err != nil || len(r.IPs) == 0 {
		t.Fatalf("ADD result %v: %v", res, err)
	}
	ip, _ := netip.AddrFromSlice(r.IPs[0].Address.IP)
	ip = ip.Unmap()
	p.Status.PodIPs, p.Status.PodIP = []corev1.PodIP{{IP: ip.String()}}, ip.String()
	if _, err := e.kube.CoreV1().Pods("audit").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ip
}

// waitPoolWarm waits until the daemon's pool has at least two idle
// addresses and no call in flight.
func (e *labEnv) waitPoolWarm() {
	e.t.Helper()
	testwait.For(e.t, 30*time.Second, "a warm pool", func() error {
		v, err := readPool(ctxT(e.t), e.daemonConn(), e.path("eni.socket"))
		if err != nil {
			return err
		}
		idle := 0
		for _, a := range v.addrs {
			if a.State == "idle" {
				idle++
			}
		}
		if idle < 2 || v.inflight != 0 || v.waiting != 0 {
			return fmt.Errorf("%d idle, %d in flight, %d waiting", idle, v.inflight, v.waiting)
		}
		return nil
	})
}

// daemonConn is a client of node-1's daemon, made once.
func (e *labEnv) daemonConn() *grpc.ClientConn {
	if e.conn == nil {
		conn, err := dialDaemon(e.path("eni.socket"))
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { conn.Close() })
		e.conn = conn
	}
	return e.conn
}

// ecsClient is the real SDK pointed at fakecloud with the test's
// AccessKey: changes made through it are unknown to the daemon.
func (e *labEnv) ecsClient() *ecs.Client {
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	c, err := ecs.NewClientWithOptions(fakecloud.DefaultRegion, cfg, credentials.NewAccessKeyCredential(testAK, testSK))
	if err != nil {
		e.t.Fatal(err)
	}
	u, _ := url.Parse(e.api.URL)
	c.Domain = u.Host
	return c
}
