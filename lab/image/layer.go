package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// entry is one normalised layer member: name is relative ("usr/bin/x"),
// without a trailing slash.
type entry struct {
	name string
	file File
	dir  bool
}

// buildLayer returns the layer tar for files: every parent directory
// present, entries sorted by name so a directory precedes its content.
func buildLayer(files []File) ([]byte, error) {
	entries, err := normalise(files)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := writeEntry(tw, e); err != nil {
			return nil, fmt.Errorf("layer entry /%s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("finish layer: %w", err)
	}
	return buf.Bytes(), nil
}

// normalise validates paths, adds missing parent directories and sorts.
func normalise(files []File) ([]entry, error) {
	byName := make(map[string]entry, len(files))
	for _, f := range files {
		name, err := relName(f.Path)
		if err != nil {
			return nil, err
		}
		if _, dup := byName[name]; dup {
			return nil, fmt.Errorf("path %s listed twice", f.Path)
		}
		byName[name] = entry{name: name, file: f, dir: isDir(f)}
	}
	for name := range byName {
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			if e, ok := byName[p]; ok {
				if !e.dir {
					return nil, fmt.Errorf("/%s is a parent of /%s but not a directory", p, name)
				}
				continue
			}
			byName[p] = entry{name: p, file: File{Path: "/" + p, Mode: fs.ModeDir | 0o755}, dir: true}
		}
	}
	entries := make([]entry, 0, len(byName))
	for _, e := range byName {
		entries = append(entries, e)
	}
	// Sorting by the tar name (directories end in "/") puts every
	// directory right before the entries below it.
	sort.Slice(entries, func(i, j int) bool { return tarName(entries[i]) < tarName(entries[j]) })
	return entries, nil
}

func relName(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	name := strings.TrimPrefix(path.Clean(p), "/")
	if name == "" {
		return "", fmt.Errorf("path %q names the root directory", p)
	}
	return name, nil
}

func isDir(f File) bool {
	return f.Source == "" && f.Data == nil && f.Link == "" && f.Mode.IsDir()
}

func tarName(e entry) string {
	if e.dir {
		return e.name + "/"
	}
	return e.name
}

func writeEntry(tw *tar.Writer, e entry) error {
	switch {
	case e.dir:
		return tw.WriteHeader(dirHeader(tarName(e), tarMode(e.file.Mode, 0o755)))
	case e.file.Source != "":
		return writeSource(tw, e.name, e.file)
	case e.file.Data != nil:
		return writeRegular(tw, e.name, tarMode(e.file.Mode, 0o644), e.file.Data)
	case e.file.Link != "":
		h := baseHeader(e.name)
		h.Typeflag = tar.TypeSymlink
		h.Linkname = e.file.Link
		h.Mode = 0o777
		return tw.WriteHeader(h)
	default:
		return fmt.Errorf("no Source, Data or Link and not a directory")
	}
}

// writeSource copies a host file; the tar writer refuses a file that grew
// or shrank after the stat, so a concurrent rewrite cannot slip through.
func writeSource(tw *tar.Writer, name string, f File) error {
	src, err := os.Open(f.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("source %s is not a regular file", f.Source)
	}
	def := int64(0o644)
	if st.Mode().Perm()&0o111 != 0 {
		def = 0o755
	}
	h := baseHeader(name)
	h.Typeflag = tar.TypeReg
	h.Mode = tarMode(f.Mode, def)
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := io.Copy(tw, src); err != nil {
		return fmt.Errorf("copy %s: %w", f.Source, err)
	}
	return nil
}

// tarMode turns an fs.FileMode into tar's mode bits; def applies when m
// carries no permission bits.
func tarMode(m fs.FileMode, def int64) int64 {
	mode := int64(m.Perm())
	if mode == 0 {
		mode = def
	}
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

func writeRegular(tw *tar.Writer, name string, mode int64, data []byte) error {
	h := baseHeader(name)
	h.Typeflag = tar.TypeReg
	h.Mode = mode
	h.Size = int64(len(data))
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func dirHeader(name string, mode int64) *tar.Header {
	h := baseHeader(name)
	h.Typeflag = tar.TypeDir
	h.Mode = mode
	return h
}

// baseHeader carries what every entry shares: root ownership and Epoch.
// USTAR keeps the headers free of PAX records (atime, ctime) that would
// vary; it holds names up to 255 bytes, which is plenty for images.
func baseHeader(name string) *tar.Header {
	return &tar.Header{Name: name, ModTime: Epoch, Format: tar.FormatUSTAR}
}
