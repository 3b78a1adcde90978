package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/terway-sim/terway/lab/fabric"
)

// Down takes the lab in dir down and removes everything it left on the
// machine. It is idempotent and works after a crash of the supervisor or
// of down itself: every step starts from what is still there.
func Down(dir string, out io.Writer) error {
	st, err := ReadState(dir)
	if errors.Is(err, ErrNoLab) {
		fmt.Fprintf(out, "no lab in %s\n", dir)
		return removeEmptyRoot(dir)
	}
	if err != nil {
		return err
	}
	if st.SupervisorRunning() {
		fmt.Fprintf(out, "stopping the lab supervisor (pid %d)\n", st.SupervisorPID)
		stopSupervisor(st.SupervisorPID)
	}
	var errs []error
	nodes := slices.Concat(st.Nodes, st.Released)
	for _, n := range nodes {
		if err := sweepNode(n); err != nil {
			errs = append(errs, err)
		}
	}
	killPidFiles(filepath.Join(dir, "pids"))
	if st.FabricName != "" {
		if err := fabric.Cleanup(st.FabricName, st.NetNSDir); err != nil {
			errs = append(errs, fmt.Errorf("remove the fabric's namespaces: %w", err))
		}
	}
	for _, n := range nodes {
		if err := removeCgroup(n.Cgroup); err != nil {
			errs = append(errs, err)
		}
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeCreatedDirs(st.CreatedDirs); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab %s down, with leftovers (run down again): %w", st.Name, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove lab dir: %w", err)
	}
	fmt.Fprintf(out, "lab %s is down\n", st.Name)
	return removeEmptyRoot(dir)
}

// SupervisorRunning reports whether the lab's supervisor still runs: the
// recorded pid is alive and runs terway-lab (a pid number alone may have
// been reused since).
func (s *State) SupervisorRunning() bool {
	pid := s.SupervisorPID
	if pid <= 0 || !processExists(pid) {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && strings.Contains(filepath.Base(exe), "terway-lab")
}

// stopSupervisor asks the supervisor to take the lab down and waits; it
// stops nodes and the control plane in order, which is gentler than the
// sweep that follows.
func stopSupervisor(pid int) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) && processExists(pid) {
		time.Sleep(100 * time.Millisecond)
	}
	if processExists(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// killPidFiles stops every process of the lab that still runs.
func killPidFiles(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if pid, ok := pidFileAlive(filepath.Join(dir, e.Name())); ok {
			killPid(pid, 2*time.Second)
		}
	}
}

// unmountUnder lazily unmounts whatever is still mounted below dir in the
// machine's mount namespace, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && strings.HasPrefix(fields[1], dir+"/") {
			mounts = append(mounts, fields[1])
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	var errs []error
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// removeEmptyRoot removes the default state root once no lab is left in
// it, so that a machine looks as before the first up.
func removeEmptyRoot(dir string) error {
	root := filepath.Dir(dir)
	if root != DefaultStateRoot {
		return nil
	}
	if err := os.Remove(root); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return err
	}
	return nil
}
