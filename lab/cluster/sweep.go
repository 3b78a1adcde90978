package cluster

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// sweepNode kills every process that belongs to a node: those in its
// cgroup tree (pods), in its network namespace (kubelet, containerd,
// shims) or in its mount namespace. When they are gone, so are the
// node's mount namespace and every mount in it (pod network namespaces,
// overlays, the kubelet's tmpfs volumes).
func sweepNode(n NodeState) error {
	netns := ""
	if fi, err := os.Stat(n.NetNS); err == nil {
		netns = fmt.Sprintf("net:[%d]", inode(fi))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		pids := nodeProcesses(n, netns)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: processes %v survive SIGKILL", n.Name, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// inode is the inode number of a file (a namespace's identity).
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// nodeProcesses lists the live processes of node n (never this one).
func nodeProcesses(n NodeState, netns string) []int {
	self := os.Getpid()
	seen := map[int]bool{}
	var out []int
	add := func(pid int) {
		if pid != self && !seen[pid] && processExists(pid) {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	for _, pid := range cgroupProcs(n.Cgroup) {
		add(pid)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if netns != "" {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); l == netns {
				add(pid)
				continue
			}
		}
		if n.MountNS != "" {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); l == n.MountNS {
				add(pid)
			}
		}
	}
	return out
}
