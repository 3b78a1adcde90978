package config

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

var fuzzSeeds = []string{
	`{}`,
	`{"max_pool_size": 5, "min_pool_size": 1, "ip_stack": "dual", "service_cidr": "10.96.0.0/12,fd00::/108"}`,
	`{"backoff_override": {"eni_ops": {"Duration": 1000000000, "steps": 3, "Cap": "4s"}, "": {"Steps": 1}}}`,
	`{"rate_limit": {"DescribeVSwitches": 60, "*": 10}, "vswitches": {"z": ["vsw-1"]}, "eni_tags": {"a": ""}}`,
	`{"idle_ip_reclaim_after": "1h", "idle_ip_reclaim_jitter_factor": "0.5", "extra_routes": [{"dst": "1.2.3.4/8"}]}`,
	`{"vswitch_selection_policy": "most", "eni_cap_ratio": 0.5, "eni_cap_shift": -1, "unknown": [1], "enable_erdma": true}`,
	`{"security_groups": [], "custom_stateful_workload_kinds": ["A"], "kube_client_qps": 1.5, "degradation": "no_mutation"}`,
	`{"MAX_POOL_SIZE": 3, "max_pool_size": null, "gc_period": "1ms", "endpoint": "http://127.0.0.1:1"}`,
	`{"a":`, `[]`, `null`, ``,
}

// FuzzParse: Parse never panics, and what it accepts marshals back to
// eni_conf that parses to the same configuration.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", cfg, err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("re-Parse of %s (from %q): %v", out, data, err)
		}
		cfg.Ignored, again.Ignored = nil, nil
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("round trip of %q changed the config:\n got %+v\nwant %+v", data, again, cfg)
		}
	})
}

// FuzzMerge: Merge never panics; a successful merge with a non-blank patch is
// valid JSON; merging an object with {} or with itself gives it back.
func FuzzMerge(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), []byte(`{"max_pool_size": 1, "vswitches": null}`))
	}
	f.Fuzz(func(t *testing.T, base, patch []byte) {
		out, err := Merge(base, patch)
		if err == nil && len(bytes.TrimSpace(patch)) > 0 && !json.Valid(out) {
			t.Fatalf("Merge(%q, %q) = %q, not valid JSON", base, patch, out)
		}
		if !json.Valid(base) {
			return
		}
		var b map[string]any
		if json.Unmarshal(base, &b) != nil || b == nil || hasNull(b) {
			return // RFC 7396: nulls in the target are kept only where the patch leaves them
		}
		for _, p := range [][]byte{[]byte(`{}`), base} {
			got, err := Merge(base, p)
			if err != nil {
				t.Fatalf("Merge(%q, %q): %v", base, p, err)
			}
			var g any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("Merge(%q, %q) = %q: %v", base, p, got, err)
			}
			if !reflect.DeepEqual(g, any(b)) {
				t.Fatalf("Merge(%q, %q) = %s, want the base back", base, p, got)
			}
		}
	})
}

// hasNull reports whether an object holds a null at any depth of objects.
func hasNull(m map[string]any) bool {
	for _, v := range m {
		switch x := v.(type) {
		case nil:
			return true
		case map[string]any:
			if hasNull(x) {
				return true
			}
		}
	}
	return false
}
