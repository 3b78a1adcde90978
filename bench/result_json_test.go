package bench_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/benchtest"
)

func TestJSONRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := benchtest.All()
	// Written in an order unlike Kind/Name, so the read order is ReadResults' doing.
	for i := len(want) - 1; i >= 0; i-- {
		if err := bench.WriteJSON(filepath.Join(dir, want[i].Name+".json"), want[i]); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
	}
	// Files that are not results at the top level are ignored.
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# not a result"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "plots.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := bench.ReadResults(dir)
	if err != nil {
		t.Fatalf("ReadResults: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") { // renameio's temporary files are dot files
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestWriteJSONStableIndentedAndShared(t *testing.T) {
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	// Two writes of equal results (maps built independently, so any
	// map-order dependence would show) give identical bytes.
	if err := bench.WriteJSON(p1, benchtest.ColdBurst()); err != nil {
		t.Fatal(err)
	}
	if err := bench.WriteJSON(p2, benchtest.ColdBurst()); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b1, b2) {
		t.Fatal("two writes of the same result differ")
	}
	s := string(b1)
	if !strings.HasPrefix(s, "{\n  \"schema\": 1,\n  \"kind\": \"node\",\n  \"name\": \"cold-burst-100\",") {
		t.Errorf("not indented in field order:\n%.200s", s)
	}
	if !strings.Contains(s, "&& echo done") {
		t.Errorf("command not stored verbatim (HTML-escaped?)")
	}
	if strings.Index(s, `"AssignPrivateIpAddresses"`) > strings.Index(s, `"DescribeNetworkInterfaces"`) {
		t.Errorf("map keys not sorted")
	}
	st, err := os.Stat(p1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	// Overwriting replaces the content.
	r := benchtest.ColdBurst()
	r.Name = "renamed"
	if err := bench.WriteJSON(p1, r); err != nil {
		t.Fatal(err)
	}
	b3, _ := os.ReadFile(p1)
	if !strings.Contains(string(b3), `"name": "renamed"`) {
		t.Errorf("overwrite did not take")
	}
}

func TestWriteJSONSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	r := benchtest.ColdBurst()
	r.Schema = 0
	if err := bench.WriteJSON(filepath.Join(dir, "zero.json"), r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != 0 {
		t.Errorf("WriteJSON changed its argument")
	}
	got, err := bench.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Schema != bench.SchemaVersion {
		t.Errorf("schema %d written for 0, want %d", got[0].Schema, bench.SchemaVersion)
	}
	r.Schema = bench.SchemaVersion + 1
	if err := bench.WriteJSON(filepath.Join(dir, "future.json"), r); err == nil {
		t.Error("WriteJSON accepted an unknown schema version")
	}
	if err := bench.WriteJSON(filepath.Join(dir, "nil.json"), nil); err == nil {
		t.Error("WriteJSON accepted nil")
	}
	if _, err := os.Stat(filepath.Join(dir, "future.json")); !os.IsNotExist(err) {
		t.Errorf("refused result still written: %v", err)
	}
}

func TestJSONReadResultsRefusesUnknownSchema(t *testing.T) {
	for name, body := range map[string]string{
		"future":  `{"schema": 2, "kind": "node", "name": "x"}`,
		"missing": `{"kind": "node", "name": "x"}`,
		"garbage": `{"schema": `,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := bench.WriteJSON(filepath.Join(dir, "good.json"), benchtest.ColdBurst()); err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(dir, "bad.json")
			if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := bench.ReadResults(dir)
			if err == nil {
				t.Fatal("ReadResults accepted the file")
			}
			if !strings.Contains(err.Error(), bad) {
				t.Errorf("error %q does not name the file", err)
			}
			if name == "future" && !strings.Contains(err.Error(), "schema version 2") {
				t.Errorf("error %q does not name the version", err)
			}
		})
	}
}

func TestJSONReadResultsMissingDir(t *testing.T) {
	if _, err := bench.ReadResults(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("ReadResults of a missing directory succeeded")
	}
}
