package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Control-plane addresses. All of them are on the host's loopback; the
// fixed ports mean one lab per machine.
const (
	apiServerURL  = "https://127.0.0.1:6443"
	etcdClientURL = "http://127.0.0.1:2379"
	serviceCIDR   = "10.96.0.0/12"
	// vpcClusterCIDR is where kube-controller-manager carves node podCIDRs
	// in VPC mode (ARCHITECTURE's address plan).
	vpcClusterCIDR = "172.20.0.0/16"
)

// controlPlane runs etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler on the host's loopback.
type controlPlane struct {
	s     *State
	bin   func(string) string
	pki   *pki
	procs *procs
	kcfg  string // kubeconfig directory
	list  []*proc
}

func (cp *controlPlane) kubeconfig(name string) string { return filepath.Join(cp.kcfg, name+".conf") }

// writeKubeconfigs writes one kubeconfig per client identity.
func (cp *controlPlane) writeKubeconfigs() error {
	if err := os.MkdirAll(cp.kcfg, 0o700); err != nil {
		return err
	}
	for _, n := range []string{"admin", "controller-manager", "scheduler", "kube-proxy"} {
		if err := writeKubeconfig(cp.kubeconfig(n), apiServerURL, cp.pki, n); err != nil {
			return err
		}
	}
	for _, n := range cp.s.Nodes {
		if err := writeKubeconfig(cp.kubeconfig("node-"+n.Name), apiServerURL, cp.pki, "node-"+n.Name); err != nil {
			return err
		}
	}
	return nil
}

// hostsFile maps node names to the loopback addresses their kubelets are
// relayed to: the API server dials a kubelet by its hostname first, and
// the machine's own /etc/hosts must not change.
func (cp *controlPlane) hostsFile() (string, error) {
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n")
	for _, n := range cp.s.Nodes {
		fmt.Fprintf(&b, "%s %s\n", n.KubeletAddr, n.Name)
	}
	path := filepath.Join(cp.s.Dir, "hosts")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

func (cp *controlPlane) start(ctx context.Context, clusterCIDR string) error {
	if err := cp.startEtcd(ctx); err != nil {
		return err
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return err
	}
	return cp.startControllers(clusterCIDR)
}

func (cp *controlPlane) run(name string, argv ...string) (*proc, error) {
	p, err := cp.procs.start(name, argv...)
	if err != nil {
		return nil, err
	}
	cp.list = append(cp.list, p)
	return p, nil
}

func (cp *controlPlane) startEtcd(ctx context.Context) error {
	p, err := cp.run("etcd", cp.bin("etcd"), "--name", "lab", "--data-dir", filepath.Join(cp.s.Dir, "etcd"),
		"--listen-client-urls", etcdClientURL, "--advertise-client-urls", etcdClientURL,
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "lab=http://127.0.0.1:2380", "--listen-metrics-urls", "http://127.0.0.1:2381",
		"--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return err
	}
	return waitFor(ctx, p, "etcd healthy", time.Minute, func(ctx context.Context) error {
		return httpGet(ctx, http.DefaultClient, etcdClientURL+"/health")
	})
}

func (cp *controlPlane) startAPIServer(ctx context.Context) error {
	hosts, err := cp.hostsFile()
	if err != nil {
		return err
	}
	P := cp.pki.path
	args := []string{cp.bin("kube-apiserver"),
		"--etcd-servers=" + etcdClientURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=6443",
		// A loopback advertise address is refused by the endpoint
		// reconciler; the `kubernetes` Service then has no endpoints, and
		// in-cluster clients of the lab are pointed at the relay instead.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(cp.s.Dir, "apiserver-certs"), "--service-cluster-ip-range=" + serviceCIDR,
		"--client-ca-file=" + P("ca.crt"), "--tls-cert-file=" + P("apiserver.crt"),
		"--tls-private-key-file=" + P("apiserver.key"),
		"--kubelet-client-certificate=" + P("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + P("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=Hostname",
		"--service-account-key-file=" + P("sa.pub"), "--service-account-signing-key-file=" + P("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=Node,RBAC", "--allow-privileged=true", "--profiling=false"}
	// A private mount namespace with its own /etc/hosts: node names
	// resolve to the kubelet relays for the API server only.
	script := `mount --bind "$0" /etc/hosts && exec "$@"`
	argv := append([]string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, hosts}, args...)
	p, err := cp.run("kube-apiserver", argv...)
	if err != nil {
		return err
	}
	cs, err := adminClient(cp.kubeconfig("admin"))
	if err != nil {
		return err
	}
	return waitFor(ctx, p, "kube-apiserver ready", 2*time.Minute, func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// adminClient is a clientset with the lab's admin identity.
func adminClient(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return kubernetes.NewForConfig(cfg)
}

func (cp *controlPlane) startControllers(clusterCIDR string) error {
	c := cp.kubeconfig("controller-manager")
	kcm := []string{cp.bin("kube-controller-manager"), "--kubeconfig=" + c, "--authentication-kubeconfig=" + c,
		"--authorization-kubeconfig=" + c, "--bind-address=127.0.0.1", "--leader-elect=false",
		"--service-account-private-key-file=" + cp.pki.path("sa.key"), "--root-ca-file=" + cp.pki.path("ca.crt"),
		"--cluster-signing-cert-file=" + cp.pki.path("ca.crt"), "--cluster-signing-key-file=" + cp.pki.path("ca.key"),
		"--use-service-account-credentials=true", "--service-cluster-ip-range=" + serviceCIDR}
	if clusterCIDR != "" {
		kcm = append(kcm, "--allocate-node-cidrs=true", "--cluster-cidr="+clusterCIDR, "--node-cidr-mask-size=24")
	}
	if _, err := cp.run("kube-controller-manager", kcm...); err != nil {
		return err
	}
	s := cp.kubeconfig("scheduler")
	_, err := cp.run("kube-scheduler", cp.bin("kube-scheduler"), "--kubeconfig="+s,
		"--authentication-kubeconfig="+s, "--authorization-kubeconfig="+s, "--bind-address=127.0.0.1",
		"--leader-elect=false")
	return err
}

// proc is the latest process started as name.
func (cp *controlPlane) proc(name string) *proc {
	for i := len(cp.list) - 1; i >= 0; i-- {
		if cp.list[i].name == name {
			return cp.list[i]
		}
	}
	return nil
}

// stop ends the control plane, last started first.
func (cp *controlPlane) stop() {
	for i := len(cp.list) - 1; i >= 0; i-- {
		cp.list[i].stop(5 * time.Second)
	}
}

// pauseImage is the sandbox image every node's containerd pins.
const pauseImage = "lab.local/pause:1"
