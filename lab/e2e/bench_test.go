package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkPluginWarm measures the plugin end to end on the warm path, the
// way a runtime runs it: exec of the binary in the node's namespace →
// daemon over the socket (addresses already in the pool) → netlink →
// result; then DEL. Reported: ADD and DEL p50/p99 in ms.
func BenchmarkPluginWarm(b *testing.B) {
	for _, c := range []struct {
		name      string
		closeEach bool
	}{{"netns-kept", false}, {"netns-removed-after-del", true}} {
		b.Run(c.name, func(b *testing.B) { benchPluginWarm(b, c.closeEach) })
	}
}

// benchPluginWarm runs the warm ADD+DEL loop; with closeEach each pod's
// network namespace is removed right after its DEL, as a runtime does, so
// the kernel's asynchronous namespace cleanup overlaps the next pod.
func benchPluginWarm(b *testing.B, closeEach bool) {
	e := newEnv(b)
	n := e.nodeFor(e.bigNode(), "node-big", nodeOpts{conf: map[string]any{"min_pool_size": 10, "max_pool_size": 30}})
	warm := n.newPod("warmup", nil) // fills the pool and the ENI's table
	warm.mustAdd("1.0.0")
	var adds, dels []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p := n.newPod(fmt.Sprintf("bench-%d", i), nil)
		b.StartTimer()
		start := time.Now()
		if err := p.add("1.0.0"); err != nil {
			b.Fatal(err)
		}
		adds = append(adds, time.Since(start))
		start = time.Now()
		if err := p.del("1.0.0", true); err != nil {
			b.Fatal(err)
		}
		dels = append(dels, time.Since(start))
		if closeEach {
			b.StopTimer()
			p.closeNS()
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(pct(adds, 50), "add-p50-ms")
	b.ReportMetric(pct(adds, 99), "add-p99-ms")
	b.ReportMetric(pct(dels, 50), "del-p50-ms")
	b.ReportMetric(pct(dels, 99), "del-p99-ms")
	warm.mustDel("1.0.0")
}

func pct(d []time.Duration, p float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return float64(s[i]) / float64(time.Millisecond)
}
