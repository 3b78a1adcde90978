package hostcheck

import (
	"fmt"
	"io/fs"
	"path/filepath"
)

// takeCgroups lists the directories (cgroups) of every hierarchy mounted
// under root: the lab gives each node its own cgroup root, and kubelet
// and containerd create cgroups below it in every hierarchy.
func (s *Snapshot) takeCgroups(root string, mounts []mountLine) error {
	s.Cgroups = map[string][]string{}
	hierarchies := cgroupHierarchies(root, mounts)
	if len(hierarchies) == 0 {
		s.note("cgroups: no cgroup file system mounted under %s", root)
	}
	for _, point := range hierarchies {
		name, err := filepath.Rel(filepath.Clean(root), point)
		if err != nil {
			return fmt.Errorf("cgroup hierarchy %s: %w", point, err)
		}
		dirs, err := listDirs(point)
		if err != nil {
			return fmt.Errorf("cgroup hierarchy %s: %w", point, err)
		}
		s.Cgroups[name] = dirs
	}
	return nil
}

// listDirs returns the directories below top, relative to it, in walk
// (lexical) order. Directories removed during the walk are skipped.
func listDirs(top string) ([]string, error) {
	dirs := []string{}
	err := walkBelow(top, func(path string, d fs.DirEntry) error {
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(top, path)
		if err != nil {
			return err
		}
		dirs = append(dirs, rel)
		return nil
	})
	return dirs, err
}
