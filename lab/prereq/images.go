package prereq

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/terway-sim/terway/internal/atomicfile"
	"github.com/terway-sim/terway/lab/image"
)

// imageArchive is an image and the file name of its archive in images/.
type imageArchive struct {
	file string
	img  image.Image
}

// writeImages writes pause.tar, busybox.tar and terway.tar where their
// content changed, and returns the terway reference and the archive paths.
func (e *ensurer) writeImages(ctx context.Context) (terwayRef string, paths []string, err error) {
	archives, terwayRef, err := e.imageArchives(ctx)
	if err != nil {
		return "", nil, err
	}
	for _, a := range archives {
		if err := e.ensureImage(a); err != nil {
			return "", nil, err
		}
		paths = append(paths, filepath.Join(e.imagesDir, a.file))
	}
	return terwayRef, paths, nil
}

// imageArchives describes the three images.
func (e *ensurer) imageArchives(ctx context.Context) (archives []imageArchive, terwayRef string, err error) {
	busybox, err := busyboxFiles(ctx, e.busyboxPath())
	if err != nil {
		return nil, "", err
	}
	tag, err := terwayTag(e.binDir)
	if err != nil {
		return nil, "", err
	}
	terway := image.Image{Ref: TerwayImageRepo + ":" + tag}
	for _, n := range terwayImageBinaries {
		terway.Files = append(terway.Files, image.File{Path: "/usr/bin/" + n, Source: filepath.Join(e.binDir, n), Mode: 0o755})
	}
	return []imageArchive{
		{"pause.tar", image.Image{
			Ref:        PauseImage,
			Files:      []image.File{{Path: "/pause", Source: filepath.Join(e.binDir, "pause"), Mode: 0o755}},
			Entrypoint: []string{"/pause"},
		}},
		{"busybox.tar", image.Image{
			Ref:        BusyboxImage,
			Files:      busybox,
			Env:        []string{"PATH=/bin"},
			Entrypoint: []string{"/bin/sh"},
		}},
		// No entrypoint: the DaemonSet names the command of each container.
		{"terway.tar", terway},
	}, terway.Ref, nil
}

func (e *ensurer) busyboxPath() string {
	if e.o.Busybox != "" {
		return e.o.Busybox
	}
	return "/bin/busybox"
}

// busyboxFiles is /bin/busybox plus a symlink per applet, and a
// world-writable /tmp that shell tests in pods can write to.
func busyboxFiles(ctx context.Context, path string) ([]image.File, error) {
	out, err := exec.CommandContext(ctx, path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets (%s --list; Debian package busybox-static): %w", path, err)
	}
	files := []image.File{
		{Path: "/bin/busybox", Source: path, Mode: 0o755},
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
	seen := map[string]bool{"busybox": true}
	for _, applet := range strings.Fields(string(out)) {
		if seen[applet] || strings.Contains(applet, "/") {
			continue
		}
		seen[applet] = true
		files = append(files, image.File{Path: "/bin/" + applet, Link: "busybox"})
	}
	if len(seen) == 1 {
		return nil, fmt.Errorf("%s --list printed no applets", path)
	}
	return files, nil
}

// ensureImage writes a's archive unless the stamp shows the same content.
func (e *ensurer) ensureImage(a imageArchive) error {
	entry, err := imageEntry(a.img)
	if err != nil {
		return err
	}
	path := filepath.Join(e.imagesDir, a.file)
	name := "image " + a.file
	_, statErr := os.Stat(path)
	if !e.stamp.needsBuild(name, entry, statErr == nil) {
		e.p.printf("image %s up to date", a.img.Ref)
		return nil
	}
	err = e.p.step("writing", "image "+a.img.Ref, a.file, func() error { return writeArchive(path, a.img) })
	if err != nil {
		return err
	}
	e.stamp.set(name, entry)
	return writeStamp(e.stampPath, e.stamp)
}

// imageEntry describes an image by the archive format and its spec, with
// each source file replaced by the hash of its content.
func imageEntry(img image.Image) (stampEntry, error) {
	spec := img
	spec.Files = make([]image.File, len(img.Files))
	for i, f := range img.Files {
		if f.Source != "" {
			sum, err := hashFile(f.Source)
			if err != nil {
				return stampEntry{}, fmt.Errorf("image %s: %w", img.Ref, err)
			}
			f.Source = "sha256:" + sum
		}
		spec.Files[i] = f
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return stampEntry{}, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	return newEntry([]string{"image " + img.Ref, "format " + image.Format, "spec sha256:" + hashStrings([]string{string(b)})}), nil
}

// writeArchive writes the archive so that a reader never sees half an
// image.
func writeArchive(path string, img image.Image) error {
	return atomicfile.WriteFunc(path, 0o644, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if err := image.Write(w, img); err != nil {
			return err
		}
		return w.Flush()
	})
}
