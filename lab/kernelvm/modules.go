package kernelvm

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// moduleName is how the kernel names a module: the file's base name
// without .ko, dashes as underscores.
func moduleName(path string) string {
	return strings.ReplaceAll(strings.TrimSuffix(filepath.Base(path), ".ko"), "-", "_")
}

// moduleIndex maps module names to their files under a kernel's
// lib/modules/<version> directory.
func moduleIndex(modDir string) (map[string]string, error) {
	idx := map[string]string{}
	err := filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			idx[moduleName(p)] = p
		}
		return nil
	})
	return idx, err
}

// moduleDepends reads the modules a module needs from its .modinfo
// section ("depends=a,b"): what depmod writes into modules.dep, which
// Debian's package leaves to the installing host.
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s: no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// resolveModules returns the files of roots and everything they depend
// on, each after its dependencies: the order to load them in. A root
// that is not a module (built into the kernel, per modules.builtin) is
// left out; one that is neither is an error.
func resolveModules(idx map[string]string, builtin map[string]bool, roots []string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		name = strings.ReplaceAll(name, "-", "_")
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle at %s", name)
		case 2:
			return nil
		}
		path, ok := idx[name]
		if !ok {
			if builtin[name] {
				state[name] = 2
				return nil
			}
			return fmt.Errorf("module %s (needed by %s): not in the kernel's modules", name, from)
		}
		state[name] = 1
		deps, err := moduleDepends(path)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, path)
		return nil
	}
	for _, r := range roots {
		if err := visit(r, "the harness"); err != nil {
			return nil, err
		}
	}
	return order, nil
}
