package prereq

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFindRepo(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "lab", "prereq", "kube")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := FindRepo(sub); err != nil || got != root {
		t.Fatalf("FindRepo(%s) = %q, %v; want %q", sub, got, err, root)
	}
	t.Chdir(sub)
	if got, err := FindRepo("."); err != nil || got != root {
		t.Fatalf(`FindRepo(".") from %s = %q, %v; want %q`, sub, got, err, root)
	}
	if _, err := FindRepo(t.TempDir()); err == nil {
		t.Fatal("FindRepo outside any source tree succeeded")
	}
	if _, err := (Options{RepoDir: t.TempDir()}).resolve(); err == nil {
		t.Fatal("a RepoDir that is not the source tree was accepted")
	}
}
