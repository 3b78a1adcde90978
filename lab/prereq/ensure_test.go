package prereq

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// logWriter sends progress lines to the test log and keeps them.
type logWriter struct {
	t   *testing.T
	buf bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return w.buf.Write(p)
}

// testBusybox returns the machine's busybox, or a stand-in that lists two
// applets when busybox-static is not installed (the image is then not
// runnable, but its layout is what this test checks).
func testBusybox(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/bin/busybox"); err == nil {
		return "/bin/busybox"
	}
	t.Log("no /bin/busybox (Debian busybox-static not installed): packing a stand-in script")
	p := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nprintf 'sh\\nls\\nwget\\n'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEnsureTerway builds our binaries and the three images into a
// temporary cache, checks them, and checks that a second run reuses the
// images.
func TestEnsureTerway(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	logw := &logWriter{t: t}
	o := Options{RepoDir: repo, CacheDir: cache, Progress: logw, Groups: []Group{Terway}, Busybox: testBusybox(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ts, err := Ensure(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range ownBinaries {
		checkStatic(t, ts.Bin(b.name))
	}
	if !regexp.MustCompile(`^lab\.local/terway:[0-9a-f]{12}$`).MatchString(ts.TerwayImage) {
		t.Errorf("TerwayImage = %q", ts.TerwayImage)
	}
	wantImages := []string{"pause.tar", "busybox.tar", "terway.tar"}
	if len(ts.Images) != len(wantImages) {
		t.Fatalf("Images = %v", ts.Images)
	}
	for i, p := range ts.Images {
		if p != filepath.Join(cache, "images", wantImages[i]) {
			t.Errorf("Images[%d] = %s", i, p)
		}
	}
	checkArchive(t, ts.Images[0], PauseImage, []string{"/pause"}, map[string]string{"pause": ""})
	checkArchive(t, ts.Images[1], BusyboxImage, []string{"/bin/sh"}, map[string]string{"bin/busybox": "", "bin/sh": "busybox", "tmp/": ""})
	checkArchive(t, ts.Images[2], ts.TerwayImage, nil, map[string]string{"usr/": "", "usr/bin/": "", "usr/bin/terwayd": "", "usr/bin/terway": "", "usr/bin/terway-cli": ""})
	if _, err := os.Stat(filepath.Join(cache, ".gitignore")); err != nil {
		t.Errorf("cache not git-ignored: %v", err)
	}

	before, err := os.Stat(ts.Images[2])
	if err != nil {
		t.Fatal(err)
	}
	logw.buf.Reset()
	ts2, err := Ensure(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if ts2.TerwayImage != ts.TerwayImage {
		t.Errorf("unchanged sources gave a new tag: %s then %s", ts.TerwayImage, ts2.TerwayImage)
	}
	after, err := os.Stat(ts.Images[2])
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) {
		t.Error("terway.tar was rewritten although its content did not change")
	}
	if n := strings.Count(logw.buf.String(), "up to date"); n != 3 {
		t.Errorf("second run: %d images up to date, want 3:\n%s", n, logw.buf.String())
	}
}

// checkStatic fails unless path is an ELF executable without an
// interpreter: the images have no libc.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", path)
		}
	}
}

// checkArchive reads a docker-save archive: the manifest names ref, the
// config has the entrypoint, and the layer holds members (name -> symlink
// target, "" for anything else).
func checkArchive(t *testing.T, path, ref string, entrypoint []string, members map[string]string) {
	t.Helper()
	outer := readMembers(t, path, mustOpen(t, path))
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(outer["manifest.json"].data, &manifest); err != nil || len(manifest) != 1 || len(manifest[0].Layers) != 1 {
		t.Fatalf("%s: manifest %v %s", path, err, outer["manifest.json"].data)
	}
	if tags := manifest[0].RepoTags; len(tags) != 1 || tags[0] != ref {
		t.Errorf("%s: RepoTags %v, want %s", path, tags, ref)
	}
	var cfg struct {
		Config struct{ Entrypoint []string }
	}
	if err := json.Unmarshal(outer[manifest[0].Config].data, &cfg); err != nil {
		t.Fatalf("%s: config: %v", path, err)
	}
	if strings.Join(cfg.Config.Entrypoint, " ") != strings.Join(entrypoint, " ") {
		t.Errorf("%s: entrypoint %v, want %v", path, cfg.Config.Entrypoint, entrypoint)
	}
	layer := readMembers(t, path+" layer", bytes.NewReader(outer[manifest[0].Layers[0]].data))
	for name, link := range members {
		m, ok := layer[name]
		if !ok {
			t.Errorf("%s: layer has no %s", path, name)
			continue
		}
		if m.hdr.Linkname != link {
			t.Errorf("%s: %s -> %q, want %q", path, name, m.hdr.Linkname, link)
		}
	}
}

type member struct {
	hdr  *tar.Header
	data []byte
}

func mustOpen(t *testing.T, path string) io.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readMembers(t *testing.T, what string, r io.Reader) map[string]member {
	t.Helper()
	tr := tar.NewReader(r)
	out := map[string]member{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", what, h.Name, err)
		}
		out[h.Name] = member{hdr: h, data: data}
	}
}
