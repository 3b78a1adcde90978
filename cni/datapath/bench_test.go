package datapath

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkSetupTeardown sets up and tears down b.N pods of each kind on
// one node, each in a new namespace, as the plugin's ADD and DEL do
// (Setup, then TeardownDeferred), and reports the p50 and p99 of each
// (µs). Namespaces are made and removed outside the timer. make
// test-kernel runs it in the VM and prints IPVlan's figures as ratios to
// PolicyRoute's.
func BenchmarkSetupTeardown(b *testing.B) {
	for _, kind := range []Kind{PolicyRoute, IPVlan} {
		b.Run(string(kind), func(b *testing.B) {
			if kind == IPVlan {
				needLinkKind(b, "ipvlan")
			}
			n := newNode(b)
			var add, del []time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				s := n.spec(kind, i%200, podOpts{})
				pod := newPod(b, s)
				b.StartTimer()
				t0 := time.Now()
				if _, err := Setup(s); err != nil {
					b.Fatalf("Setup: %v", err)
				}
				t1 := time.Now()
				if err := TeardownDeferred(s); err != nil {
					b.Fatalf("Teardown: %v", err)
				}
				add, del = append(add, t1.Sub(t0)), append(del, time.Since(t1))
				b.StopTimer()
				if err := pod.Remove(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			if _, err := Reap(n.ns.Path()); err != nil {
				b.Fatalf("reap retired veths: %v", err)
			}
			for _, m := range []struct {
				name string
				d    []time.Duration
			}{{"add", add}, {"del", del}} {
				b.ReportMetric(percentile(m.d, 50), m.name+"-p50-µs")
				b.ReportMetric(percentile(m.d, 99), m.name+"-p99-µs")
			}
		})
	}
}

// percentile is the p-th percentile of d in microseconds (nearest rank).
func percentile(d []time.Duration, p int) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	i := max((len(s)*p+99)/100-1, 0)
	return float64(s[i].Nanoseconds()) / 1e3
}
