package node

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/internal/noproxy"
)

func runNodeT(t *testing.T, o Options) *bench.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Metrics.PodsFailed != 0 {
		t.Fatalf("%s: %d pods failed", r.Name, r.Metrics.PodsFailed)
	}
	return r
}

// quickBurst is a cold burst small enough for a test and scaled so that
// the batch window (200ms simulated, 100ms real) is large against the
// spread of the 40 arrivals (a few ms, even under -race).
func quickBurst(pool PoolPolicy) Options {
	return Options{Scenario: ScenarioColdBurst, Pods: 40, Seed: 7, TimeScale: 0.5, Pool: pool}
}

// quickChurn is a churn whose pods fit one ENI (20 + at most 6 on an
// ENI of 30): which address a pod gets then cannot change which ENI the
// pool grows or shrinks.
func quickChurn(pool PoolPolicy) Options {
	return Options{Scenario: ScenarioWarmChurn, Pods: 20, Seed: 7, TimeScale: 0.2, Pool: pool,
		Duration: 30 * time.Second, Interval: 5 * time.Second}
}

// TestNodeSameSeedSameCalls is the acceptance's "two runs with the same
// seed give identical call counts", for a cold burst and a warm churn.
func TestNodeSameSeedSameCalls(t *testing.T) {
	for _, o := range []Options{quickBurst(DefaultPool), quickChurn(DefaultPool)} {
		a, b := runNodeT(t, o), runNodeT(t, o)
		if !maps.Equal(a.Metrics.CallsByAction, b.Metrics.CallsByAction) || !maps.Equal(a.Metrics.WarmupCallsByAction, b.Metrics.WarmupCallsByAction) {
			t.Errorf("%s: calls differ between two runs with seed %d:\n%v (warm-up %v)\n%v (warm-up %v)", a.Name, o.Seed,
				a.Metrics.CallsByAction, a.Metrics.WarmupCallsByAction, b.Metrics.CallsByAction, b.Metrics.WarmupCallsByAction)
		}
		if a.Metrics.CallsByAction["CreateNetworkInterface"] == 0 && a.Metrics.CallsByAction["AssignPrivateIpAddresses"] == 0 {
			t.Errorf("%s: no allocating call at all: %v", a.Name, a.Metrics.CallsByAction)
		}
		if a.Metrics.Pods != b.Metrics.Pods || a.Metrics.Pods == 0 {
			t.Errorf("%s: pods %d vs %d", a.Name, a.Metrics.Pods, b.Metrics.Pods)
		}
		t.Logf("%s: %v (warm-up %v)", a.Name, a.Metrics.CallsByAction, a.Metrics.WarmupCallsByAction)
	}
}

// TestNodePoolPolicyDirection: a pool allowed to keep idle addresses
// absorbs churn (fewer mutating calls per pod) at the price of holding
// idle addresses; a pool that keeps none gives every freed address back
// and asks for a new one for every new pod.
func TestNodePoolPolicyDirection(t *testing.T) {
	none := runNodeT(t, quickChurn(PoolPolicy{MinPoolSize: 0, MaxPoolSize: 0}))
	warm := runNodeT(t, quickChurn(PoolPolicy{MinPoolSize: 0, MaxPoolSize: 10}))
	t.Logf("0/0: %.2f mutating per pod, %.1f idle; 0/10: %.2f, %.1f", none.Metrics.MutatingPerPod, none.Metrics.IdleIPsAvg,
		warm.Metrics.MutatingPerPod, warm.Metrics.IdleIPsAvg)
	if none.Metrics.Pods != warm.Metrics.Pods {
		t.Fatalf("the same seed must churn the same pods: %d vs %d", none.Metrics.Pods, warm.Metrics.Pods)
	}
	if !(none.Metrics.MutatingPerPod > warm.Metrics.MutatingPerPod) {
		t.Errorf("max_pool_size 10 should need fewer mutating calls per pod than 0: %.2f vs %.2f",
			warm.Metrics.MutatingPerPod, none.Metrics.MutatingPerPod)
	}
	if none.Metrics.CallsByAction["UnassignPrivateIpAddresses"] == 0 || warm.Metrics.CallsByAction["UnassignPrivateIpAddresses"] != 0 {
		t.Errorf("0/0 gives addresses back, 0/10 keeps them: unassigns %d vs %d",
			none.Metrics.CallsByAction["UnassignPrivateIpAddresses"], warm.Metrics.CallsByAction["UnassignPrivateIpAddresses"])
	}
	if !(none.Metrics.IdleIPsAvg < warm.Metrics.IdleIPsAvg) {
		t.Errorf("0/10 should hold more idle addresses than 0/0: %.1f vs %.1f", warm.Metrics.IdleIPsAvg, none.Metrics.IdleIPsAvg)
	}
}

// TestNodeColdBurstResult checks what a cold burst reports: every pod,
// latencies in order, time to all, series for the plots.
func TestNodeColdBurstResult(t *testing.T) {
	o := quickBurst(PoolPolicy{MinPoolSize: 10, MaxPoolSize: 30})
	o.Profile, o.Command = "fast", "terway-bench node --test"
	r := runNodeT(t, o)
	m := r.Metrics
	if m.Pods != 40 || !(0 < m.AllocP50Ms && m.AllocP50Ms <= m.AllocP90Ms && m.AllocP90Ms <= m.AllocP99Ms && m.AllocP99Ms <= m.AllocMaxMs) ||
		m.TimeToAllMs < m.AllocMaxMs || m.CallsPerPod <= 0 || m.MutatingPerPod <= 0 || m.WallSeconds <= 0 {
		t.Errorf("metrics: %+v", m)
	}
	if m.WarmupCallsByAction["CreateNetworkInterface"] != 1 {
		t.Errorf("min_pool_size 10 warms one ENI before the burst: %v", m.WarmupCallsByAction)
	}
	if r.Run.Profile != "fast" || r.Run.Seed != 7 || r.Run.TimeScale != 0.5 || r.Run.Daemon["min_pool_size"] != 10 ||
		r.Run.Machine.CPUs == 0 || r.Command != o.Command || r.Params["pool"] != "10/30" {
		t.Errorf("run info: %+v %v %q", r.Run, r.Params, r.Command)
	}
	want := map[string]bool{"pods-ready": false, "idle-ips": false, "alloc-cdf": false, "calls:CreateNetworkInterface": false}
	for _, s := range r.Series {
		if _, ok := want[s.Name]; ok && len(s.X) > 0 && len(s.X) == len(s.Y) {
			want[s.Name] = true
		}
	}
	for name, ok := range want {
		if !ok {
			t.Errorf("series %s missing or empty", name)
		}
	}
}

// TestMain keeps an HTTP proxy from carrying the SDK's loopback calls
// to fakecloud.
func TestMain(m *testing.M) { noproxy.Main(m) }
