package cluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Memory is the resident memory of a running lab, in MiB.
type Memory struct {
	// ControlPlane is per component: etcd, kube-apiserver,
	// kube-controller-manager, kube-scheduler, and the supervisor (which
	// holds fakecloud and the fabric).
	ControlPlane map[string]float64 `json:"controlPlane"`
	// Nodes is per node: every process of the node (containerd, kubelet,
	// kube-proxy, shims, and its pods, terwayd included).
	Nodes map[string]float64 `json:"nodes"`
}

// ControlPlaneTotal sums ControlPlane.
func (m Memory) ControlPlaneTotal() float64 {
	t := 0.0
	for _, v := range m.ControlPlane {
		t += v
	}
	return t
}

// MeasureMemory reads the RSS of the lab's processes from /proc.
func MeasureMemory(st *State) Memory {
	m := Memory{ControlPlane: map[string]float64{}, Nodes: map[string]float64{}}
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if pid, ok := pidFileAlive(filepath.Join(st.Dir, "pids", c+".pid")); ok {
			m.ControlPlane[c] = rssMiB(pid)
			// kube-apiserver runs as a child of the shell that set up its
			// mount namespace; that shell exec'd it, so the pid is the same.
		}
	}
	if st.SupervisorPID > 0 && processExists(st.SupervisorPID) {
		m.ControlPlane["supervisor (fakecloud, fabric)"] = rssMiB(st.SupervisorPID)
	}
	for _, n := range st.Nodes {
		netns := ""
		if fi, err := os.Stat(n.NetNS); err == nil {
			netns = fmt.Sprintf("net:[%d]", inode(fi))
		}
		total := 0.0
		for _, pid := range nodeProcesses(n, netns) {
			total += rssMiB(pid)
		}
		m.Nodes[n.Name] = total
	}
	return m
}

// rssMiB is VmRSS of pid in MiB (0 when gone).
func rssMiB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}
