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
	nodes  []*node
	relays []*relay
	kube   *kubernetes.Clientset
	stopBg context.CancelFunc
	bg     sync.WaitGroup
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
	err := s.up(ctx)
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
	spec.AccessKeys = append(spec.AccessKeys, fakecloud.AccessKeySpec{ID: s.st.AccessKeyID, Secret: s.st.AccessKeySecret})
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
	types := map[string]fakecloud.InstanceType{}
	for _, t := range s.cloud.InstanceTypes() {
		types[t.InstanceTypeID] = t
	}
	insts := s.cloud.World().Instances
	sort.Slice(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
	for _, in := range insts {
		if in.Status != "Running" {
			continue
		}
		fn, ok := s.fabric.Node(in.ID)
		if !ok {
			return fmt.Errorf("instance %s has no node namespace", in.ID)
		}
		i := len(s.st.Nodes) + 1
		name := fmt.Sprintf("%s-%d", s.cfg.Name, i)
		s.st.Nodes = append(s.st.Nodes, NodeState{Name: name, InstanceID: in.ID, InstanceType: in.InstanceType,
			Zone: in.ZoneID, PrimaryIP: fn.PrimaryIP().String(), NetNS: fn.NetNSPath(),
			Root: filepath.Join(s.cfg.Dir, "nodes", name, "root"), Cgroup: nodeCgroup(name),
			KubeletAddr: fmt.Sprintf("127.0.0.%d", 10+i), MaxPods: maxPods(s.cfg.Mode, types[in.InstanceType])})
	}
	if len(s.st.Nodes) == 0 {
		return errors.New("the world has no running instance to make a node of")
	}
	return s.st.write()
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
	for _, n := range s.st.Nodes {
		fn, _ := s.fabric.Node(n.InstanceID)
		var l net.Listener
		if err := fn.Do(func(ns.NetNS) error {
			var err error
			l, err = net.Listen("tcp", "127.0.0.1:6443")
			return err
		}); err != nil {
			return fmt.Errorf("listen for the API server in %s: %w", n.Name, err)
		}
		var d net.Dialer
		s.relays = append(s.relays, startRelay(l, func(ctx context.Context) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", "127.0.0.1:6443")
		}, s.log))
		kl, err := net.Listen("tcp", n.KubeletAddr+":10250")
		if err != nil {
			return fmt.Errorf("listen for %s's kubelet: %w", n.Name, err)
		}
		s.relays = append(s.relays, startRelay(kl, func(ctx context.Context) (net.Conn, error) {
			return fn.DialContext(ctx, "tcp", "127.0.0.1:10250")
		}, s.log))
	}
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
	clusterCIDR := "192.168.0.0/16"
	if s.cfg.Mode == mode.VPC {
		clusterCIDR = vpcClusterCIDR
	}
	errs := make([]error, len(s.st.Nodes))
	var wg sync.WaitGroup
	for i := range s.st.Nodes {
		n := &node{st: &s.st.Nodes[i], dir: filepath.Join(s.cfg.Dir, "nodes", s.st.Nodes[i].Name), bin: s.bin, procs: s.procs}
		s.nodes = append(s.nodes, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.startNode(ctx, n, clusterCIDR)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.st.write()
}

func (s *Supervisor) startNode(ctx context.Context, n *node, clusterCIDR string) error {
	if err := n.startHolder(ctx); err != nil {
		return err
	}
	if err := createCgroup(n.st.Cgroup); err != nil {
		return err
	}
	if err := n.startContainerd(ctx, s.cfg.Images); err != nil {
		return err
	}
	if err := n.startKubelet(s.pki, s.cp.kubeconfig("node-"+n.st.Name), s.st.Region); err != nil {
		return err
	}
	return n.startKubeProxy(s.cp.kubeconfig("kube-proxy"), clusterCIDR, s.cfg.Mode == mode.ENIOnly)
}

// startRouteController does cloud-controller-manager's job for VPC mode:
// a VPC route entry per node podCIDR, which the fabric then follows.
func (s *Supervisor) startRouteController() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopBg = cancel
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
	if s.stopBg != nil {
		s.stopBg()
		s.bg.Wait()
	}
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
	for _, r := range s.relays {
		r.close()
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
	for _, n := range s.st.Nodes {
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
