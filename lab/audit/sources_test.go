package audit

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/terway-sim/terway/rpc"
)

func TestParsePoolTrace(t *testing.T) {
	kv := func(k, v string) *rpc.MapKeyValueEntry { return &rpc.MapKeyValueEntry{Key: k, Value: v} }
	v, err := parsePoolTrace([]*rpc.MapKeyValueEntry{kv("enis", "1"), kv("inflight", "2"), kv("waiting", "1"),
		kv("ip/192.168.0.5", "eni-1 inuse ns/a"), kv("ip/192.168.0.6", "eni-1 idle "), kv("ip/172.20.0.3", " inuse ns/b")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Addr]poolAddr{
		netip.MustParseAddr("192.168.0.5"): {ENIID: "eni-1", State: "inuse", Owner: "ns/a"},
		netip.MustParseAddr("192.168.0.6"): {ENIID: "eni-1", State: "idle"},
		netip.MustParseAddr("172.20.0.3"):  {State: "inuse", Owner: "ns/b"},
	}
	if len(v.addrs) != len(want) || v.inflight != 2 || v.waiting != 1 || !v.enis["eni-1"] || len(v.enis) != 1 {
		t.Fatalf("parsed %+v", v)
	}
	for a, p := range want {
		if v.addrs[a] != p {
			t.Fatalf("%s: %+v, want %+v", a, v.addrs[a], p)
		}
	}
	if _, err := parsePoolTrace([]*rpc.MapKeyValueEntry{kv("ip/x", "eni-1 idle ")}); err == nil {
		t.Fatal("bad address accepted")
	}
}

func TestReportRendering(t *testing.T) {
	s := baseSnapshot()
	delete(s.nodes[0].pool.addrs, addr("192.168.0.23"))
	r := analyze(s)
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 finding(s)", "node node-1 (i-1)", "leaked-ip", "ip 192.168.0.23 on eni-s", "[cloud,kube,store,pool]"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("text lacks %q:\n%s", want, b.String())
		}
	}
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Clean() || back.Findings[0].Kind != KindLeakedIP || back.Nodes[0].Counts.PoolIdle != 2 ||
		!strings.Contains(string(raw), `"kind":"leaked-ip"`) {
		t.Fatalf("JSON round trip: %s", raw)
	}
	clean := analyze(baseSnapshot())
	raw, _ = json.Marshal(clean)
	if !strings.Contains(string(raw), `"findings":[]`) {
		t.Fatalf("a clean report's findings should be an empty list: %s", raw)
	}
}
