package hostcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// mountLine is one line of /proc/mounts.
type mountLine struct {
	source, point, fstype, options string
}

// takeMounts records the mount table of the process's mount namespace and
// the directories of the cgroup hierarchies found in it.
func (s *Snapshot) takeMounts(cgroupRoot string) error {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return fmt.Errorf("read mounts: %w", err)
	}
	mounts := parseMounts(string(b))
	s.Mounts = map[string]int{}
	for _, m := range mounts {
		s.Mounts[strings.Join([]string{m.point, m.fstype, m.source, m.options}, " ")]++
	}
	return s.takeCgroups(cgroupRoot, mounts)
}

// parseMounts reads /proc/mounts lines; paths keep the kernel's octal
// escapes (\040 for a space), which is fine for comparing.
func parseMounts(text string) []mountLine {
	var out []mountLine
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		out = append(out, mountLine{source: f[0], point: f[1], fstype: f[2], options: f[3]})
	}
	return out
}

// cgroupHierarchies returns the mount points of cgroup (v1) and cgroup2
// file systems at or below root, each once.
func cgroupHierarchies(root string, mounts []mountLine) []string {
	root = filepath.Clean(root)
	seen := map[string]bool{}
	var out []string
	for _, m := range mounts {
		if m.fstype != "cgroup" && m.fstype != "cgroup2" {
			continue
		}
		if m.point != root && !strings.HasPrefix(m.point, root+"/") || seen[m.point] {
			continue
		}
		seen[m.point] = true
		out = append(out, m.point)
	}
	return out
}
