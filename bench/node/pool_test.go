package node

import (
	"testing"
	"time"
)

func TestParsePool(t *testing.T) {
	p, err := ParsePool("2/30,reclaim=1m,reclaim-interval=10s,reclaim-batch=3,min-eni=1")
	if err != nil {
		t.Fatal(err)
	}
	want := PoolPolicy{MinPoolSize: 2, MaxPoolSize: 30, IdleReclaimAfter: time.Minute, IdleReclaimInterval: 10 * time.Second,
		IdleReclaimBatch: 3, MinENI: 1}
	if p != want {
		t.Fatalf("%+v", p)
	}
	if again, err := ParsePool(p.String()); err != nil || again != p {
		t.Errorf("String does not round-trip: %q -> %+v %v", p.String(), again, err)
	}
	if p.slug() != "2-30-reclaim1m0s-reclaim-interval10s-reclaim-batch3-min-eni1" {
		t.Errorf("slug %q", p.slug())
	}
	c := p.config()
	if c["min_pool_size"] != 2 || c["idle_ip_reclaim_after"] != "1m0s" || c["min_eni"] != 1 {
		t.Errorf("config %v", c)
	}
	for _, bad := range []string{"5", "a/5", "1/-2", "0/5,reclaim", "0/5,reclaim=soon", "0/5,color=red"} {
		if _, err := ParsePool(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
