package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// maxEntries bounds a listing: a host with its own containerd can hold
// hundreds of thousands of files in /var/lib/containerd.
const maxEntries = 100000

// PathState is a watched path and what is in it.
type PathState struct {
	Exists bool `json:"exists"`
	// Kind describes the path itself, as the entries are described.
	Kind string `json:"kind,omitempty"`
	// Entries maps a relative path to its description: "dir", "file
	// <size>", "symlink -> <target>", "socket", "fifo", "device".
	Entries map[string]string `json:"entries,omitempty"`
	// Truncated is set when the listing stopped at maxEntries.
	Truncated bool `json:"truncated,omitempty"`
}

// takePaths lists each path without following symlinks; directory sizes
// are left out (they grow and never shrink on most file systems).
func (s *Snapshot) takePaths(paths []string) error {
	s.Paths = map[string]PathState{}
	for _, p := range paths {
		st, err := listPath(p)
		if err != nil {
			return fmt.Errorf("list %s: %w", p, err)
		}
		if st.Truncated {
			s.note("paths: listing of %s stopped at %d entries", p, maxEntries)
		}
		s.Paths[p] = st
	}
	return nil
}

func listPath(top string) (PathState, error) {
	info, err := os.Lstat(top)
	if errors.Is(err, fs.ErrNotExist) {
		return PathState{}, nil
	}
	if err != nil {
		return PathState{}, err
	}
	st := PathState{Exists: true, Kind: describeEntry(top, info)}
	if !info.IsDir() {
		return st, nil
	}
	st.Entries = map[string]string{}
	errFull := errors.New("listing full")
	err = walkBelow(top, func(path string, d fs.DirEntry) error {
		if len(st.Entries) >= maxEntries {
			st.Truncated = true
			return errFull
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(top, path)
		if err != nil {
			return err
		}
		st.Entries[rel] = describeEntry(path, info)
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return PathState{}, err
	}
	return st, nil
}

// walkBelow calls fn, as filepath.WalkDir would, for every entry below
// top but not for top itself. Entries removed during the walk are
// skipped: the host changes while a snapshot is taken.
func walkBelow(top string, fn func(path string, d fs.DirEntry) error) error {
	return filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if path == top {
			return nil
		}
		return fn(path, d)
	})
}

func describeEntry(path string, info fs.FileInfo) string {
	switch m := info.Mode(); {
	case m.IsDir():
		return "dir"
	case m.IsRegular():
		return fmt.Sprintf("file %d", info.Size())
	case m&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return "symlink -> " + target
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "other"
	}
}
