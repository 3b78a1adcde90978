package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/terway-sim/terway/internal/atomicfile"
)

// WriteJSON writes r to path as indented JSON, atomically (a reader sees
// the old file or the new one, never half of one) with mode 0644. Fields
// come in the struct's declaration order and map keys sorted, so the same
// result always gives the same bytes and committed results diff cleanly.
// A result whose Schema is 0 is written with the current SchemaVersion;
// any other version than the current one is refused.
func WriteJSON(path string, r *Result) error {
	data, err := encodeResult(r)
	if err != nil {
		return fmt.Errorf("write result %s: %w", path, err)
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// encodeResult returns r as the bytes WriteJSON stores.
func encodeResult(r *Result) ([]byte, error) {
	if r == nil {
		return nil, errors.New("nil result")
	}
	out := *r
	if out.Schema == 0 {
		out.Schema = SchemaVersion
	}
	if out.Schema != SchemaVersion {
		return nil, fmt.Errorf("result %s/%s has schema version %d, this build writes version %d",
			r.Kind, r.Name, r.Schema, SchemaVersion)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Commands contain "&&" and "<"; keep them readable in the file.
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&out); err != nil {
		return nil, fmt.Errorf("encode result %s/%s: %w", r.Kind, r.Name, err)
	}
	return buf.Bytes(), nil
}

// ReadResults reads every *.json file directly in dir as a Result and
// returns them sorted by Kind, then Name (then file name, so the order is
// total). A file with a schema version this build does not know is an
// error naming the file: silently misreading an old or newer format would
// make the regression gate compare the wrong figures. Unknown fields are
// accepted, since a version may gain fields.
func ReadResults(dir string) ([]*Result, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	type named struct {
		r    *Result
		file string
	}
	var all []named
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		r, err := readResult(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		all = append(all, named{r, e.Name()})
	}
	slices.SortFunc(all, func(a, b named) int {
		return cmp.Or(cmp.Compare(a.r.Kind, b.r.Kind), cmp.Compare(a.r.Name, b.r.Name), cmp.Compare(a.file, b.file))
	})
	out := make([]*Result, len(all))
	for i, n := range all {
		out[i] = n.r
	}
	return out, nil
}

// readResult decodes one result file and checks its schema version.
func readResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	// Look at the version first, so that a future format that no longer
	// decodes into Result still gets the clear version error.
	var head struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("decode result %s: %w", path, err)
	}
	if head.Schema == nil {
		return nil, fmt.Errorf("result %s has no schema version (is it a bench result?)", path)
	}
	if *head.Schema != SchemaVersion {
		return nil, fmt.Errorf("result %s has schema version %d; this build reads only version %d (regenerate the result or use a matching terway-bench)",
			path, *head.Schema, SchemaVersion)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode result %s: %w", path, err)
	}
	return &r, nil
}
