package peer

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/internal/noproxy"
)

// TestPeerWorkersChangeBehaviour is what Cilium's Worker{1,10,50}
// variants no longer show: one worker brings the nodes up one after the
// other, ten overlap them. The calls are the same; the time is not.
func TestPeerWorkersChangeBehaviour(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(workers int) *bench.Result {
		r, err := Run(ctx, Options{Delay: 20 * time.Millisecond, Workers: workers, Nodes: 6, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one, ten := run(1), run(10)
	t.Logf("1 worker: %.0f ms, 10 workers: %.0f ms, %.1f calls per node, lower bound %.0f ms",
		one.Metrics.TimeToAllMs, ten.Metrics.TimeToAllMs, one.Metrics.CallsPerNode, one.Metrics.LowerBoundMs)
	if !(one.Metrics.TimeToAllMs > 1.5*ten.Metrics.TimeToAllMs) {
		t.Errorf("1 worker took %.0f ms, 10 workers %.0f ms: the workers parameter should overlap the nodes",
			one.Metrics.TimeToAllMs, ten.Metrics.TimeToAllMs)
	}
	if !maps.Equal(one.Metrics.CallsByAction, ten.Metrics.CallsByAction) {
		t.Errorf("workers changed the calls: %v vs %v", one.Metrics.CallsByAction, ten.Metrics.CallsByAction)
	}
	// Every node needs 10 addresses; a g7.large ENI holds 6: two ENIs.
	if got := one.Metrics.CallsByAction["CreateNetworkInterface"]; got != 12 {
		t.Errorf("6 nodes × 2 ENIs: %d creates", got)
	}
	// 20 ms per call and 100 QPS: even one node takes at least a few
	// calls' time, and the limiter bounds the whole run from below.
	if ten.Metrics.TimeToAllMs < ten.Metrics.LowerBoundMs || ten.Metrics.LowerBoundMs <= 0 {
		t.Errorf("faster than the limiter allows: %.0f ms < %.0f ms", ten.Metrics.TimeToAllMs, ten.Metrics.LowerBoundMs)
	}
	if one.Metrics.Nodes != 6 || one.Params["workers"] != 1 || one.Run.Daemon["min_pool_size"] != 10 || one.Kind != "peer" {
		t.Errorf("result: %+v %v %v", one.Metrics, one.Params, one.Run.Daemon)
	}
}

// TestMain keeps an HTTP proxy from carrying the SDK's loopback calls
// to fakecloud.
func TestMain(m *testing.M) { noproxy.Main(m) }
