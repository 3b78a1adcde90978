package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// The running daemon holds bbolt's exclusive lock: the audit must read a
// copy without waiting for it.
func TestReadStoreWhileLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ResRelation.db")
	s, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := store.Attachment{PodNamespace: "ns", PodName: "a", PodUID: "u", IPType: store.IPTypeENIMultiIP,
		Resources: []store.Resource{{Type: store.ResourceENIIP, ID: "m.192.168.0.5", ENIID: "eni-1", IPv4: "192.168.0.5"}}}
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIntent(store.Intent{Key: "k", Kind: store.IntentCreateENI}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v, err := readStore(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("reading a locked store took %v", time.Since(start))
	}
	if len(v.atts) != 1 || v.atts[0].Key() != "ns/a" || len(v.intents) != 1 {
		t.Fatalf("read %+v", v)
	}
	// The daemon's store is untouched and still usable.
	if err := s.Delete("ns", "a"); err != nil {
		t.Fatal(err)
	}
}

func TestReadStoreErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := readStore(context.Background(), filepath.Join(dir, "absent.db")); err == nil {
		t.Fatal("absent store read without error")
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("x"), 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := readStore(context.Background(), junk)
	if !errors.Is(err, store.ErrUnknownFormat) {
		t.Fatalf("junk store: %v, want ErrUnknownFormat", err)
	}
	if b, _ := os.ReadFile(junk); !bytes.Equal(b, bytes.Repeat([]byte("x"), 8192)) {
		t.Fatal("the audit modified the store file")
	}
}

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
