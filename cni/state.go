package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/terway-sim/terway/cni/datapath"
)

// stateVersion is the schema of the state files; a file of another
// version is refused rather than misread.
const stateVersion = 1

// attachment is the state file of one pod interface: what DEL and GC need
// to undo it without the daemon, and what CHECK compares against.
type attachment struct {
	Version     int            `json:"version"`
	ContainerID string         `json:"containerID"`
	IfName      string         `json:"ifName"`
	Pod         PodID          `json:"pod"`
	IPType      string         `json:"ipType"`
	CreatedAt   time.Time      `json:"createdAt"`
	Spec        *datapath.Spec `json:"spec"`
}

// stateStore is the state directory: one <containerID>-<ifname>.json per
// attachment, plus the lock files.
type stateStore struct {
	dir string
}

// errNoState means the attachment has no state file.
var errNoState = errors.New("no state file")

func (s stateStore) path(containerID, ifName string) string {
	return filepath.Join(s.dir, containerID+"-"+ifName+".json")
}

// ensureDir creates the state directory, private to root.
func (s stateStore) ensureDir() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create state dir %s: %w", s.dir, err)
	}
	return nil
}

// save writes the attachment's state file atomically: a temp file in the
// same directory, fsynced, renamed over the old one, then the directory
// fsynced, so a crash leaves the old file or the new one, never a torn
// one.
func (s stateStore) save(a *attachment) error {
	if err := s.ensureDir(); err != nil {
		return err
	}
	a.Version = stateVersion
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state of %s/%s: %w", a.ContainerID, a.IfName, err)
	}
	// Not fsynced: a state file describes kernel objects (links, rules,
	// routes) that do not outlive the node's crash either, and a file
	// that a crash truncates is treated as unreadable (DEL falls back to
	// the daemon's record). A process crash loses nothing without fsync.
	if err := writeFileAtomic(s.path(a.ContainerID, a.IfName), data, 0o600, false); err != nil {
		return fmt.Errorf("write state of %s/%s: %w", a.ContainerID, a.IfName, err)
	}
	return nil
}

// load reads an attachment's state; errNoState when there is none.
func (s stateStore) load(containerID, ifName string) (*attachment, error) {
	a, err := readState(s.path(containerID, ifName))
	if err != nil {
		return nil, err
	}
	// Container IDs and interface names may contain "-": two attachments
	// could share a file name, so the content decides.
	if a.ContainerID != containerID || a.IfName != ifName {
		return nil, fmt.Errorf("state file %s belongs to %s/%s: %w", s.path(containerID, ifName), a.ContainerID, a.IfName, errNoState)
	}
	return a, nil
}

func readState(path string) (*attachment, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoState
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	a := &attachment{}
	if err := json.Unmarshal(data, a); err != nil {
		return nil, fmt.Errorf("decode state file %s: %w", path, err)
	}
	if a.Version != stateVersion {
		return nil, fmt.Errorf("state file %s has schema version %d, this plugin reads %d", path, a.Version, stateVersion)
	}
	if a.Spec == nil || a.ContainerID == "" || a.IfName == "" {
		return nil, fmt.Errorf("state file %s: incomplete", path)
	}
	return a, nil
}

// remove deletes an attachment's state file; a missing one is fine.
func (s stateStore) remove(containerID, ifName string) error {
	if err := os.Remove(s.path(containerID, ifName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove state of %s/%s: %w", containerID, ifName, err)
	}
	return nil
}

// list reads every state file. Files that do not decode are returned as
// errors next to the good ones, so one bad file does not hide the rest.
func (s stateStore) list() ([]*attachment, []error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("list state dir: %w", err)}
	}
	var atts []*attachment
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		a, err := readState(filepath.Join(s.dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		atts = append(atts, a)
	}
	return atts, errs
}

// tempPrefix starts the names of temp files written by writeFileAtomic.
const tempPrefix = ".tmp-"

// removeStaleTemps deletes temp files a crashed invocation left behind.
func (s stateStore) removeStaleTemps(olderThan time.Duration) {
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > olderThan {
			_ = os.Remove(filepath.Join(s.dir, e.Name()))
		}
	}
}

// writeFileAtomic replaces path with data: temp file in the same
// directory, chmod, rename; durable adds an fsync of the file before the
// rename and of the directory after it.
func writeFileAtomic(path string, data []byte, mode os.FileMode, durable bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if durable {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
