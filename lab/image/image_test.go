package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// readTar returns the members of a tar archive by name, in order.
func readTar(t *testing.T, b []byte) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	var hdrs []*tar.Header
	data := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, data
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		d, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", h.Name, err)
		}
		hdrs = append(hdrs, h)
		data[h.Name] = d
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func testImage(t *testing.T) Image {
	t.Helper()
	src := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return Image{
		Ref: "lab.local/test:1",
		Files: []File{
			{Path: "/usr/bin/tool", Source: src},
			{Path: "/etc/motd", Data: []byte("hello\n")},
			{Path: "/bin/sh", Link: "busybox"},
			{Path: "/bin/busybox", Data: []byte("bb"), Mode: 0o755},
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		},
		Entrypoint: []string{"/bin/sh"},
		Cmd:        []string{"-c", "true"},
		Env:        []string{"PATH=/bin"},
	}
}

func TestWriteDigestsMatchContent(t *testing.T) {
	var out bytes.Buffer
	if err := Write(&out, testImage(t)); err != nil {
		t.Fatal(err)
	}
	hdrs, members := readTar(t, out.Bytes())
	for _, h := range hdrs {
		if h.Typeflag != tar.TypeReg || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("archive member %s: type %c, owner %d:%d", h.Name, h.Typeflag, h.Uid, h.Gid)
		}
	}

	var manifest tarball.Manifest
	if err := json.Unmarshal(members["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(manifest) != 1 || len(manifest[0].Layers) != 1 || !reflect.DeepEqual(manifest[0].RepoTags, []string{"lab.local/test:1"}) {
		t.Fatalf("manifest = %+v", manifest)
	}
	m := manifest[0]
	cfgBytes, ok := members[m.Config]
	if !ok {
		t.Fatalf("config %s missing", m.Config)
	}
	if want := "sha256:" + sum(cfgBytes); m.Config != want {
		t.Errorf("config named %s, its digest gives %s", m.Config, want)
	}
	layer, ok := members[m.Layers[0]]
	if !ok {
		t.Fatalf("layer %s missing", m.Layers[0])
	}
	if want := sum(layer) + ".tar"; m.Layers[0] != want {
		t.Errorf("layer named %s, its digest gives %s", m.Layers[0], want)
	}

	cfg, err := v1.ParseConfigFile(bytes.NewReader(cfgBytes))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if got, want := cfg.RootFS.DiffIDs, []v1.Hash{{Algorithm: "sha256", Hex: sum(layer)}}; !reflect.DeepEqual(got, want) {
		t.Errorf("diff_ids = %v, want %v", got, want)
	}
	if cfg.Architecture != "amd64" || cfg.OS != "linux" || cfg.RootFS.Type != "layers" || !cfg.Created.Equal(Epoch) {
		t.Errorf("platform/rootfs/created = %s/%s %s %v", cfg.OS, cfg.Architecture, cfg.RootFS.Type, cfg.Created)
	}
	c := cfg.Config
	if !reflect.DeepEqual(c.Entrypoint, []string{"/bin/sh"}) || !reflect.DeepEqual(c.Cmd, []string{"-c", "true"}) ||
		!reflect.DeepEqual(c.Env, []string{"PATH=/bin"}) {
		t.Errorf("config.config = %+v", c)
	}
	checkLayer(t, layer)
}

// TestWriteReadsBack: the archive is an image to a docker-save reader
// (go-containerregistry's, as ctr and docker read it): its tag, image ID
// and layer.
func TestWriteReadsBack(t *testing.T) {
	var out bytes.Buffer
	if err := Write(&out, testImage(t)); err != nil {
		t.Fatal(err)
	}
	opener := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out.Bytes())), nil }
	tag, err := name.NewTag("lab.local/test:1", name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.Image(opener, &tag)
	if err != nil {
		t.Fatalf("read the archive as lab.local/test:1: %v", err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v, %v", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	layer, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	checkLayer(t, layer)
	if _, err := img.ConfigName(); err != nil {
		t.Errorf("image ID: %v", err)
	}
}

// TestWriteImageIDPinned: the same input gives the same image ID from one
// build (and library version) to the next. A deliberate change of the
// image format updates the ID here.
func TestWriteImageIDPinned(t *testing.T) {
	img := Image{Ref: "lab.local/pinned:1", Entrypoint: []string{"/hello"}, Env: []string{"PATH=/"},
		Files: []File{{Path: "/hello", Data: []byte("hello\n"), Mode: 0o755}, {Path: "/etc/motd", Data: []byte("motd\n")}}}
	var out bytes.Buffer
	if err := Write(&out, img); err != nil {
		t.Fatal(err)
	}
	_, members := readTar(t, out.Bytes())
	var manifest tarball.Manifest
	if err := json.Unmarshal(members["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %+v", err, manifest)
	}
	const want = "sha256:721bc6afda293d6f9ee519677bdde40146f63ed26dcd68970fb84f34cc6ad36e"
	if manifest[0].Config != want {
		t.Errorf("image ID %s, want %s", manifest[0].Config, want)
	}
}

// checkLayer checks order, parents, ownership, times, modes and content.
func checkLayer(t *testing.T, layer []byte) {
	t.Helper()
	hdrs, data := readTar(t, layer)
	var names []string
	for _, h := range hdrs {
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(Epoch) {
			t.Errorf("%s: uid %d gid %d mtime %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
	}
	want := []string{"bin/", "bin/busybox", "bin/sh", "etc/", "etc/motd", "tmp/", "usr/", "usr/bin/", "usr/bin/tool"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("layer members = %v, want %v", names, want)
	}
	byName := map[string]*tar.Header{}
	for _, h := range hdrs {
		byName[h.Name] = h
	}
	checks := []struct {
		name string
		typ  byte
		mode int64
	}{
		{"usr/", tar.TypeDir, 0o755},
		{"tmp/", tar.TypeDir, 0o1777},
		{"usr/bin/tool", tar.TypeReg, 0o755},
		{"etc/motd", tar.TypeReg, 0o644},
		{"bin/busybox", tar.TypeReg, 0o755},
		{"bin/sh", tar.TypeSymlink, 0o777},
	}
	for _, c := range checks {
		h := byName[c.name]
		if h.Typeflag != c.typ || h.Mode != c.mode {
			t.Errorf("%s: type %c mode %o, want %c %o", c.name, h.Typeflag, h.Mode, c.typ, c.mode)
		}
	}
	if byName["bin/sh"].Linkname != "busybox" {
		t.Errorf("bin/sh -> %q", byName["bin/sh"].Linkname)
	}
	if got := string(data["usr/bin/tool"]); got != "#!/bin/sh\necho tool\n" {
		t.Errorf("usr/bin/tool = %q", got)
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	img := testImage(t)
	var a, b bytes.Buffer
	if err := Write(&a, img); err != nil {
		t.Fatal(err)
	}
	// Same content, listed in another order, from another source file.
	img2 := img
	img2.Files = append([]File(nil), img.Files...)
	for i, j := 0, len(img2.Files)-1; i < j; i, j = i+1, j-1 {
		img2.Files[i], img2.Files[j] = img2.Files[j], img2.Files[i]
	}
	copySrc := filepath.Join(t.TempDir(), "other")
	orig, err := os.ReadFile(img.Files[0].Source)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copySrc, orig, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range img2.Files {
		if img2.Files[i].Source != "" {
			img2.Files[i].Source = copySrc
			img2.Files[i].Mode = 0o755
		}
	}
	if err := Write(&b, img2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("same input gave different archives (%d vs %d bytes)", a.Len(), b.Len())
	}
}

func TestWriteRejectsBadInput(t *testing.T) {
	cases := map[string]Image{
		"no ref":        {Files: []File{{Path: "/a", Data: []byte("x")}}},
		"relative path": {Ref: "x:1", Files: []File{{Path: "a", Data: []byte("x")}}},
		"root path":     {Ref: "x:1", Files: []File{{Path: "/", Mode: fs.ModeDir}}},
		"duplicate":     {Ref: "x:1", Files: []File{{Path: "/a", Data: []byte("x")}, {Path: "/a/", Data: []byte("y")}}},
		"file parent":   {Ref: "x:1", Files: []File{{Path: "/a", Data: []byte("x")}, {Path: "/a/b", Data: []byte("y")}}},
		"empty entry":   {Ref: "x:1", Files: []File{{Path: "/a"}}},
		"missing src":   {Ref: "x:1", Files: []File{{Path: "/a", Source: "/nonexistent/terway-image-test"}}},
		"dir as source": {Ref: "x:1", Files: []File{{Path: "/a", Source: os.TempDir()}}},
	}
	for name, img := range cases {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			if err := Write(io.Discard, img); err == nil {
				t.Fatal("Write succeeded, want an error")
			}
		})
	}
}
