package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/internal/testwait"
)

// startTestHolder starts a mount-namespace holder with binds and returns
// its pid; it is killed when the test ends.
func startTestHolder(t *testing.T, binds []bindMount) int {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", holderScript(binds, ready))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testwait.For(t, 10*time.Second, "the holder ready", func() error {
		_, err := os.Stat(ready)
		return err
	})
	return cmd.Process.Pid
}

// inHolder runs a shell command in the holder's mount namespace.
func inHolder(t *testing.T, pid int, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nsenter", "--target", strconv.Itoa(pid), "--mount", "--", "/bin/sh", "-c", script).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestNodeMountNamespaceIsolation is the spike of issue 5: a file written
// through a node's view of a machine path is invisible on another node and
// on the machine, and the bind mounts never show in the machine's mount
// table.
func TestNodeMountNamespaceIsolation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount namespaces")
	}
	machine := filepath.Join(t.TempDir(), "machine-path") // stands in for, say, /etc/cni/net.d
	if err := os.Mkdir(machine, 0o755); err != nil {
		t.Fatal(err)
	}
	rootA, rootB := t.TempDir(), t.TempDir()
	a := startTestHolder(t, []bindMount{{src: rootA, dst: machine}})
	b := startTestHolder(t, []bindMount{{src: rootB, dst: machine}})

	if out, err := inHolder(t, a, "echo from-a > "+machine+"/10-terway.conflist"); err != nil {
		t.Fatalf("write on node A: %v: %s", err, out)
	}
	if out, err := inHolder(t, a, "cat "+machine+"/10-terway.conflist"); err != nil || out != "from-a" {
		t.Fatalf("node A reads back %q, %v", out, err)
	}
	if out, err := inHolder(t, b, "ls -A "+machine); err != nil || out != "" {
		t.Errorf("node B sees %q (%v), want an empty directory", out, err)
	}
	if entries, _ := os.ReadDir(machine); len(entries) != 0 {
		t.Errorf("the machine sees %d entries in %s, want none", len(entries), machine)
	}
	if data, err := os.ReadFile(filepath.Join(rootA, "10-terway.conflist")); err != nil || strings.TrimSpace(string(data)) != "from-a" {
		t.Errorf("node A's file is not in its root dir: %q %v", data, err)
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), machine) {
		t.Errorf("a node's bind mount leaked into the machine's mount table")
	}
}

// TestSysctlStandIns checks that a node's kubelet reads the values it
// wants from the stand-in files, and that writing them leaves the
// machine's setting alone.
func TestSysctlStandIns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount namespaces")
	}
	n := NodeState{Root: t.TempDir()}
	dir := filepath.Join(t.TempDir(), "sysctl")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := prepareNodeDirs(n, dir); err != nil {
		t.Fatal(err)
	}
	var binds []bindMount
	for _, m := range nodeBinds(n, dir) {
		if strings.HasPrefix(m.dst, "/proc/sys/") {
			binds = append(binds, m)
		}
	}
	before, err := os.ReadFile("/proc/sys/kernel/panic")
	if err != nil {
		t.Fatal(err)
	}
	pid := startTestHolder(t, binds)
	if out, err := inHolder(t, pid, "cat /proc/sys/kernel/panic"); err != nil || out != "10" {
		t.Fatalf("node reads kernel.panic %q (%v), want the kubelet's 10", out, err)
	}
	if out, err := inHolder(t, pid, "echo 10 > /proc/sys/kernel/panic"); err != nil {
		t.Fatalf("write through the stand-in: %v: %s", err, out)
	}
	after, err := os.ReadFile("/proc/sys/kernel/panic")
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("machine's kernel.panic changed from %q to %q", before, after)
	}
}
