package fakecloud

import (
	"fmt"
	"testing"
	"time"
)

// TestMetadataTokensExpire: expired tokens leave the store at the next
// issue, whatever their number. Before, they were swept only once more
// than 4,096 were live (and then by a scan of all of them per PUT), so
// the map only grew.
func TestMetadataTokensExpire(t *testing.T) {
	ts := newMetadataTokens()
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 100 {
		ttl := time.Second
		if i%2 == 1 {
			ttl = 5 * time.Second // differing TTLs: issue order is not expiry order
		}
		if ts.issue("i-a", t0, ttl) == "" {
			t.Fatalf("token %d refused", i)
		}
	}
	if tok := ts.issue("i-a", t0.Add(2*time.Second), time.Hour); tok == "" || !ts.valid(tok, "i-a", t0.Add(2*time.Second)) {
		t.Fatal("new token not issued or not valid")
	}
	if n := len(ts.tokens); n != 51 {
		t.Fatalf("%d tokens live after the 1 s ones expired, want 51", n)
	}
	ts.issue("i-b", t0.Add(10*time.Second), time.Hour)
	if n := len(ts.tokens); n != 2 {
		t.Fatalf("%d tokens live after the 5 s ones expired, want 2", n)
	}
}

// BenchmarkMetadataTokenIssue60k measures one token PUT's work with 60,000
// tokens live (run with -benchtime=20000x so that the bounds are not
// reached). Before the expiry heap, every issue scanned all live tokens.
func BenchmarkMetadataTokenIssue60k(b *testing.B) {
	ts := newMetadataTokens()
	now := time.Unix(1_700_000_000, 0)
	const instances = 60
	for i := range 60_000 {
		ts.issue(fmt.Sprintf("i-%d", i%instances), now, 6*time.Hour)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Microsecond)
		ts.issue(fmt.Sprintf("i-%d", i%instances), now, 6*time.Hour)
	}
}
