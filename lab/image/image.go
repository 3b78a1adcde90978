// Package image packs container images as docker-save archives, without a
// registry and without a container engine: one layer, built byte for byte
// reproducibly (sorted names, owner 0:0, a fixed mtime), so the same
// inputs always give the same image ID. `ctr images import` and
// `docker load` read the result.
//
// An archive holds three things:
//
//	manifest.json          [{"Config":"<c>.json","RepoTags":["<ref>"],"Layers":["<l>/layer.tar"]}]
//	<c>.json               the image config; <c> is its sha256
//	<l>/layer.tar          the root filesystem; <l> is its sha256, the config's diff_id
package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// Epoch is the modification time of every entry, so that archives do not
// depend on when or from which files they were built.
var Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// File is one entry of an image's root filesystem. Exactly one of Source,
// Data, Link is used, checked in that order; with none of them and a
// directory Mode, the entry is a directory.
type File struct {
	// Path is absolute inside the image, e.g. /usr/bin/terwayd.
	Path string
	// Mode holds the permission bits (plus fs.ModeDir, fs.ModeSticky...);
	// zero means 0755 for directories and Source files that are
	// executable on the host, 0644 otherwise. Ignored for links.
	Mode fs.FileMode
	// Source is a host file whose content is copied.
	Source string
	// Data is the content, when there is no Source.
	Data []byte
	// Link makes the entry a symbolic link to this target.
	Link string
}

// Image describes what Write packs.
type Image struct {
	// Ref is the name the image is imported under, e.g. lab.local/pause:1.
	Ref string
	// Files is the root filesystem. Parent directories are added as 0755
	// when not listed.
	Files []File
	// Entrypoint, Cmd and Env go into the image config as they are.
	Entrypoint, Cmd, Env []string
}

// Write packs img as a docker-save archive into w. The layer is built in
// memory first, because its digest names it inside the archive.
func Write(w io.Writer, img Image) error {
	if img.Ref == "" {
		return fmt.Errorf("image: empty reference")
	}
	layer, err := buildLayer(img.Files)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	layerSum := sha256Hex(layer)
	config, err := json.Marshal(newConfig(img, layerSum))
	if err != nil {
		return fmt.Errorf("image %s: encode config: %w", img.Ref, err)
	}
	configName := sha256Hex(config) + ".json"
	manifest, err := json.Marshal([]manifestEntry{{
		Config:   configName,
		RepoTags: []string{img.Ref},
		Layers:   []string{layerSum + "/layer.tar"},
	}})
	if err != nil {
		return fmt.Errorf("image %s: encode manifest: %w", img.Ref, err)
	}
	if err := writeArchive(w, manifest, configName, config, layerSum, layer); err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	return nil
}

// manifestEntry is one element of manifest.json.
type manifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// config is the subset of the image config (docker image spec v1) that
// runtimes need for a single-layer image.
type config struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       containerConfig `json:"config"`
	RootFS       rootFS          `json:"rootfs"`
}

type containerConfig struct {
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	Env        []string `json:"Env,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

func newConfig(img Image, layerSum string) config {
	return config{
		// The lab runs on linux/amd64 only (see the machine notes);
		// runtimes refuse an image whose platform does not match.
		Architecture: "amd64",
		OS:           "linux",
		Config:       containerConfig{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env},
		RootFS:       rootFS{Type: "layers", DiffIDs: []string{"sha256:" + layerSum}},
	}
}

// writeArchive writes the outer tar in a fixed order.
func writeArchive(w io.Writer, manifest []byte, configName string, config []byte, layerSum string, layer []byte) error {
	tw := tar.NewWriter(w)
	entries := []struct {
		name string
		data []byte
	}{
		{"manifest.json", manifest},
		{configName, config},
	}
	for _, e := range entries {
		if err := writeRegular(tw, e.name, 0o644, e.data); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(dirHeader(layerSum+"/", 0o755)); err != nil {
		return fmt.Errorf("write %s/: %w", layerSum, err)
	}
	if err := writeRegular(tw, layerSum+"/layer.tar", 0o644, layer); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish archive: %w", err)
	}
	return nil
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

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
