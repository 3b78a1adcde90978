package prereq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ensurer carries one Ensure run.
type ensurer struct {
	o         Options
	p         *progress
	goTool    *goTool
	goInputs  []string // toolchain lines of every stamp
	stampPath string
	stamp     stamp
	binDir    string
	imagesDir string
}

// Ensure installs the Debian packages, builds the binaries and writes the
// images of the selected groups, reusing what the cache already holds
// (see the package doc), and returns where they are. It holds a lock on
// the cache while it works; ctx cancels a running build.
func Ensure(ctx context.Context, o Options) (*Toolset, error) {
	o, err := o.resolve()
	if err != nil {
		return nil, err
	}
	e := &ensurer{
		o:         o,
		p:         newProgress(o.Progress),
		stampPath: filepath.Join(o.CacheDir, "stamp.json"),
		binDir:    filepath.Join(o.CacheDir, "bin"),
		imagesDir: filepath.Join(o.CacheDir, "images"),
	}
	if err := e.prepareCache(); err != nil {
		return nil, err
	}
	unlock, err := lockCache(ctx, filepath.Join(o.CacheDir, "lock"), e.p)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := e.removeLeftovers(); err != nil {
		return nil, err
	}
	return e.run(ctx)
}

func (e *ensurer) run(ctx context.Context) (*Toolset, error) {
	if err := ensurePackages(ctx, e.o, e.p); err != nil {
		return nil, err
	}
	var err error
	if e.goTool, err = newGoTool(); err != nil {
		return nil, err
	}
	if e.goInputs, err = e.toolchain(ctx); err != nil {
		return nil, err
	}
	e.stamp = readStamp(e.stampPath)
	for _, c := range components() {
		if e.o.wants(c.group) {
			if err := e.ensureComponent(ctx, c); err != nil {
				return nil, err
			}
		}
	}
	ts := &Toolset{BinDir: e.binDir, ImagesDir: e.imagesDir}
	if e.o.wants(Terway) {
		if err := e.buildOwn(ctx); err != nil {
			return nil, err
		}
		if ts.TerwayImage, ts.Images, err = e.writeImages(ctx); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// prepareCache creates the directories and marks the cache git-ignored.
func (e *ensurer) prepareCache() error {
	for _, d := range []string{e.o.CacheDir, e.binDir, e.imagesDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cache: %w", err)
		}
	}
	ignore := filepath.Join(e.o.CacheDir, ".gitignore")
	if _, err := os.Stat(ignore); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(ignore, []byte("# Build cache of lab/prereq: binaries and images, never committed.\n*\n"), 0o644); err != nil {
			return fmt.Errorf("create cache: %w", err)
		}
	}
	return nil
}

// removeLeftovers deletes the temporary output of runs that were killed;
// it runs under the lock, so no live run owns them.
func (e *ensurer) removeLeftovers() error {
	for _, pattern := range []string{
		filepath.Join(e.o.CacheDir, ".build-*"),
		filepath.Join(e.o.CacheDir, ".stamp.json-*"),
		filepath.Join(e.imagesDir, ".*.tar-*"),
	} {
		matches, _ := filepath.Glob(pattern) // the patterns are valid
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return fmt.Errorf("remove leftover %s: %w", m, err)
			}
		}
	}
	return nil
}

// toolchain describes the go command for stamps: a new Go release
// rebuilds everything.
func (e *ensurer) toolchain(ctx context.Context) ([]string, error) {
	out, err := e.goTool.output(ctx, e.o.RepoDir, "env", "GOVERSION", "GOOS", "GOARCH")
	if err != nil {
		return nil, err
	}
	return []string{"go " + strings.Join(strings.Fields(out), " ")}, nil
}

// ensureComponent builds c unless the cache holds it from the same inputs.
func (e *ensurer) ensureComponent(ctx context.Context, c component) error {
	entry, err := e.componentEntry(c)
	if err != nil {
		return err
	}
	if !e.stamp.needsBuild(c.name, entry, binariesPresent(e.binDir, c.bins)) {
		e.p.printf("%s up to date", c.title())
		return nil
	}
	dir := ""
	if c.modDir != "" {
		dir = filepath.Join(e.o.RepoDir, c.modDir)
	}
	err = e.p.step("building", c.title(), c.hint, func() error {
		return e.buildInto(ctx, dir, c.runs, c.bins)
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", c.title(), err)
	}
	e.stamp.set(c.name, entry)
	return writeStamp(e.stampPath, e.stamp)
}

// componentEntry lists what c's binaries depend on.
func (e *ensurer) componentEntry(c component) (stampEntry, error) {
	inputs := append([]string{"component " + c.title()}, e.goInputs...)
	for _, r := range c.runs(outDirToken) {
		inputs = append(inputs, "run "+r.String())
	}
	if c.modDir != "" {
		mod, err := moduleInputs(filepath.Join(e.o.RepoDir, c.modDir))
		if err != nil {
			return stampEntry{}, err
		}
		inputs = append(inputs, mod...)
	}
	return newEntry(inputs), nil
}

// buildInto runs the go commands with a fresh temporary output directory
// and moves the binaries into bin/ only when all of them are there. dir is
// the module to build in; empty means the temporary directory (go install
// pkg@version needs no module).
func (e *ensurer) buildInto(ctx context.Context, dir string, runs func(out string) []goRun, bins []string) error {
	tmp, err := os.MkdirTemp(e.o.CacheDir, ".build-")
	if err != nil {
		return fmt.Errorf("create build dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if dir == "" {
		dir = tmp
	}
	for _, r := range runs(tmp) {
		if err := e.goTool.run(ctx, dir, r); err != nil {
			return err
		}
	}
	if !binariesPresent(tmp, bins) {
		return fmt.Errorf("the build finished without all of %v in %s", bins, tmp)
	}
	for _, b := range bins {
		// rename(2) replaces a binary atomically; a process still running
		// the old one keeps its inode.
		if err := os.Rename(filepath.Join(tmp, b), filepath.Join(e.binDir, b)); err != nil {
			return fmt.Errorf("install %s: %w", b, err)
		}
	}
	return nil
}

// binariesPresent reports whether every name exists in dir as a non-empty
// executable file.
func binariesPresent(dir string, names []string) bool {
	for _, n := range names {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil || !st.Mode().IsRegular() || st.Size() == 0 || st.Mode().Perm()&0o100 == 0 {
			return false
		}
	}
	return true
}
