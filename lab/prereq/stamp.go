package prereq

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/terway-sim/terway/internal/atomicfile"
)

// stamp records, per component or image, the inputs its cached output was
// built from. It lives in <cache>/stamp.json; inputs are kept in clear so
// that a human can see which versions the cache holds.
type stamp struct {
	Entries map[string]stampEntry `json:"entries"`
}

// stampEntry is one built thing: Key is the hash of Inputs.
type stampEntry struct {
	Key    string   `json:"key"`
	Inputs []string `json:"inputs"`
}

// newEntry hashes inputs into an entry.
func newEntry(inputs []string) stampEntry {
	return stampEntry{Key: hashStrings(inputs), Inputs: inputs}
}

// needsBuild is the rebuild decision: anything but the same key with every
// output in place means build.
func (s stamp) needsBuild(name string, want stampEntry, outputsPresent bool) bool {
	have, ok := s.Entries[name]
	return !ok || have.Key != want.Key || !outputsPresent
}

func (s *stamp) set(name string, e stampEntry) {
	if s.Entries == nil {
		s.Entries = map[string]stampEntry{}
	}
	s.Entries[name] = e
}

// readStamp loads the stamp; a missing or unreadable one is empty, which
// only means everything is rebuilt.
func readStamp(path string) stamp {
	var s stamp
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &s) != nil {
		return stamp{}
	}
	return s
}

// writeStamp replaces the stamp file atomically.
func writeStamp(path string, s stamp) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode stamp: %w", err)
	}
	return atomicfile.WriteFunc(path, 0o644, func(f io.Writer) error {
		_, err := f.Write(append(b, '\n'))
		return err
	})
}

func hashStrings(lines []string) string {
	h := sha256.New()
	for _, l := range lines {
		io.WriteString(h, l)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hashFile returns the hex sha256 of a file's content.
func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// moduleInputs describes a nested module by the hash of every regular file
// in its directory (go.mod, go.sum and the Go files): editing the wrapper
// or bumping a dependency changes the stamp.
func moduleInputs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read module %s: %w", dir, err)
	}
	var lines []string
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		sum, err := hashFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		lines = append(lines, "file "+e.Name()+" sha256:"+sum)
	}
	if len(lines) == 0 {
		return nil, errors.New("module " + dir + " has no files")
	}
	sort.Strings(lines)
	return lines, nil
}
