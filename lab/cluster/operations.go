package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/fakecloud"
)

// The supervisor's control operations (served on the control socket, see
// Control). Each holds s.mu while it changes processes, the cloud or the
// state; waiting for Kubernetes (a joining node, a drain, a terwayd to
// kill) happens outside it.

// findNode returns the runner of node name. Callers hold s.mu.
func (s *Supervisor) findNode(name string) (*node, error) {
	for _, n := range s.nodes {
		if n.st.Name == name {
			return n, nil
		}
	}
	for _, n := range s.st.Released {
		if n.Name == name {
			return nil, fmt.Errorf("node %s was released: %w", name, ErrNodeState)
		}
	}
	return nil, fmt.Errorf("node %q: %w", name, ErrUnknownNode)
}

// runningNode is findNode for a node that must be running.
func (s *Supervisor) runningNode(name string) (*node, error) {
	n, err := s.findNode(name)
	if err == nil && !n.st.Running() {
		err = fmt.Errorf("node %s is %s: %w", name, n.st.Status, ErrNodeState)
	}
	return n, err
}

// StopNode powers node name off: every process of it is killed, its
// instance stopped (the fabric unplugs its ENIs), and what a reboot
// clears is cleared; its disks stay.
func (s *Supervisor) StopNode(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.runningNode(name)
	if err != nil {
		return err
	}
	s.log.Info("stopping node", "node", name)
	perr := n.powerOff()
	n.st.Status = NodeStopped
	if err := s.cloud.StopInstance(n.st.InstanceID); err != nil {
		return errors.Join(perr, fmt.Errorf("stop instance %s: %w", n.st.InstanceID, err), s.st.write())
	}
	if err := s.cloud.WaitHypervisor(ctx); err != nil {
		return errors.Join(perr, err, s.st.write())
	}
	return errors.Join(perr, clearAfterPowerOff(*n.st), s.st.write())
}

// StartNode powers a stopped node on: its instance starts (the fabric
// plugs its ENIs again) and containerd, the kubelet and kube-proxy start
// with the configuration they had. Pods come back through the kubelet.
func (s *Supervisor) StartNode(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.findNode(name)
	if err != nil {
		return err
	}
	if n.st.Status != NodeStopped {
		return fmt.Errorf("node %s is not stopped: %w", name, ErrNodeState)
	}
	s.log.Info("starting node", "node", name)
	if err := s.cloud.StartInstance(n.st.InstanceID); err != nil {
		return fmt.Errorf("start instance %s: %w", n.st.InstanceID, err)
	}
	if err := s.cloud.WaitHypervisor(ctx); err != nil {
		return err
	}
	n.st.Status = NodeRunning
	err = s.startNode(ctx, n, nil)
	return errors.Join(err, s.st.write())
}

// ReleaseNode releases node name's instance, as ECS does on release:
// the node's processes die, the fabric removes its namespace, its Node
// object is deleted (cloud-controller-manager's part), its disks and
// cgroup go, and the state lists it as released.
func (s *Supervisor) ReleaseNode(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.findNode(name)
	if err != nil {
		return err
	}
	s.log.Info("releasing node", "node", name)
	errs := []error{n.powerOff()}
	if err := s.cloud.ReleaseInstance(n.st.InstanceID); err != nil {
		return errors.Join(append(errs, fmt.Errorf("release instance %s: %w", n.st.InstanceID, err))...)
	}
	if err := s.cloud.WaitHypervisor(ctx); err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, r := range n.relays {
		r.close()
	}
	n.relays = nil
	err = s.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete Node %s: %w", name, err))
	}
	errs = append(errs, removeCgroup(n.st.Cgroup), unmountUnder(n.dir))
	if err := os.RemoveAll(n.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove the disks of %s: %w", name, err))
	}
	s.forgetNode(n)
	return errors.Join(append(errs, s.st.write())...)
}

// forgetNode moves n from the lab's nodes to its released ones. Callers
// hold s.mu.
func (s *Supervisor) forgetNode(n *node) {
	st := *n.st
	st.Status, st.HolderPID, st.MountNS = NodeReleased, 0, ""
	s.st.Released = append(s.st.Released, st)
	var nodes []*node
	var states []NodeState
	for _, m := range s.nodes {
		if m != n {
			nodes = append(nodes, m)
			states = append(states, *m.st)
		}
	}
	s.nodes, s.st.Nodes = nodes, states
	s.repoint()
	s.procs.forget()
}

// repoint points every runner at its entry of st.Nodes again, after the
// slice moved.
func (s *Supervisor) repoint() {
	for i, n := range s.nodes {
		n.st = &s.st.Nodes[i]
	}
}

// AddNode adds a node as a scale-out would: a new instance of the lab's
// type in the next vSwitch, its namespace from the fabric, its
// certificates, relays and processes. It returns when the node is Ready
// and terway runs on it.
func (s *Supervisor) AddNode(ctx context.Context) (NodeState, error) {
	n, err := s.addNode(ctx)
	if err != nil {
		return NodeState{}, err
	}
	s.mu.Lock()
	st, watch := *n.st, append([]*proc{n.holder}, n.list...)
	s.mu.Unlock()
	return st, waitNodeJoined(ctx, s.kube, st.Name, watch)
}

// addNode creates and starts the new node, under s.mu.
func (s *Supervisor) addNode(ctx context.Context) (*node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.st.Nodes) + len(s.st.Released) + 1
	id := fmt.Sprintf("i-bp1terwaylab%08d", i)
	for _, taken := s.cloud.Instance(id); taken; _, taken = s.cloud.Instance(id) {
		i++
		id = fmt.Sprintf("i-bp1terwaylab%08d", i)
	}
	vsws := nodeVSwitches(s.cloud.World().VSwitches)
	if len(vsws) == 0 {
		return nil, errors.New("the world has no vSwitch for a new node")
	}
	vsw := vsws[(i-1)%len(vsws)]
	inst, err := s.cloud.AddInstance(fakecloud.InstanceSpec{ID: id, Name: fmt.Sprintf("%s-%d", s.cfg.Name, i),
		InstanceType: s.cfg.InstanceType, VSwitchID: vsw.ID, SecurityGroupIDs: []string{s.securityGroup()},
		RAMRole: fakecloud.DefaultRAMRole})
	if err != nil {
		return nil, fmt.Errorf("add instance %s: %w", id, err)
	}
	if err := s.cloud.WaitHypervisor(ctx); err != nil {
		return nil, err
	}
	st, err := s.nodeState(i, inst.ID, inst.InstanceType, inst.ZoneID)
	if err != nil {
		return nil, err
	}
	s.log.Info("adding node", "node", st.Name, "instance", id, "vswitch", vsw.ID)
	if err := s.pki.issue(nodeCertSpec(st)); err != nil {
		return nil, err
	}
	if err := writeKubeconfig(s.cp.kubeconfig("node-"+st.Name), apiServerURL, s.pki, "node-"+st.Name); err != nil {
		return nil, err
	}
	s.st.Nodes = append(s.st.Nodes, st)
	n := s.newNode(&s.st.Nodes[len(s.st.Nodes)-1])
	s.nodes = append(s.nodes, n)
	s.repoint()
	// The API server reads its hosts file anew when it changes.
	if _, err := s.cp.hostsFile(); err != nil {
		return nil, errors.Join(err, s.st.write())
	}
	if err := s.startNodeRelays(n); err != nil {
		return nil, errors.Join(err, s.st.write())
	}
	if err := s.st.write(); err != nil {
		return nil, err
	}
	err = s.startNode(ctx, n, s.cfg.Images)
	return n, errors.Join(err, s.st.write())
}

// RemoveNode takes node name out as an operator scales in: cordon, drain
// (every pod but DaemonSet pods evicted and gone), then release.
func (s *Supervisor) RemoveNode(ctx context.Context, name string) error {
	s.mu.Lock()
	_, err := s.runningNode(name)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w (a stopped node cannot drain: start it, or release it)", err)
	}
	s.log.Info("draining node", "node", name)
	if err := drainNode(ctx, s.kube, name); err != nil {
		return err
	}
	return s.ReleaseNode(ctx, name)
}

// Kill kills a component with SIGKILL: containerd or the kubelet of
// node, or kube-apiserver (node ""), which the supervisor starts again
// after downtime; or node's terwayd, which its kubelet restarts. A
// terwayd that is not running (kubelet's back-off) is waited for, as long
// as ctx allows.
func (s *Supervisor) Kill(ctx context.Context, component, node string, downtime time.Duration) error {
	if downtime < 0 {
		return fmt.Errorf("downtime %s: %w", downtime, ErrBadRequest)
	}
	switch component {
	case ComponentTerwayd:
		return s.killTerwayd(ctx, node)
	case ComponentAPIServer:
		if node != "" {
			return fmt.Errorf("kube-apiserver runs on the control plane, not on node %s: %w", node, ErrBadRequest)
		}
		return s.killAPIServer(downtime)
	case ComponentContainerd, ComponentKubelet:
		return s.killNodeComponent(component, node, downtime)
	}
	return fmt.Errorf("component %q: want %s, %s, %s or %s: %w", component, ComponentTerwayd,
		ComponentContainerd, ComponentKubelet, ComponentAPIServer, ErrBadRequest)
}

// killNodeComponent kills containerd or the kubelet of node and has it
// started again after downtime, unless the node was powered off since.
func (s *Supervisor) killNodeComponent(component, name string, downtime time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.runningNode(name)
	if err != nil {
		return err
	}
	p := n.comps[component]
	if p == nil || !p.running() {
		return fmt.Errorf("%s on %s is not running (killed, back after its downtime): %w", component, name, ErrNodeState)
	}
	p.kill()
	s.log.Info("killed", "component", component, "node", name, "downtime", downtime)
	boots := n.boots
	s.after(downtime, func(ctx context.Context) error {
		if n.boots != boots || n.comps[component] != p {
			return nil // powered off or released since: its start brings it up
		}
		s.log.Info("restarting", "component", component, "node", name)
		return s.startComponent(ctx, n, component)
	})
	return nil
}

// killAPIServer kills kube-apiserver and has it started after downtime.
func (s *Supervisor) killAPIServer(downtime time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.cp.proc(ComponentAPIServer)
	if p == nil || !p.running() {
		return fmt.Errorf("kube-apiserver is not running (killed, back after its downtime): %w", ErrNodeState)
	}
	p.kill()
	s.log.Info("killed", "component", ComponentAPIServer, "downtime", downtime)
	s.after(downtime, func(ctx context.Context) error {
		s.log.Info("restarting", "component", ComponentAPIServer)
		return s.cp.startAPIServer(ctx)
	})
	return nil
}

// after runs restart under s.mu once downtime has passed, unless the lab
// is taken down first. A failed restart is logged and recorded in the
// state's Error: the lab is then broken.
func (s *Supervisor) after(downtime time.Duration, restart func(context.Context) error) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		t := time.NewTimer(downtime)
		defer t.Stop()
		select {
		case <-s.bgCtx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.bgCtx.Err() != nil {
			return
		}
		s.procs.forget()
		if err := restart(s.bgCtx); err != nil && s.bgCtx.Err() == nil {
			s.log.Error("restart after a kill", "err", err)
			s.st.Error = "restart after a kill: " + err.Error()
			_ = s.st.write()
		}
	}()
}

// killTerwayd kills the terwayd process of node's terway pod, waiting
// for one to run if need be; the kubelet restarts the container.
func (s *Supervisor) killTerwayd(ctx context.Context, name string) error {
	s.mu.Lock()
	n, err := s.runningNode(name)
	var st NodeState
	if err == nil {
		st = *n.st
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for {
		if pids := processesNamed(cgroupProcs(st.Cgroup), ComponentTerwayd); len(pids) > 0 {
			for _, pid := range pids {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					return fmt.Errorf("kill terwayd (pid %d) on %s: %w", pid, name, err)
				}
			}
			s.log.Info("killed", "component", ComponentTerwayd, "node", name, "pids", pids)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no terwayd ran on %s to kill: %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// processesNamed are the pids whose command name (comm) is name.
func processesNamed(pids []int, name string) []int {
	var out []int
	for _, pid := range pids {
		comm, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == name && processExists(pid) {
			out = append(out, pid)
		}
	}
	return out
}
