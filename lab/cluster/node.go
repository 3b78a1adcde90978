package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// node runs one lab node: a mount-namespace holder, containerd, the
// kubelet and kube-proxy, all inside the node's network namespace.
type node struct {
	st     *NodeState
	dir    string // <lab>/nodes/<name>: configs, sysctl stand-ins
	bin    func(string) string
	procs  *procs
	holder *proc
	list   []*proc
	// comps are the running processes by component name (containerd,
	// kubelet, kube-proxy), the latest start of each.
	comps map[string]*proc
	// relays carry the node's API server and kubelet traffic.
	relays []*relay
	// boots counts power-offs, so that a restart scheduled by a kill
	// before one is dropped: the node's next start brings everything up.
	boots int
}

func (n *node) sysctlDir() string { return filepath.Join(n.dir, "sysctl") }

// startHolder creates the node's mount namespace and waits until its
// bind mounts are in place.
func (n *node) startHolder(ctx context.Context) error {
	if err := prepareNodeDirs(*n.st, n.sysctlDir()); err != nil {
		return err
	}
	ready := filepath.Join(n.dir, "mountns-ready")
	_ = os.Remove(ready)
	p, err := n.procs.start(n.st.Name+"-mountns", "nsenter", "--net="+n.st.NetNS, "--",
		"unshare", "--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", holderScript(nodeBinds(*n.st, n.sysctlDir()), ready))
	if err != nil {
		return err
	}
	n.holder = p
	n.st.HolderPID = p.cmd.Process.Pid
	if err := waitFor(ctx, p, n.st.Name+" mount namespace", 30*time.Second, func(context.Context) error {
		_, err := os.Stat(ready)
		return err
	}); err != nil {
		return err
	}
	n.st.MountNS, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.st.HolderPID))
	return err
}

// run starts argv inside the node: its network and mount namespaces.
func (n *node) run(name string, argv ...string) (*proc, error) {
	full := append([]string{"nsenter", "--target", strconv.Itoa(n.st.HolderPID), "--mount",
		"--net=" + n.st.NetNS, "--"}, argv...)
	p, err := n.procs.start(n.st.Name+"-"+name, full...)
	if err != nil {
		return nil, err
	}
	n.list = append(n.list, p)
	if n.comps == nil {
		n.comps = map[string]*proc{}
	}
	n.comps[name] = p
	return p, nil
}

// containerdConfig keeps containerd's default paths (they are the node's
// own inside its mount namespace) and changes only what the lab needs.
func (n *node) containerdConfig() string {
	return fmt.Sprintf(`version = 3

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = '%s'

[plugins.'io.containerd.cri.v1.runtime']
  # This machine's sandbox lacks CAP_SYS_RESOURCE, so the -998 the CRI asks
  # for on sandboxes cannot be set (k8s-local-lab.md, step 2).
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/opt/cni/bin']
    conf_dir = '/etc/cni/net.d'
    # Bring up the pod's lo in containerd itself: /opt/cni/bin holds only
    # what the terway DaemonSet installs, as on a node without the
    # reference CNI plugins.
    use_internal_loopback = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '%s'
        SystemdCgroup = false
`, pauseImage, n.bin("runc"))
}

// startContainerd starts containerd and imports images (none when it
// comes back on a node whose disk has them).
func (n *node) startContainerd(ctx context.Context, images []string) error {
	cfg := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(n.containerdConfig()), 0o600); err != nil {
		return err
	}
	p, err := n.run("containerd", n.bin("containerd"), "--config", cfg)
	if err != nil {
		return err
	}
	sock := n.st.ContainerdSocket()
	if err := waitFor(ctx, p, n.st.Name+" containerd", time.Minute, func(ctx context.Context) error {
		return exec.CommandContext(ctx, n.bin("ctr"), "--address", sock, "version").Run()
	}); err != nil {
		return err
	}
	for _, img := range images {
		out, err := exec.CommandContext(ctx, n.bin("ctr"), "--address", sock, "-n", "k8s.io",
			"images", "import", img).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import %s into %s: %v: %s", filepath.Base(img), n.st.Name, err, out)
		}
	}
	return nil
}

// kubeletConfig is the node's KubeletConfiguration (see k8s-local-lab.md,
// step 3, for why each unusual value is needed on this machine).
func (n *node) kubeletConfig(caFile, certFile, keyFile, region string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: %q}}
authorization: {mode: Webhook}
tlsCertFile: %q
tlsPrivateKeyFile: %q
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
maxPods: %d
providerID: %s.%s
clusterDomain: cluster.local
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
`, caFile, certFile, keyFile, n.st.Cgroup, n.st.MaxPods, region, n.st.InstanceID)
}

// startKubelet starts the kubelet; it registers the node itself.
func (n *node) startKubelet(p *pki, kubeconfig, region string) error {
	cfg := filepath.Join(n.dir, "kubelet.yaml")
	body := n.kubeletConfig(p.path("ca.crt"), p.path("node-"+n.st.Name+".crt"), p.path("node-"+n.st.Name+".key"), region)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return err
	}
	labels := strings.Join([]string{
		"node.kubernetes.io/instance-type=" + n.st.InstanceType,
		"topology.kubernetes.io/region=" + region,
		"topology.kubernetes.io/zone=" + n.st.Zone,
	}, ",")
	_, err := n.run("kubelet", n.bin("kubelet"), "--config="+cfg, "--kubeconfig="+kubeconfig,
		"--hostname-override="+n.st.Name, "--node-ip="+n.st.PrimaryIP, "--node-labels="+labels, "--v=1")
	return err
}

// startKubeProxy starts kube-proxy in iptables mode. conntrack settings
// are zeroed because nf_conntrack_max is machine-wide. masqueradeAll is
// for exclusive ENIs: a pod reaches Services through its host peer veth,
// but a backend answers the pod's own address straight through the VPC to
// the pod's ENI, past the node that did the DNAT; with the node's address
// as source the answer comes back through the node and is un-NATed.
func (n *node) startKubeProxy(kubeconfig, clusterCIDR string, masqueradeAll bool) error {
	cfg := filepath.Join(n.dir, "kube-proxy.yaml")
	body := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {masqueradeAll: %t}
`, kubeconfig, clusterCIDR, n.st.Name, masqueradeAll)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return err
	}
	_, err := n.run("kube-proxy", n.bin("kube-proxy"), "--config="+cfg, "--v=1")
	return err
}

// stop ends the node's processes, last started first.
func (n *node) stop() {
	for i := len(n.list) - 1; i >= 0; i-- {
		n.list[i].stop(5 * time.Second)
	}
}

// powerOff ends every process of the node at once, as a power cut
// would: the supervisor's children (holder, containerd, kubelet,
// kube-proxy) and every other process in its cgroup tree or namespaces
// (pods, shims). With its last process the node's mount namespace goes,
// and with it the pods' network namespaces.
func (n *node) powerOff() error {
	all := append([]*proc{n.holder}, n.list...)
	for _, p := range all {
		if p != nil {
			p.expectExit()
		}
	}
	err := sweepNode(*n.st)
	for _, p := range all {
		if p != nil {
			p.kill()
		}
	}
	n.holder, n.list, n.comps = nil, nil, nil
	n.st.HolderPID, n.st.MountNS = 0, ""
	n.boots++
	return err
}
