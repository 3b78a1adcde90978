package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/terway-sim/terway/daemon/mode"
)

// Phases of a lab, as recorded in its state file.
const (
	PhaseStarting = "starting"
	PhaseReady    = "ready"
	PhaseFailed   = "failed"
	PhaseStopping = "stopping"
)

// DefaultStateRoot is where labs keep their state, one directory per lab
// name. down removes a lab's directory, and the root too when it is empty.
const DefaultStateRoot = "/var/lib/terway-lab"

// State describes a lab: what terway-lab status, env, audit and down
// read, and what the supervisor writes as the lab comes up. The file holds
// credentials of the emulated cloud, so it is readable by root only.
type State struct {
	Name  string    `json:"name"`
	Mode  mode.Mode `json:"mode"`
	Phase string    `json:"phase"`
	// Error says why a failed lab failed.
	Error string `json:"error,omitempty"`
	// Progress is the last step the supervisor started.
	Progress      string `json:"progress,omitempty"`
	Dir           string `json:"dir"`
	SupervisorPID int    `json:"supervisorPid"`
	Kubeconfig    string `json:"kubeconfig"`
	APIServer     string `json:"apiServer"`
	// FakecloudURL serves the ECS/VPC API and, with AdminToken as bearer
	// token, fakecloud's admin API, on the host's loopback.
	FakecloudURL    string `json:"fakecloudUrl"`
	AdminToken      string `json:"adminToken"`
	AccessKeyID     string `json:"accessKeyId"`
	AccessKeySecret string `json:"accessKeySecret"`
	// OperatorAccessKeyID and OperatorAccessKeySecret are a second
	// AccessKey of the account, for what an operator does out of band
	// through the ordinary API (the chaos engine's operator), so that
	// the cloud's accounting tells it apart from the lab's own calls.
	OperatorAccessKeyID     string `json:"operatorAccessKeyId,omitempty"`
	OperatorAccessKeySecret string `json:"operatorAccessKeySecret,omitempty"`
	Region                  string `json:"region"`
	VPCID                   string `json:"vpcId"`
	// FabricName names the fabric's network namespaces (lab.Cleanup).
	FabricName string `json:"fabricName"`
	NetNSDir   string `json:"netnsDir"`
	// Nodes are the lab's nodes, stopped ones included.
	Nodes []NodeState `json:"nodes"`
	// Released are nodes whose instance was released (node release or
	// remove): gone from the cloud and the cluster. down still sweeps
	// what a release cut short could have left of them.
	Released []NodeState `json:"released,omitempty"`
	// CreatedDirs are directories the lab created on the machine (mount
	// points for the nodes' bind mounts); down removes them, deepest first.
	CreatedDirs []string  `json:"createdDirs,omitempty"`
	Started     time.Time `json:"started"`
	// UpSeconds is how long up took, from start to Ready.
	UpSeconds float64 `json:"upSeconds,omitempty"`
}

// NodeState is one Kubernetes node of the lab: an emulated ECS instance
// whose network namespace and mount namespace run containerd, kubelet
// and kube-proxy.
type NodeState struct {
	Name         string `json:"name"`
	InstanceID   string `json:"instanceId"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	PrimaryIP    string `json:"primaryIp"`
	NetNS        string `json:"netns"`
	// Root is the host directory under which the node's standard paths
	// (/etc/cni/net.d, /var/lib/kubelet, ...) live: node path P is Root+P.
	Root string `json:"root"`
	// Cgroup is the node's cgroup root, the same name in every hierarchy.
	Cgroup string `json:"cgroup"`
	// HolderPID keeps the node's mount namespace alive.
	HolderPID int `json:"holderPid,omitempty"`
	// MountNS identifies the node's mount namespace ("mnt:[inode]"), so
	// that down finds its processes even after the holder died.
	MountNS string `json:"mountNs,omitempty"`
	// KubeletAddr is the host loopback address relayed to the kubelet.
	KubeletAddr string `json:"kubeletAddr"`
	MaxPods     int    `json:"maxPods"`
	// Status is NodeRunning ("" in older state files reads the same) or
	// NodeStopped.
	Status string `json:"status,omitempty"`
}

// Node statuses, as NodeState.Status records them.
const (
	NodeRunning  = "running"
	NodeStopped  = "stopped"
	NodeReleased = "released"
)

// Running reports whether the node's instance runs.
func (n NodeState) Running() bool { return n.Status == "" || n.Status == NodeRunning }

// Node returns the lab's node called name, released ones too.
func (s *State) Node(name string) (NodeState, bool) {
	for _, list := range [][]NodeState{s.Nodes, s.Released} {
		for _, n := range list {
			if n.Name == name {
				return n, true
			}
		}
	}
	return NodeState{}, false
}

// ControlSocket is the supervisor's control socket in the lab's
// directory (see Control).
func (s *State) ControlSocket() string { return ControlSocketPath(s.Dir) }

// HostPath is where node path p lives on the machine.
func (n NodeState) HostPath(p string) string { return filepath.Join(n.Root, p) }

// ContainerdSocket is the node's containerd socket as seen from the host.
func (n NodeState) ContainerdSocket() string {
	return n.HostPath("/run/containerd/containerd.sock")
}

// StatePath is the state file of the lab in dir.
func StatePath(dir string) string { return filepath.Join(dir, "lab.json") }

// ErrNoLab means no lab state exists in the directory.
var ErrNoLab = errors.New("no lab here")

// ReadState reads the state of the lab in dir.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(StatePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", dir, ErrNoLab)
	}
	if err != nil {
		return nil, fmt.Errorf("read lab state: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parse lab state %s: %w", StatePath(dir), err)
	}
	return &s, nil
}

// write replaces the state file atomically, so a reader never sees half.
func (s *State) write() error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := StatePath(s.Dir) + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write lab state: %w", err)
	}
	return os.Rename(tmp, StatePath(s.Dir))
}
