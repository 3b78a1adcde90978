package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/terway-sim/terway/daemon/backoff"
)

func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result %s is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s is not JSON: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// TestMergeRFC7396 runs the examples of RFC 7396 Appendix A.
func TestMergeRFC7396(t *testing.T) {
	cases := []struct{ base, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, tc := range cases {
		t.Run(tc.base+" + "+tc.patch, func(t *testing.T) {
			got, err := Merge([]byte(tc.base), []byte(tc.patch))
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			if !jsonEqual(t, got, tc.want) {
				t.Errorf("Merge = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestMergeENIConf(t *testing.T) {
	base := `{
		"version": "1",
		"max_pool_size": 5,
		"min_pool_size": 0,
		"vswitches": {"cn-hangzhou-g": ["vsw-g1"], "cn-hangzhou-h": ["vsw-h1"]},
		"security_groups": ["sg-1", "sg-2"],
		"eni_tags": {"team": "net", "env": "prod"},
		"backoff_override": {"eni_ops": {"Duration": 1000000000, "Steps": 3}},
		"service_cidr": "10.96.0.0/12"
	}`
	cases := []struct {
		name  string
		patch string
		want  string
	}{
		{"nested objects merge", `{"vswitches": {"cn-hangzhou-g": ["vsw-g2"]}, "eni_tags": {"env": "test"}}`, `{
			"version": "1", "max_pool_size": 5, "min_pool_size": 0,
			"vswitches": {"cn-hangzhou-g": ["vsw-g2"], "cn-hangzhou-h": ["vsw-h1"]},
			"security_groups": ["sg-1", "sg-2"],
			"eni_tags": {"team": "net", "env": "test"},
			"backoff_override": {"eni_ops": {"Duration": 1000000000, "Steps": 3}},
			"service_cidr": "10.96.0.0/12"}`},
		{"null deletes a key, top-level and nested", `{"service_cidr": null, "eni_tags": {"team": null}, "backoff_override": {"eni_ops": {"Steps": null}}}`, `{
			"version": "1", "max_pool_size": 5, "min_pool_size": 0,
			"vswitches": {"cn-hangzhou-g": ["vsw-g1"], "cn-hangzhou-h": ["vsw-h1"]},
			"security_groups": ["sg-1", "sg-2"],
			"eni_tags": {"env": "prod"},
			"backoff_override": {"eni_ops": {"Duration": 1000000000}}}`},
		{"arrays replace, never merge", `{"security_groups": ["sg-3"]}`, `{
			"version": "1", "max_pool_size": 5, "min_pool_size": 0,
			"vswitches": {"cn-hangzhou-g": ["vsw-g1"], "cn-hangzhou-h": ["vsw-h1"]},
			"security_groups": ["sg-3"],
			"eni_tags": {"team": "net", "env": "prod"},
			"backoff_override": {"eni_ops": {"Duration": 1000000000, "Steps": 3}},
			"service_cidr": "10.96.0.0/12"}`},
		{"scalars replace, new keys added", `{"max_pool_size": 20, "ip_stack": "dual"}`, `{
			"version": "1", "max_pool_size": 20, "min_pool_size": 0, "ip_stack": "dual",
			"vswitches": {"cn-hangzhou-g": ["vsw-g1"], "cn-hangzhou-h": ["vsw-h1"]},
			"security_groups": ["sg-1", "sg-2"],
			"eni_tags": {"team": "net", "env": "prod"},
			"backoff_override": {"eni_ops": {"Duration": 1000000000, "Steps": 3}},
			"service_cidr": "10.96.0.0/12"}`},
		{"object replaces a scalar", `{"version": {"major": 2}}`, `{
			"version": {"major": 2}, "max_pool_size": 5, "min_pool_size": 0,
			"vswitches": {"cn-hangzhou-g": ["vsw-g1"], "cn-hangzhou-h": ["vsw-h1"]},
			"security_groups": ["sg-1", "sg-2"],
			"eni_tags": {"team": "net", "env": "prod"},
			"backoff_override": {"eni_ops": {"Duration": 1000000000, "Steps": 3}},
			"service_cidr": "10.96.0.0/12"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Merge([]byte(base), []byte(tc.patch))
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			if !jsonEqual(t, got, tc.want) {
				t.Errorf("Merge = %s\nwant %s", got, tc.want)
			}
		})
	}

	// The merged document is what the daemon parses.
	merged, err := Merge([]byte(base), []byte(`{"max_pool_size": 10, "vswitches": {"cn-hangzhou-h": null}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, string(merged))
	if c.MaxPoolSize != 10 || len(c.VSwitchesForZone("cn-hangzhou-h")) != 0 || c.VSwitchesForZone("cn-hangzhou-g")[0] != "vsw-g1" {
		t.Errorf("parsed merge: max_pool_size %d, vswitches %v", c.MaxPoolSize, c.VSwitches)
	}
	if got := c.Backoff(backoff.ENIOps); got.Steps != 3 || got.Duration.Seconds() != 1 {
		t.Errorf("parsed merge: eni_ops backoff %+v", got)
	}
}

func TestMergeEdges(t *testing.T) {
	// Numbers keep their exact text (2^53+1 would not survive float64).
	got, err := Merge([]byte(`{"n": 9007199254740993, "f": 1.50}`), []byte(`{"m": 12345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"n":9007199254740993`, `"m":12345678901234567890`, `"f":1.50`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("Merge = %s, want it to contain %s", got, want)
		}
	}

	// No HTML escaping of <, >, &.
	got, err = Merge([]byte(`{}`), []byte(`{"eni_tags": {"a&b": "<x>"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"eni_tags":{"a&b":"<x>"}}`; string(got) != want {
		t.Errorf("Merge = %s, want %s", got, want)
	}

	// An empty patch returns base as it is; an empty base counts as {}.
	base := []byte(`{"max_pool_size": 5}`)
	for _, patch := range []string{"", "  \n"} {
		got, err := Merge(base, []byte(patch))
		if err != nil || string(got) != string(base) {
			t.Errorf("Merge(base, %q) = %s, %v; want base unchanged", patch, got, err)
		}
	}
	got, err = Merge(nil, []byte(`{"a": 1, "b": null}`))
	if err != nil || string(got) != `{"a":1}` {
		t.Errorf("Merge(nil, patch) = %s, %v; want {\"a\":1}", got, err)
	}

	// Malformed input: which document, and where.
	errCases := []struct{ base, patch, want string }{
		{`{"a": }`, `{}`, "eni_conf merge: base: malformed JSON at byte offset 7"},
		{`{}`, `{"a": 1,}`, "eni_conf merge: patch: malformed JSON at byte offset 9"},
		{`{}`, `{"a": 1`, "eni_conf merge: patch: malformed JSON at byte offset 7"},
		{`{} []`, `{}`, "eni_conf merge: base: malformed JSON: data after the value"},
		{`{}`, `{"a":1} x`, "eni_conf merge: patch: malformed JSON"},
	}
	for _, tc := range errCases {
		_, err := Merge([]byte(tc.base), []byte(tc.patch))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Merge(%s, %s) error %v, want %q", tc.base, tc.patch, err, tc.want)
		}
	}
	_, err = Merge([]byte(`{}`), []byte(`{"a": 1,}`))
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		t.Errorf("patch syntax error %v does not wrap *json.SyntaxError", err)
	}

	// Merge does not modify its inputs.
	b, p := []byte(`{"a": {"b": 1}}`), []byte(`{"a": {"b": null}}`)
	if _, err := Merge(b, p); err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"a": {"b": 1}}` || string(p) != `{"a": {"b": null}}` {
		t.Errorf("inputs changed: %s %s", b, p)
	}
}
