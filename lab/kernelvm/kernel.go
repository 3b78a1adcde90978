// Package kernelvm runs programs under a real Debian kernel in a qemu VM:
// the kernel this machine runs lacks ipvlan, 802.1Q and dummy links, and
// the datapaths that need them are proven in the VM instead: make
// test-kernel runs cni/datapath's tests and benchmark and lab/e2e's IPVlan
// tests there (vm_test.go), test binaries and the plugin built on the host
// and shared with the VM, where a skipped test is a failure.
//
// The kernel package is fetched with apt-get download and unpacked with
// dpkg-deb -x into a cache directory, never installed. The initramfs
// holds a small init (package vminit), the modules the datapaths and the
// fabric use with everything they depend on (read from each module's
// .modinfo, as depmod does), and the command to run; the host's
// directories a command needs are shared read-only over 9p. qemu runs in
// TCG mode: there is no /dev/kvm here.
package kernelvm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Kernel is an unpacked Debian kernel package.
type Kernel struct {
	// Release is the kernel's release ("6.1.0-57-amd64").
	Release string
	// Image is the vmlinuz file.
	Image string
	// ModulesDir is lib/modules/<release>.
	ModulesDir string
}

var releaseRE = regexp.MustCompile(`linux-image-([0-9][^ ]*-amd64)\b`)

// DefaultRelease is the release Debian's linux-image-amd64 depends on now.
func DefaultRelease(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", "linux-image-amd64").Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache depends linux-image-amd64: %w", err)
	}
	m := releaseRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("apt-cache depends linux-image-amd64 names no kernel:\n%s", out)
	}
	return string(m[1]), nil
}

// Fetch returns the kernel of release unpacked under cacheDir, fetching
// and unpacking it first when it is not there.
func Fetch(ctx context.Context, cacheDir, release string) (*Kernel, error) {
	root := filepath.Join(cacheDir, "kernel-"+release)
	k := &Kernel{Release: release, Image: filepath.Join(root, "boot", "vmlinuz-"+release),
		ModulesDir: filepath.Join(root, "lib", "modules", release)}
	if _, err := os.Stat(k.Image); err == nil {
		return k, nil
	}
	dl, err := os.MkdirTemp(cacheDir, "download-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dl)
	pkg := "linux-image-" + release
	cmd := exec.CommandContext(ctx, "apt-get", "download", pkg)
	cmd.Dir = dl
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("apt-get download %s: %w\n%s", pkg, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dl, pkg+"_*.deb"))
	if len(debs) != 1 {
		return nil, fmt.Errorf("apt-get download %s: want one package, got %v", pkg, debs)
	}
	tmp := root + ".tmp"
	_ = os.RemoveAll(tmp)
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], tmp).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("dpkg-deb -x %s: %w\n%s", debs[0], err, out)
	}
	if err := os.Rename(tmp, root); err != nil {
		return nil, err
	}
	if _, err := os.Stat(k.Image); err != nil {
		return nil, fmt.Errorf("kernel package %s: %w", pkg, err)
	}
	return k, nil
}

// builtins are the modules built into the kernel (modules.builtin).
func (k *Kernel) builtins() (map[string]bool, error) {
	data, err := os.ReadFile(filepath.Join(k.ModulesDir, "modules.builtin"))
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out[moduleName(l)] = true
		}
	}
	return out, sc.Err()
}

// Modules returns the files of roots and their dependencies, in load order.
func (k *Kernel) Modules(roots []string) ([]string, error) {
	idx, err := moduleIndex(k.ModulesDir)
	if err != nil {
		return nil, err
	}
	if len(idx) == 0 {
		// Newer Debian kernels compress their modules (.ko.xz), whose
		// .modinfo this harness does not read.
		return nil, fmt.Errorf("kernel %s: no uncompressed modules (.ko) in %s", k.Release, k.ModulesDir)
	}
	bi, err := k.builtins()
	if err != nil {
		return nil, err
	}
	return resolveModules(idx, bi, roots)
}
