package prereq

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// ownBinaries are the programs of this repository the lab runs, by
// package. pause is the pod sandbox of lab.local/pause:1.
var ownBinaries = []struct{ name, pkg string }{
	{"terwayd", "./cmd/terwayd"},
	{"terway", "./cmd/terway"},
	{"terway-cli", "./cmd/terway-cli"},
	{"pause", "./lab/image/pause"},
}

// buildOwn rebuilds our binaries on every run: the Go build cache turns an
// unchanged tree into a relink of a few seconds, and no stamp can know
// every source file that matters as well as the go command does.
func (e *ensurer) buildOwn(ctx context.Context) error {
	var bins []string
	args := []string{"build", "-tags=grpcnotrace", "-ldflags", "-s -w", "-o"}
	pkgs := make([]string, 0, len(ownBinaries))
	for _, b := range ownBinaries {
		bins = append(bins, b.name)
		pkgs = append(pkgs, b.pkg)
	}
	runs := func(out string) []goRun {
		// Static, so they run in images without a libc; grpcnotrace as in
		// the Makefile (terwayd is a third of the size without it).
		return []goRun{{args: append(append(args, out+"/"), pkgs...), env: []string{"CGO_ENABLED=0"}}}
	}
	err := e.p.step("building", strings.Join(bins, " "), "", func() error {
		return e.buildInto(ctx, e.o.RepoDir, runs, bins)
	})
	if err != nil {
		return fmt.Errorf("build our binaries: %w", err)
	}
	return nil
}

// terwayTag is the terway image's tag: a short hash of its binaries, so a
// rebuilt daemon is a new image that the DaemonSet rolls out, and an
// unchanged one keeps its tag.
func terwayTag(binDir string) (string, error) {
	var lines []string
	for _, n := range terwayImageBinaries {
		sum, err := hashFile(filepath.Join(binDir, n))
		if err != nil {
			return "", fmt.Errorf("terway image tag: %w", err)
		}
		lines = append(lines, n+" "+sum)
	}
	return hashStrings(lines)[:12], nil
}

// terwayImageBinaries are the files of the terway image, in /usr/bin.
var terwayImageBinaries = []string{"terwayd", "terway", "terway-cli"}
