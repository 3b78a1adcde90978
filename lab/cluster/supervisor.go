package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/lab/fabric"
	"github.com/terway-sim/terway/lab/routectl"
)

// Supervisor owns a running lab: fakecloud and the VPC fabric live in its
// process, every other part is a child it started. It is what
// `terway-lab up` leaves running in the background.
type Supervisor struct {
	cfg  Config
	log  *slog.Logger
	st   *State
	spec fakecloud.Spec

	procs  *procs
	fabric *fabric.Fabric
	cloud  *fakecloud.Cloud
	httpd  *http.Server
	pki    *pki
	cp     *controlPlane
	kube   kubernetes.Interface
	types  map[string]fakecloud.InstanceType
	// control serves the control socket once the lab is up.
	control *http.Server
	// bgCtx ends at teardown; background work (the route controller,
	// restarts after a kill's downtime) runs under it, counted by bg.
	bgCtx  context.Context
	stopBg context.CancelFunc
	bg     sync.WaitGroup

	// mu serialises the control operations: they change nodes, the
	// processes and the state file.
	mu sync.Mutex
	// nodes are the lab's node runners, in the order of st.Nodes.
	nodes []*node
}

// NewSupervisor prepares a supervisor for cfg; Run brings the lab up.
func NewSupervisor(cfg Config, log *slog.Logger) (*Supervisor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Supervisor{cfg: cfg, log: log}, nil
}

func (s *Supervisor) bin(name string) string { return filepath.Join(s.cfg.BinDir, name) }

// Run brings the lab up, marks it ready, and keeps it until ctx ends;
// then it takes everything down again. A lab that fails to come up is
// taken down too, and its state file says why.
func (s *Supervisor) Run(ctx context.Context) error {
	start := time.Now()
	s.st = &State{Name: s.cfg.Name, Mode: s.cfg.Mode, Phase: PhaseStarting, Dir: s.cfg.Dir,
		SupervisorPID: os.Getpid(), Kubeconfig: filepath.Join(s.cfg.Dir, "kubeconfig", "admin.conf"),
		APIServer: apiServerURL, FabricName: s.cfg.Name, NetNSDir: filepath.Join(s.cfg.Dir, "netns"),
		Started: start}
	if err := s.st.write(); err != nil {
		return err
	}
	s.bgCtx, s.stopBg = context.WithCancel(context.Background())
	err := s.up(ctx)
	if err == nil {
		err = s.serveControl()
	}
	if err == nil {
		s.st.Phase, s.st.UpSeconds = PhaseReady, time.Since(start).Seconds()
		s.st.Progress = "ready"
		s.log.Info("lab ready", "seconds", s.st.UpSeconds)
		err = s.st.write()
		if err == nil {
			<-ctx.Done()
		}
	}
	if err != nil {
		s.log.Error("lab failed", "err", err)
		s.st.Phase, s.st.Error = PhaseFailed, err.Error()
	} else {
		s.st.Phase = PhaseStopping
	}
	_ = s.st.write()
	s.teardown()
	return err
}

// step records and logs what the supervisor is doing.
func (s *Supervisor) step(msg string) {
	s.log.Info(msg)
	s.st.Progress = msg
	_ = s.st.write()
}

func (s *Supervisor) up(ctx context.Context) error {
	env := childEnv(s.cfg.BinDir)
	var err error
	if s.procs, err = newProcs(s.cfg.Dir, env); err != nil {
		return err
	}
	s.step("starting fakecloud and the VPC fabric")
	if err := s.startCloud(ctx); err != nil {
		return err
	}
	s.step("creating certificates")
	if s.pki, err = newPKI(filepath.Join(s.cfg.Dir, "pki")); err != nil {
		return err
	}
	if err := issueCerts(s.pki, s.st.Nodes); err != nil {
		return err
	}
	s.cp = &controlPlane{s: s.st, bin: s.bin, pki: s.pki, procs: s.procs, kcfg: filepath.Dir(s.st.Kubeconfig)}
	if err := s.cp.writeKubeconfigs(); err != nil {
		return err
	}
	s.step("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler")
	clusterCIDR := ""
	if s.cfg.Mode == mode.VPC {
		clusterCIDR = vpcClusterCIDR
	}
	if err := s.cp.start(ctx, clusterCIDR); err != nil {
		return err
	}
	if s.kube, err = adminClient(s.st.Kubeconfig); err != nil {
		return err
	}
	if err := s.startRelays(); err != nil {
		return err
	}
	s.step("starting nodes")
	if err := s.startNodes(ctx); err != nil {
		return err
	}
	s.step("deploying terway from deploy/")
	if err := s.deployTerway(ctx); err != nil {
		return err
	}
	if s.cfg.Mode == mode.VPC {
		s.startRouteController()
	}
	s.step("waiting for nodes and terway to be ready")
	return s.waitReady(ctx)
}

// startCloud starts fakecloud with the fabric as its hypervisor, serves it
// inside the fabric and on the host's loopback, and records the nodes.
func (s *Supervisor) startCloud(ctx context.Context) error {
	spec, err := labSpec(s.cfg)
	if err != nil {
		return err
	}
	s.spec = spec
	s.st.AccessKeyID = "LTAIterwaylab" + randomHex(6)
	s.st.AccessKeySecret, s.st.AdminToken = randomHex(16), randomHex(16)
	s.st.OperatorAccessKeyID, s.st.OperatorAccessKeySecret = "LTAIterwaylabop"+randomHex(6), randomHex(16)
	spec.AccessKeys = append(spec.AccessKeys, fakecloud.AccessKeySpec{ID: s.st.AccessKeyID, Secret: s.st.AccessKeySecret},
		fakecloud.AccessKeySpec{ID: s.st.OperatorAccessKeyID, Secret: s.st.OperatorAccessKeySecret})
	s.st.Region, s.st.VPCID = spec.RegionID, spec.VPCs[0].ID
	if err := os.MkdirAll(s.st.NetNSDir, 0o700); err != nil {
		return err
	}
	if s.fabric, err = fabric.NewFabric(fabric.FabricOptions{Name: s.cfg.Name, NetNSDir: s.st.NetNSDir,
		Logger: s.log.With("part", "fabric")}); err != nil {
		return err
	}
	if s.cloud, err = fakecloud.New(fakecloud.Options{Spec: &spec, Seed: 1, TimeScale: s.cfg.TimeScale,
		Hypervisor: s.fabric, AdminToken: s.st.AdminToken, Logger: s.log.With("part", "fakecloud")}); err != nil {
		return err
	}
	if err := s.fabric.Serve(s.cloud.MetadataBySourceHandler(), s.cloud); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.httpd = fakecloud.NewHTTPServer(s.cloud, fakecloud.ServerTimeouts{}, nil)
	go func() { _ = s.httpd.Serve(l) }()
	s.st.FakecloudURL = "http://" + l.Addr().String()
	if err := s.cloud.WaitHypervisor(ctx); err != nil {
		return err
	}
	return s.recordNodes()
}

// recordNodes turns the running instances into the lab's node list.
func (s *Supervisor) recordNodes() error {
	s.types = map[string]fakecloud.InstanceType{}
	for _, t := range s.cloud.InstanceTypes() {
		s.types[t.InstanceTypeID] = t
	}
	insts := s.cloud.World().Instances
	sort.Slice(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
	for _, in := range insts {
		if in.Status != "Running" {
			continue
		}
		n, err := s.nodeState(len(s.st.Nodes)+1, in.ID, in.InstanceType, in.ZoneID)
		if err != nil {
			return err
		}
		s.st.Nodes = append(s.st.Nodes, n)
	}
	if len(s.st.Nodes) == 0 {
		return errors.New("the world has no running instance to make a node of")
	}
	return s.st.write()
}

// nodeState describes the i-th node of the lab (from 1), on the instance
// id whose namespace the fabric made.
func (s *Supervisor) nodeState(i int, id, instanceType, zone string) (NodeState, error) {
	fn, ok := s.fabric.Node(id)
	if !ok {
		return NodeState{}, fmt.Errorf("instance %s has no node namespace", id)
	}
	if i > 240 {
		return NodeState{}, fmt.Errorf("node %d: the lab has loopback addresses for 240 nodes", i)
	}
	name := fmt.Sprintf("%s-%d", s.cfg.Name, i)
	return NodeState{Name: name, InstanceID: id, InstanceType: instanceType,
		Zone: zone, PrimaryIP: fn.PrimaryIP().String(), NetNS: fn.NetNSPath(),
		Root: filepath.Join(s.cfg.Dir, "nodes", name, "root"), Cgroup: nodeCgroup(name),
		KubeletAddr: fmt.Sprintf("127.0.0.%d", 10+i), MaxPods: maxPods(s.cfg.Mode, s.types[instanceType]),
		Status: NodeRunning}, nil
}

// maxPods is the kubelet's pod limit: the instance type's capacity for
// the mode (ARCHITECTURE, "capacity reaches the scheduler") plus one slot
// for the terway DaemonSet pod, the only host-network pod of the lab.
func maxPods(m mode.Mode, t fakecloud.InstanceType) int {
	switch m {
	case mode.ENIMultiIP:
		return t.MaxPodsENIMultiIP() + 1
	case mode.ENIOnly:
		return t.EniQuantity - 1 + 1
	}
	return 110
}

// startRelays connects each node to the API server, and the API server to
// each kubelet, over loopback.
func (s *Supervisor) startRelays() error {
	for i := range s.st.Nodes {
		n := s.newNode(&s.st.Nodes[i])
		s.nodes = append(s.nodes, n)
		if err := s.startNodeRelays(n); err != nil {
			return err
		}
	}
	return nil
}

// newNode is the runner of node st.
func (s *Supervisor) newNode(st *NodeState) *node {
	return &node{st: st, dir: filepath.Join(s.cfg.Dir, "nodes", st.Name), bin: s.bin, procs: s.procs}
}

// startNodeRelays listens for the API server inside the node's namespace
// and for its kubelet on its host loopback address.
func (s *Supervisor) startNodeRelays(n *node) error {
	fn, ok := s.fabric.Node(n.st.InstanceID)
	if !ok {
		return fmt.Errorf("instance %s has no node namespace", n.st.InstanceID)
	}
	var l net.Listener
	if err := fn.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:6443")
		return err
	}); err != nil {
		return fmt.Errorf("listen for the API server in %s: %w", n.st.Name, err)
	}
	var d net.Dialer
	n.relays = append(n.relays, startRelay(l, func(ctx context.Context) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", "127.0.0.1:6443")
	}, s.log))
	kl, err := net.Listen("tcp", n.st.KubeletAddr+":10250")
	if err != nil {
		return fmt.Errorf("listen for %s's kubelet: %w", n.st.Name, err)
	}
	n.relays = append(n.relays, startRelay(kl, func(ctx context.Context) (net.Conn, error) {
		return fn.DialContext(ctx, "tcp", "127.0.0.1:10250")
	}, s.log))
	return nil
}

// startNodes starts every node's processes, nodes in parallel.
func (s *Supervisor) startNodes(ctx context.Context) error {
	created, err := ensureMountpoints()
	s.st.CreatedDirs = append(s.st.CreatedDirs, created...)
	if werr := s.st.write(); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	errs := make([]error, len(s.nodes))
	var wg sync.WaitGroup
	for i, n := range s.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.startNode(ctx, n, s.cfg.Images)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.st.write()
}

// clusterCIDR is kube-proxy's cluster CIDR: the pods' addresses.
func (s *Supervisor) clusterCIDR() string {
	if s.cfg.Mode == mode.VPC {
		return vpcClusterCIDR
	}
	return "192.168.0.0/16"
}

// startNode boots a node: its mount namespace, cgroup, containerd (with
// images imported), kubelet and kube-proxy.
func (s *Supervisor) startNode(ctx context.Context, n *node, images []string) error {
	if err := n.startHolder(ctx); err != nil {
		return err
	}
	if err := createCgroup(n.st.Cgroup); err != nil {
		return err
	}
	if err := n.startContainerd(ctx, images); err != nil {
		return err
	}
	for _, c := range []string{ComponentKubelet, componentKubeProxy} {
		if err := s.startComponent(ctx, n, c); err != nil {
			return err
		}
	}
	return nil
}

// startComponent (re)starts one of the node's processes with its
// configuration.
func (s *Supervisor) startComponent(ctx context.Context, n *node, c string) error {
	switch c {
	case ComponentContainerd:
		return n.startContainerd(ctx, nil)
	case ComponentKubelet:
		return n.startKubelet(s.pki, s.cp.kubeconfig("node-"+n.st.Name), s.st.Region)
	case componentKubeProxy:
		return n.startKubeProxy(s.cp.kubeconfig("kube-proxy"), s.clusterCIDR(), s.cfg.Mode == mode.ENIOnly)
	}
	return fmt.Errorf("no node component %q", c)
}

// startRouteController does cloud-controller-manager's job for VPC mode:
// a VPC route entry per node podCIDR, which the fabric then follows.
func (s *Supervisor) startRouteController() {
	ctx := s.bgCtx
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		err := routectl.Run(ctx, routectl.Options{Kube: s.kube, Endpoint: s.st.FakecloudURL, Region: s.st.Region,
			VpcID: s.st.VPCID, AccessKeyID: s.st.AccessKeyID, AccessKeySecret: s.st.AccessKeySecret,
			ClusterCIDR: netip.MustParsePrefix(vpcClusterCIDR), Logger: s.log.With("part", "routectl")})
		if err != nil && ctx.Err() == nil {
			s.log.Error("route controller stopped", "err", err)
		}
	}()
}

// teardown stops everything Run started, in the reverse order, and
// sweeps what the processes left: the nodes' namespaces and cgroups.
func (s *Supervisor) teardown() {
	if s.control != nil {
		_ = s.control.Close()
		_ = os.Remove(ControlSocketPath(s.cfg.Dir))
	}
	if s.stopBg != nil {
		s.stopBg()
		s.bg.Wait()
	}
	// An operation still running ends with its connection; wait for it.
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		n.stop()
	}
	for _, n := range s.st.Nodes {
		if err := sweepNode(n); err != nil {
			s.log.Warn("sweep node", "node", n.Name, "err", err)
		}
	}
	for _, n := range s.nodes {
		if n.holder != nil {
			n.holder.stop(time.Second)
		}
	}
	if s.cp != nil {
		s.cp.stop()
	}
	for _, n := range s.nodes {
		for _, r := range n.relays {
			r.close()
		}
	}
	if s.httpd != nil {
		_ = s.httpd.Close()
	}
	if s.cloud != nil {
		_ = s.cloud.Close()
	}
	if s.fabric != nil {
		if err := s.fabric.Close(); err != nil {
			s.log.Warn("close fabric", "err", err)
		}
	}
	for _, n := range slices.Concat(s.st.Nodes, s.st.Released) {
		if err := removeCgroup(n.Cgroup); err != nil {
			s.log.Warn("remove cgroup", "node", n.Name, "err", err)
		}
	}
	s.log.Info("lab stopped")
}

// childEnv is the environment of the lab's processes: the lab's binaries
// first on PATH (containerd finds its own shim there), and no proxy
// settings, which would carry the API server's calls to kubelets, and
// others, away from loopback.
func childEnv(binDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || strings.HasSuffix(strings.ToUpper(k), "_PROXY") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+binDir+":"+os.Getenv("PATH"))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
