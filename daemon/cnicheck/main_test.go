package cnicheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pluginType is the stand-in plugin's executable name, as netconfs name it.
const pluginType = "cnicheck-fake"

// pluginBinDir holds the stand-in plugin, built once for the whole run by
// TestMain and removed afterwards.
var pluginBinDir string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cnicheck-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	pluginBinDir = filepath.Join(dir, "bin")
	if err := buildPlugin(filepath.Join(dir, "src"), pluginBinDir); err != nil {
		fmt.Fprintln(os.Stderr, "build stand-in CNI plugin:", err)
		return 1
	}
	return m.Run()
}

// buildPlugin compiles testdata/fakeplugin in a module of its own, so the
// build neither reads nor depends on this repository's go.mod.
func buildPlugin(mod, binDir string) error {
	src, err := os.ReadFile(filepath.Join("testdata", "fakeplugin", "main.go"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(mod, "main.go"), src, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module fakeplugin\n\ngo 1.22\n"), 0o644); err != nil {
		return err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return err
	}
	cmd := exec.Command(goBin, "build", "-o", filepath.Join(binDir, pluginType), ".")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}
