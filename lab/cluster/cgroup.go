package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// cgroupFS is where the machine mounts its cgroup hierarchies.
const cgroupFS = "/sys/fs/cgroup"

// cgroupPrefix starts the name of every node's cgroup root, the same in
// every hierarchy: "terway-lab.<node>".
const cgroupPrefix = "terway-lab."

// nodeCgroup is the cgroup root of the node called name.
func nodeCgroup(name string) string { return cgroupPrefix + name }

// IsLabCgroup reports whether rel, a cgroup's path below its hierarchy,
// lies in a lab node's tree: what a machine comparison after down judges,
// since only those trees are the lab's to create and remove.
func IsLabCgroup(rel string) bool {
	top, _, _ := strings.Cut(rel, "/")
	return strings.HasPrefix(top, cgroupPrefix)
}

// cgroupHierarchies lists the mounted hierarchies (cgroup v1 controllers,
// or the single v2 root).
func cgroupHierarchies() ([]string, error) {
	if _, err := os.Stat(filepath.Join(cgroupFS, "cgroup.controllers")); err == nil {
		return []string{cgroupFS}, nil
	}
	entries, err := os.ReadDir(cgroupFS)
	if err != nil {
		return nil, fmt.Errorf("list cgroup hierarchies: %w", err)
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range entries {
		p := filepath.Join(cgroupFS, e.Name())
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			continue
		}
		if fi, err := os.Stat(real); err == nil && fi.IsDir() {
			seen[real] = true
			out = append(out, real)
		}
	}
	return out, nil
}

// createCgroup makes the node's cgroup root in every hierarchy: the
// kubelet refuses a cgroupRoot missing from any of them. A new v1 cpuset
// starts with no CPUs or memory nodes, so those are copied from the parent.
func createCgroup(name string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		d := filepath.Join(h, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil && filepath.Base(h) == "cpuset" {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("set %s of %s: %w", f, d, err)
				}
			}
		}
	}
	return nil
}

// cgroupProcs lists the processes in the node's cgroup tree.
func cgroupProcs(name string) []int {
	hs, _ := cgroupHierarchies()
	seen := map[int]bool{}
	var out []int
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, name), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// removeCgroup removes the node's cgroup tree, deepest directories first;
// cgroup directories can only be removed empty of processes and children.
func removeCgroup(name string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, name), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}
