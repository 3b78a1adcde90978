// Package image packs container images as docker-save archives, without a
// registry and without a container engine. The root filesystem is one
// layer built here from a list of files, byte for byte reproducibly
// (sorted names, owner 0:0, a fixed mtime, uncompressed); the image config
// and the archive (manifest.json, config, layer) are go-containerregistry's
// (tarball.Write), with fixed creation times, so the same inputs always
// give the same image ID. `ctr images import` and `docker load` read the
// result.
//
// An archive holds three things:
//
//	sha256:<c>             the image config; <c> is its sha256, the image ID
//	<l>.tar                the root filesystem; <l> is its sha256, the config's diff_id
//	manifest.json          [{"Config":"sha256:<c>","RepoTags":["<ref>"],"Layers":["<l>.tar"]}]
package image

import (
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Format names the archive layout Write produces. A cache of archives
// keyed by what goes into an image includes it, so that a new layout
// rebuilds them.
const Format = "docker-save by go-containerregistry tarball.Write, one uncompressed layer"

// Epoch is the modification time of every entry and the creation time of
// the image, so that archives do not depend on when or from which files
// they were built.
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
	// Ref is the name the image is imported under, with its registry and
	// tag, e.g. lab.local/pause:1.
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
	// Strict: a reference without registry or tag would be completed
	// differently by each runtime (docker.io/library/..., :latest).
	tag, err := name.NewTag(img.Ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image %q: %w", img.Ref, err)
	}
	built, err := build(img)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	if err := tarball.Write(tag, built, w); err != nil {
		return fmt.Errorf("image %s: write archive: %w", img.Ref, err)
	}
	return nil
}

// build is img as a go-containerregistry image: the config on an empty
// image, then the layer.
func build(img Image) (v1.Image, error) {
	layer, err := buildLayer(img.Files)
	if err != nil {
		return nil, err
	}
	base, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		// The lab runs on linux/amd64 only (see the machine notes);
		// runtimes refuse an image whose platform does not match.
		Architecture: "amd64",
		OS:           "linux",
		Created:      v1.Time{Time: Epoch},
		Config:       v1.Config{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env},
		// Append adds the layer's diff_id.
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	built, err := mutate.Append(base, mutate.Addendum{
		Layer:   static.NewLayer(layer, types.DockerUncompressedLayer),
		History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "terway-lab image.Write"},
	})
	if err != nil {
		return nil, fmt.Errorf("add layer: %w", err)
	}
	return built, nil
}
