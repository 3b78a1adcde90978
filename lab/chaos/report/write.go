package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// The files of a run's directory and of the output directory.
const (
	JSONFile     = "run.json"
	MarkdownFile = "run.md"
	TimelineFile = "timeline.svg"
	SummaryFile  = "summary.md"
)

// planName is what a plan name must look like to name a directory.
var planName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// RunDir is the name of r's directory under the output directory:
// "<plan>-<seed>". A replay of the same plan and seed replaces it.
func RunDir(r *Run) string { return r.Plan + "-" + strconv.FormatInt(r.Seed, 10) }

// WriteJSON writes r as indented JSON, with its verdict and violation
// count beside it for readers that do not judge it themselves.
func WriteJSON(w io.Writer, r *Run) error {
	out := struct {
		*Run
		Verdict    string `json:"verdict"`
		Violations int    `json:"violations"`
	}{r, r.Verdict(), len(r.Violations())}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write run %s as JSON: %w", RunDir(r), err)
	}
	return nil
}

// ReadJSON reads a run written by WriteJSON.
func ReadJSON(path string) (*Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read run: %w", err)
	}
	var r Run
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode run %s: %w", path, err)
	}
	return &r, nil
}

// WriteRun writes r's JSON, Markdown and timeline chart into
// dir/RunDir(r) (created as needed), then rewrites dir/summary.md over
// every run found in dir, so that runs of several invocations with one
// output directory share one summary. It returns r's directory.
func WriteRun(dir string, r *Run) (string, error) {
	if !planName.MatchString(r.Plan) {
		return "", fmt.Errorf("write run: plan name %q cannot name a directory (letters, digits, '.', '_' and '-' only)", r.Plan)
	}
	runDir := filepath.Join(dir, RunDir(r))
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return "", fmt.Errorf("write run: %w", err)
	}
	files := map[string]func(io.Writer, *Run) error{JSONFile: WriteJSON, MarkdownFile: WriteMarkdown}
	for name, write := range files {
		var b bytes.Buffer
		if err := write(&b, r); err != nil {
			return "", err
		}
		if err := writeFile(filepath.Join(runDir, name), b.Bytes()); err != nil {
			return "", err
		}
	}
	if svg := TimelineSVG(r); svg != nil {
		if err := writeFile(filepath.Join(runDir, TimelineFile), svg); err != nil {
			return "", err
		}
	}
	// A damaged run elsewhere in dir is listed in the summary as such: it
	// must not fail this run, nor keep the others out of the summary.
	runs, damaged := ReadRuns(dir)
	var b bytes.Buffer
	if err := WriteSummary(&b, runs, damagedLines(damaged)...); err != nil {
		return runDir, err
	}
	return runDir, writeFile(filepath.Join(dir, SummaryFile), b.Bytes())
}

// damagedLines says, one line each, why runs could not be read.
func damagedLines(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

// ReadRuns reads every run under dir (dir/*/run.json).
func ReadRuns(dir string) ([]*Run, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*", JSONFile))
	if err != nil {
		return nil, fmt.Errorf("list runs in %s: %w", dir, err)
	}
	var runs []*Run
	var errs []error
	for _, p := range paths {
		r, err := ReadJSON(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		runs = append(runs, r)
	}
	return runs, errors.Join(errs...)
}

// writeFile writes a report file readable by all: reports are meant to
// be shared.
func writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write report file: %w", err)
	}
	return nil
}
