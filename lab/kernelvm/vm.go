package kernelvm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cavaliergopher/cpio"
)

// exitMarker is what vminit prints before the command's exit status.
const exitMarker = "KERNELVM-EXIT "

// Config is one run of a command in a VM.
type Config struct {
	Kernel *Kernel
	// Modules are the module names to load, with their dependencies.
	Modules []string
	// Command is the argv to run in the VM; host files are under /host.
	Command []string
	// Env is the command's environment.
	Env []string
	// Programs are host executables the command runs (ip, nsenter): each
	// goes into the VM at its own path with the shared libraries ldd
	// names for it.
	Programs []string
	// Share is the host directory mounted read-only at /host.
	Share string
	// WorkDir receives the init binary and the initramfs.
	WorkDir string
	// MemoryMiB is the guest's memory (default 2048).
	MemoryMiB int
	// Console receives the VM's console as it comes (nil: discarded).
	Console io.Writer
}

// ErrNoExit is a VM that ended without the command's exit status: a
// kernel panic, an init that failed, a timeout.
var ErrNoExit = errors.New("kernelvm: the VM ended without the command's exit status")

// Run boots the VM, runs the command and returns its exit status. The VM
// is killed when ctx ends.
func Run(ctx context.Context, cfg Config) (int, error) {
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 2048
	}
	initrd, err := buildInitramfs(ctx, cfg)
	if err != nil {
		return 0, err
	}
	args := []string{"-nographic", "-no-reboot", "-m", strconv.Itoa(cfg.MemoryMiB), "-cpu", "max",
		"-accel", "tcg,thread=multi", "-smp", "2", "-nic", "none",
		"-kernel", cfg.Kernel.Image, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 rdinit=/init loglevel=4",
		"-virtfs", "local,path=" + cfg.Share + ",mount_tag=host,security_model=none,readonly=on"}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start qemu: %w", err)
	}
	code, tail := readConsole(out, cfg.Console)
	werr := cmd.Wait()
	if code < 0 {
		return 0, fmt.Errorf("%w (qemu: %v; ctx: %v); console tail:\n%s", ErrNoExit, werr, ctx.Err(), tail)
	}
	return code, nil
}

// readConsole copies the console to w and returns the exit status it
// carried (-1 for none) and its last lines.
func readConsole(r io.Reader, w io.Writer) (int, string) {
	code := -1
	var mu sync.Mutex
	var last []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if w != nil {
			fmt.Fprintln(w, line)
		}
		if v, ok := strings.CutPrefix(line, exitMarker); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				code = n
			}
		}
		mu.Lock()
		last = append(last, line)
		if len(last) > 40 {
			last = last[1:]
		}
		mu.Unlock()
	}
	return code, strings.Join(last, "\n")
}

// buildInitramfs writes the init, the modules and the command into a
// newc archive in cfg.WorkDir.
func buildInitramfs(ctx context.Context, cfg Config) (string, error) {
	initBin := filepath.Join(cfg.WorkDir, "init")
	build := exec.CommandContext(ctx, "go", "build", "-o", initBin, "github.com/terway-sim/terway/lab/kernelvm/vminit")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build vminit: %w\n%s", err, out)
	}
	mods, err := cfg.Kernel.Modules(cfg.Modules)
	if err != nil {
		return "", err
	}
	path := filepath.Join(cfg.WorkDir, "initramfs.cpio")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := cpio.NewWriter(f)
	a := &archive{w: w, dirs: map[string]bool{}}
	var list []string
	for _, m := range mods {
		rel, err := filepath.Rel(filepath.Dir(filepath.Dir(filepath.Dir(cfg.Kernel.ModulesDir))), m)
		if err != nil {
			return "", err
		}
		if err := a.addFile(rel, m, 0o644); err != nil {
			return "", err
		}
		list = append(list, "/"+rel)
	}
	if err := a.addFile("init", initBin, 0o755); err != nil {
		return "", err
	}
	if err := a.addPrograms(ctx, cfg.Programs); err != nil {
		return "", err
	}
	for name, content := range map[string]string{
		"modules": strings.Join(list, "\n"), "command": strings.Join(cfg.Command, "\n"), "environ": strings.Join(cfg.Env, "\n"),
	} {
		if err := a.addData(name, []byte(content+"\n"), 0o644); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return path, f.Close()
}

// addPrograms adds each program and the shared libraries it needs, at
// their host paths (a library's symlink gets the file it points to).
func (a *archive) addPrograms(ctx context.Context, progs []string) error {
	seen := map[string]bool{}
	for _, p := range progs {
		out, err := exec.CommandContext(ctx, "ldd", p).Output()
		var libs []string
		if err == nil {
			libs = lddPaths(string(out))
		} // a static program: ldd fails, and it needs nothing
		for _, f := range append([]string{p}, libs...) {
			if seen[f] {
				continue
			}
			seen[f] = true
			if err := a.addFile(strings.TrimPrefix(f, "/"), f, 0o755); err != nil {
				return fmt.Errorf("program %s: %w", p, err)
			}
		}
	}
	return nil
}

// lddPaths are the absolute paths in ldd's output: the libraries and the
// dynamic loader.
func lddPaths(out string) []string {
	var paths []string
	for _, line := range strings.Split(out, "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				paths = append(paths, f)
				break
			}
		}
	}
	return paths
}

// archive is a newc archive being written, with the directories in it.
type archive struct {
	w    *cpio.Writer
	dirs map[string]bool
}

// addFile adds the host file src as name, with its parent directories.
func (a *archive) addFile(name, src string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return a.addData(name, data, mode)
}

func (a *archive) addData(name string, data []byte, mode os.FileMode) error {
	if err := a.addDirs(filepath.Dir(name)); err != nil {
		return err
	}
	if err := a.w.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeReg | cpio.FileMode(mode), Size: int64(len(data))}); err != nil {
		return err
	}
	_, err := a.w.Write(data)
	return err
}

func (a *archive) addDirs(dir string) error {
	if dir == "." || dir == "/" || dir == "" || a.dirs[dir] {
		return nil
	}
	a.dirs[dir] = true
	if err := a.addDirs(filepath.Dir(dir)); err != nil {
		return err
	}
	return a.w.WriteHeader(&cpio.Header{Name: dir, Mode: cpio.TypeDir | 0o755})
}
