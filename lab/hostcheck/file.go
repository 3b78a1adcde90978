package hostcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Save writes the snapshot as JSON, replacing path atomically. The file is
// private (0600): command lines may carry credentials.
func (s *Snapshot) Save(path string) error {
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save snapshot %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write snapshot %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write snapshot %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save snapshot %s: %w", path, err)
	}
	return nil
}

// Load reads a snapshot written by Save, refusing another format version.
func Load(path string) (*Snapshot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode snapshot %s: %w", path, err)
	}
	if s.Version != formatVersion {
		return nil, fmt.Errorf("snapshot %s has format version %d, this program reads %d", path, s.Version, formatVersion)
	}
	return &s, nil
}
