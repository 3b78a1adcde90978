package hostcheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// takeNetNSFiles records each file of the namespace directories and the
// namespace bound to it. Directories that resolve to one already listed
// (/var/run is usually a link to /run) are read once.
func (s *Snapshot) takeNetNSFiles(dirs []string) error {
	s.NetNSFiles = map[string]string{}
	seen := map[string]bool{}
	for _, dir := range dirs {
		real, err := filepath.EvalSymlinks(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("resolve %s: %w", dir, err)
		}
		if seen[real] {
			continue
		}
		seen[real] = true
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			s.NetNSFiles[path] = describeNSFile(path)
		}
	}
	return nil
}

// describeNSFile says what is bound to a namespace file: "net:[inode]"
// for a mounted namespace, otherwise what the file is.
func describeNSFile(path string) string {
	var fs unix.Statfs_t
	var st unix.Stat_t
	if err := unix.Statfs(path, &fs); err != nil {
		return fmt.Sprintf("unreadable: %v", err)
	}
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Sprintf("unreadable: %v", err)
	}
	if fs.Type == unix.NSFS_MAGIC {
		return fmt.Sprintf("net:[%d]", st.Ino)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return "directory"
	}
	return "file, no namespace bound"
}
