package prereq

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Group is a set of prerequisites that Options.Groups can select.
type Group string

// The groups, in the order Ensure handles them.
const (
	// Kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler,
	// kubelet, kube-proxy and kubectl (about 12 minutes on a cold cache).
	Kubernetes Group = "kubernetes"
	// Etcd: the etcd server.
	Etcd Group = "etcd"
	// Runtime: containerd, containerd-shim-runc-v2, ctr, runc and crictl.
	Runtime Group = "runtime"
	// Terway: terwayd, terway, terway-cli, pause and the three images.
	Terway Group = "terway"
)

// AllGroups lists every group; Ensure builds them when Options.Groups is
// empty.
var AllGroups = []Group{Kubernetes, Etcd, Runtime, Terway}

// Options configure Ensure.
type Options struct {
	// RepoDir is the repository root: the main module, holding
	// lab/prereq/kube and lab/prereq/etcd. Empty means the nearest
	// directory at or above the working directory that holds them.
	RepoDir string
	// CacheDir holds binaries, images and stamps; empty means
	// <RepoDir>/.lab/cache.
	CacheDir string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Apt installs missing Debian packages with apt-get (as root).
	// Without it a missing package is an error that names the command.
	Apt bool
	// Groups limits the work to these groups; empty means AllGroups.
	// Tests build Terway alone, skipping the long third-party builds.
	Groups []Group
	// Busybox is the static busybox for the test image; empty means
	// /bin/busybox from Debian's busybox-static, which then is a required
	// package.
	Busybox string
}

// Toolset is what Ensure made: absolute paths into the cache.
type Toolset struct {
	// BinDir holds every binary of the selected groups.
	BinDir string
	// ImagesDir holds the image archives.
	ImagesDir string
	// TerwayImage is the reference of the terway image,
	// lab.local/terway:<hash of its binaries>; empty unless the Terway
	// group was built.
	TerwayImage string
	// Images are the archives to import into every node's containerd
	// (`ctr -n k8s.io images import`): pause, busybox, terway.
	Images []string
}

// Bin returns the path of the binary name in the cache.
func (t *Toolset) Bin(name string) string { return filepath.Join(t.BinDir, name) }

// resolve fills defaults and makes paths absolute.
func (o Options) resolve() (Options, error) {
	if o.RepoDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, fmt.Errorf("find repository: %w", err)
		}
		if o.RepoDir, err = FindRepo(wd); err != nil {
			return o, err
		}
	}
	var err error
	if o.RepoDir, err = filepath.Abs(o.RepoDir); err != nil {
		return o, fmt.Errorf("repository dir: %w", err)
	}
	if _, err := os.Stat(filepath.Join(o.RepoDir, "lab", "prereq", "kube", "go.mod")); err != nil {
		return o, fmt.Errorf("%s is not the project's source tree: %w", o.RepoDir, err)
	}
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(o.RepoDir, ".lab", "cache")
	}
	if o.CacheDir, err = filepath.Abs(o.CacheDir); err != nil {
		return o, fmt.Errorf("cache dir: %w", err)
	}
	if o.Busybox != "" {
		if o.Busybox, err = filepath.Abs(o.Busybox); err != nil {
			return o, fmt.Errorf("busybox: %w", err)
		}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if len(o.Groups) == 0 {
		o.Groups = AllGroups
	}
	for _, g := range o.Groups {
		if !slices.Contains(AllGroups, g) {
			return o, fmt.Errorf("unknown prerequisite group %q (want one of %v)", g, AllGroups)
		}
	}
	return o, nil
}

func (o Options) wants(g Group) bool { return slices.Contains(o.Groups, g) }

// FindRepo walks up from dir to the project's source tree: the directory
// holding the nested modules.
func FindRepo(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find repository: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "lab", "prereq", "kube", "go.mod")); err == nil {
			return d, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("find repository: %w", err)
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("find repository: no directory at or above %s holds lab/prereq/kube/go.mod; set RepoDir", dir)
		}
	}
}
