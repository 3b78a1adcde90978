package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"
	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/daemon"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/daemontest"
	"github.com/terway-sim/terway/internal/fakecloudtest"
	"github.com/terway-sim/terway/lab/fabric"
)

// settleWithin bounds the waits for the lab to reach a state: daemons, the
// fabric and the plugin act on their own goroutines.
const settleWithin = 30 * time.Second

const (
	testAK, testSK = "LTAIe2eTestKey", "e2e-test-secret"
	clusterCIDR    = "172.20.0.0/16"
)

// specVersions are the CNI spec versions the plugin supports.
var specVersions = []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// env is one fakecloud, its fabric and the API endpoint the daemons use.
type env struct {
	t      testing.TB
	cloud  *fakecloud.Cloud
	fabric *fabric.Fabric
	api    *httptest.Server
}

func newEnv(t testing.TB) *env {
	t.Helper()
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSK}}
	l := fakecloudtest.StartLab(t, "e", fakecloud.Options{Spec: &spec, Seed: 7, TimeScale: 0.01})
	return &env{t: t, cloud: l.Cloud, fabric: l.Fabric, api: l.API}
}

func ctxT(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return c
}

// instanceIDs of the default world: node-1..3 in vSwitches 192.168.0-2.0/24.
func instanceID(i int) string { return fmt.Sprintf("i-bp1lab000000000000%d", i) }

// node is one lab node with its daemon and its CNI files.
type node struct {
	e       *env
	name    string
	id      string
	ln      *daemontest.Node
	kube    *fake.Clientset
	mode    mode.Mode
	podCIDR string
	vtype   string // eniip_virtual_type
	d       *daemon.Daemon
	stop    func()
}

// nodeOpts adjust a node before its daemon starts.
type nodeOpts struct {
	mode    mode.Mode // daemon mode, default ENIMultiIP
	vtype   string    // eniip_virtual_type, default Veth
	podCIDR string    // VPC mode
	conf    map[string]any
}

func (e *env) node(i int, o nodeOpts) *node {
	e.t.Helper()
	return e.nodeFor(instanceID(i), fmt.Sprintf("node-%d", i), o)
}

// nodeFor starts the daemon of the lab node of an instance.
func (e *env) nodeFor(id, name string, o nodeOpts) *node {
	t := e.t
	t.Helper()
	if o.mode == "" {
		o.mode = mode.ENIMultiIP
	}
	if o.vtype == "" {
		o.vtype = "Veth"
	}
	n := &node{e: e, name: name, id: id, ln: daemontest.NewNode(t, e.fabric, id), mode: o.mode,
		podCIDR: o.podCIDR, vtype: o.vtype}
	k8sNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}, Spec: corev1.NodeSpec{PodCIDR: o.podCIDR}}
	n.kube = fake.NewClientset(k8sNode)
	for _, d := range []string{n.path("net.d"), n.path("cache"), n.path("state")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The daemon's periodic CHECK reads the conflist the runtime uses.
	if err := os.WriteFile(n.path("net.d", "10-terway.conflist"), n.conflist("1.0.0"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.start(o.conf)
	return n
}

func (n *node) path(p ...string) string { return n.ln.Path(p...) }
func (n *node) socket() string          { return n.path("eni.socket") }

// daemonConfig is the node's eni_conf: no AccessKey, so the daemon takes
// the instance's RAM role from the metadata service in the fabric. It
// takes terwayd's path (daemon/dynconfig): a node labelled
// terway-config=<name> in its API server has the eni_conf of ConfigMap
// kube-system/<name> merged over it.
func (n *node) daemonConfig(extra map[string]any) *config.Config {
	bo := func(d string, steps int) map[string]any {
		return map[string]any{"Duration": d, "Factor": 1.2, "Steps": steps}
	}
	c := map[string]any{
		"endpoint": n.e.api.URL, "metadata_endpoint": n.e.fabric.MetadataEndpoint(),
		"store_path": n.path("store.db"), "socket_path": n.socket(),
		"max_pool_size": 5, "min_pool_size": 0, "service_cidr": "10.96.0.0/12", "cluster_id": "c-e2e",
		"ip_batch_window": "10ms", "gc_period": "1h", "pool_check_period": "1h", "metadata_lag_timeout": "20s",
		"cni_conf_dir": n.path("net.d"), "cni_bin_dir": pluginBin, "cni_cache_dir": n.path("cache"),
		"cni_gc_grace": "0s", "sticky_time": "10m",
		"backoff_override": map[string]any{"": bo("5ms", 6), "eni_create": bo("5ms", 3), "eni_ops": bo("5ms", 6),
			"eni_release": bo("5ms", 8), "eni_ip_ops": bo("5ms", 6), "eni_delete_confirm": bo("5ms", 8),
			"wait_eni_status": bo("5ms", 12), "meta_assign_private_ip": bo("5ms", 10),
			"meta_unassign_private_ip": bo("5ms", 10), "metadata": bo("5ms", 4)},
	}
	for k, v := range extra {
		c[k] = v
	}
	return daemontest.Config(n.e.t, n.kube, n.name, c)
}

// start runs the node's daemon until the test ends or stop is called.
func (n *node) start(extra map[string]any) {
	n.e.t.Helper()
	n.d, n.stop = n.ln.Start(n.e.t, daemon.Options{Mode: n.mode, Config: n.daemonConfig(extra), NodeName: n.name, Kube: clientset.Wrap(n.kube)})
}

// pluginConf is the terway entry of the node's network configuration.
func (n *node) pluginConf() map[string]any {
	return map[string]any{"type": "terway", "socket_path": n.socket(), "state_dir": n.path("state"),
		"eniip_virtual_type": n.vtype, "mtu": 1500, "log_file": n.path("plugin.log")}
}

func (n *node) conflist(v string) []byte {
	raw, err := json.Marshal(map[string]any{"cniVersion": v, "name": "terway", "plugins": []any{n.pluginConf()}})
	if err != nil {
		n.e.t.Fatal(err)
	}
	return raw
}

// cni is libcni as a runtime on this node uses it: plugins run in the
// node's network namespace, results cached in the node's cache dir.
func (n *node) cni(v string) (*libcni.CNIConfig, *libcni.NetworkConfigList) {
	t := n.e.t
	t.Helper()
	list, err := libcni.ConfListFromBytes(n.conflist(v))
	if err != nil {
		t.Fatal(err)
	}
	return n.ln.CNI(pluginBin), list
}

// route adds a VPC route entry for a node's podCIDR, as the cloud
// controller manager does, through the real SDK.
func (e *env) route(cidr, instance string) {
	t := e.t
	t.Helper()
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	c, err := vpc.NewClientWithOptions(fakecloud.DefaultRegion, cfg, credentials.NewAccessKeyCredential(testAK, testSK))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(e.api.URL)
	c.Domain = u.Host
	req := vpc.CreateCreateRouteEntryRequest()
	req.RouteTableId = fakecloud.DefaultRouteTableID
	req.DestinationCidrBlock = cidr
	req.NextHopId = instance
	req.NextHopType = "Instance"
	if _, err := c.CreateRouteEntry(req); err != nil {
		t.Fatalf("route %s via %s: %v", cidr, instance, err)
	}
	if err := e.cloud.WaitHypervisor(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

var errNotYet = errors.New("not yet")

// dump prints the network state of the fabric and the nodes, for failure
// reports.
func (e *env) dump(nodes ...*node) string {
	var b strings.Builder
	paths := [][2]string{{"fabric", e.fabric.NetNSPath()}}
	for _, n := range nodes {
		paths = append(paths, [2]string{n.name, n.ln.NetNSPath()})
	}
	for _, p := range paths {
		for _, args := range [][]string{{"-br", "addr"}, {"route", "show", "table", "all"}, {"rule"}, {"neigh"}} {
			out, _ := exec.Command("nsenter", append([]string{"--net=" + p[1], "ip"}, args...)...).CombinedOutput()
			fmt.Fprintf(&b, "## %s: ip %s\n%s", p[0], strings.Join(args, " "), out)
		}
	}
	return b.String()
}
