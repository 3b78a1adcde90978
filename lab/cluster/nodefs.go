package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nodePaths are the machine's standard paths that each node sees as its
// own: inside the node's mount namespace each is a bind mount of
// Root+path. The DaemonSet's hostPath volumes, containerd's and the
// kubelet's defaults therefore work unchanged, and nothing a node writes
// there reaches the machine or another node.
var nodePaths = []string{
	"/etc/cni/net.d", "/opt/cni/bin", "/var/lib/cni", "/run/eni", "/etc/eni",
	"/run/containerd", "/var/lib/containerd", "/var/lib/kubelet", "/run/netns",
	"/var/log/pods", "/var/log/containers",
	// containerd's own defaults: its NRI socket and its "opt" directory.
	"/run/nri", "/opt/containerd",
}

// kubeletSysctls are the kernel settings the kubelet insists on. They are
// not per network namespace, so a kubelet would change them for the whole
// machine. Inside a node's mount namespace each is a bind mount of a file
// holding the value the kubelet expects, so it reads that and writes
// nothing.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// ensureMountpoints creates the machine-side mount points of nodePaths
// and returns the directories it had to create, outermost first, so that
// down can remove exactly those.
func ensureMountpoints() ([]string, error) {
	var created []string
	for _, p := range nodePaths {
		var missing []string
		for d := p; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil {
				break
			} else if !errors.Is(err, os.ErrNotExist) {
				return created, err
			}
			missing = append(missing, d)
		}
		for i := len(missing) - 1; i >= 0; i-- {
			if err := os.Mkdir(missing[i], 0o755); err != nil {
				return created, fmt.Errorf("create mount point %s: %w", missing[i], err)
			}
			created = append(created, missing[i])
		}
	}
	return created, nil
}

// removeCreatedDirs removes directories ensureMountpoints created, deepest
// first, and only while they are empty: anything else put there since
// is not the lab's to delete.
func removeCreatedDirs(dirs []string) error {
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// bindMount is one bind mount of a node's mount namespace.
type bindMount struct{ src, dst string }

// nodeBinds are the bind mounts that make a node's mount namespace: its
// private copies of nodePaths, and the stand-ins for the kubelet's
// machine-wide sysctls.
func nodeBinds(n NodeState, sysctlDir string) []bindMount {
	var b []bindMount
	for _, p := range nodePaths {
		b = append(b, bindMount{src: n.HostPath(p), dst: p})
	}
	for k := range kubeletSysctls {
		b = append(b, bindMount{src: filepath.Join(sysctlDir, strings.ReplaceAll(k, "/", ".")), dst: "/proc/sys/" + k})
	}
	return b
}

// holderScript sets up a mount namespace and then keeps it alive.
// unshare --propagation private has already made every mount private, so
// nothing below propagates back to the machine.
func holderScript(binds []bindMount, ready string) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, m := range binds {
		fmt.Fprintf(&b, "mount --bind %q %q\n", m.src, m.dst)
	}
	// Shared again, but only among the node's own mounts: containers with
	// HostToContainer or Bidirectional propagation (terwayd's view of
	// /var/run/netns, the kubelet's volumes) need a shared root.
	b.WriteString("mount --make-rshared /\n")
	fmt.Fprintf(&b, "touch %q\nexec sleep infinity\n", ready)
	return b.String()
}

// prepareNodeDirs creates the node's private copies of nodePaths and the
// files that stand in for the kubelet's sysctls.
func prepareNodeDirs(n NodeState, sysctlDir string) error {
	for _, p := range nodePaths {
		if err := os.MkdirAll(n.HostPath(p), 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(sysctlDir, 0o700); err != nil {
		return err
	}
	for k, v := range kubeletSysctls {
		f := filepath.Join(sysctlDir, strings.ReplaceAll(k, "/", "."))
		if err := os.WriteFile(f, []byte(v+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}
