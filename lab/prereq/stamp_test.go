package prereq

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNeedsBuild(t *testing.T) {
	built := newEntry([]string{"component kubernetes v1.37.2", "go go1.26.8 linux amd64"})
	s := stamp{}
	s.set("kubernetes", built)
	cases := []struct {
		name    string
		want    stampEntry
		present bool
		build   bool
	}{
		{"same inputs, binaries present", built, true, false},
		{"same inputs, a binary missing", built, false, true},
		{"new version", newEntry([]string{"component kubernetes v1.37.3", "go go1.26.8 linux amd64"}), true, true},
		{"new go", newEntry([]string{"component kubernetes v1.37.2", "go go1.26.9 linux amd64"}), true, true},
	}
	for _, c := range cases {
		if got := s.needsBuild("kubernetes", c.want, c.present); got != c.build {
			t.Errorf("%s: needsBuild = %v, want %v", c.name, got, c.build)
		}
	}
	if !s.needsBuild("etcd", built, true) {
		t.Error("a component without a stamp entry must be built")
	}
}

// TestComponentEntryFollowsInputs: the stamp key of a component changes
// with its version, the toolchain and its nested module's files, and with
// nothing else (not the temporary output directory).
func TestComponentEntryFollowsInputs(t *testing.T) {
	repo := t.TempDir()
	mod := filepath.Join(repo, "lab", "prereq", "kube")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(mod, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n\nrequire k8s.io/kubernetes v1.37.2\n")
	write("go.sum", "k8s.io/kubernetes v1.37.2 h1:abc\n")
	e := &ensurer{o: Options{RepoDir: repo}, goInputs: []string{"go go1.26.8 linux amd64"}}
	c := kubernetesComponent()
	key := func() string {
		t.Helper()
		entry, err := e.componentEntry(c)
		if err != nil {
			t.Fatal(err)
		}
		return entry.Key
	}
	base := key()
	if again := key(); again != base {
		t.Fatal("same inputs gave two keys")
	}

	c.version = "v1.37.3"
	if key() == base {
		t.Error("a new pinned version kept the key")
	}
	c = kubernetesComponent()

	e.goInputs = []string{"go go1.27.0 linux amd64"}
	if key() == base {
		t.Error("a new Go release kept the key")
	}
	e.goInputs = []string{"go go1.26.8 linux amd64"}

	write("go.sum", "k8s.io/kubernetes v1.37.2 h1:def\n")
	if key() == base {
		t.Error("a changed go.sum kept the key")
	}
}

func TestStampRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stamp.json")
	if s := readStamp(path); len(s.Entries) != 0 {
		t.Fatalf("missing stamp read as %+v", s)
	}
	var s stamp
	s.set("etcd", newEntry([]string{"component etcd v3.6.16"}))
	if err := writeStamp(path, s); err != nil {
		t.Fatal(err)
	}
	if got := readStamp(path); got.Entries["etcd"].Key != s.Entries["etcd"].Key {
		t.Fatalf("read back %+v, wrote %+v", got, s)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readStamp(path); !got.needsBuild("etcd", s.Entries["etcd"], true) {
		t.Fatal("a corrupt stamp must mean rebuild")
	}
}
