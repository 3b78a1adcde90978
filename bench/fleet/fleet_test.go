package fleet

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/profile"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/testwait"
)

// fleetCheck runs a fleet and checks what every fleet must satisfy: no
// pod failed, every pod has its own address and the cloud has it on one
// of the pod's node's ENIs, the figures are consistent with each other,
// nothing beats the lower bound, and nothing is left behind.
func fleetCheck(t *testing.T, o Options) *bench.Result {
	t.Helper()
	o.TempDir = t.TempDir()
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	inspected := false
	res, err := runFleet(ctx, o, func(f *fleet) {
		inspected = true
		owner := map[string]string{} // address → instance, from the cloud
		for _, e := range f.fc.ENIs() {
			for _, a := range append([]netip.Addr{e.PrimaryIP}, e.IPv4...) {
				owner[a.String()] = e.InstanceID
			}
		}
		seen := map[string]string{}
		vpc := netip.MustParsePrefix(fleetVPCCIDR)
		for _, n := range f.nodes {
			for _, p := range n.pods {
				if prev, dup := seen[p.ip]; dup {
					t.Errorf("%s and %s both got %s", prev, p.name, p.ip)
				}
				seen[p.ip] = p.name
				if a, err := netip.ParseAddr(p.ip); err != nil || !vpc.Contains(a) {
					t.Errorf("pod %s got %q, not an address of the VPC", p.name, p.ip)
				}
				if owner[p.ip] != n.id {
					t.Errorf("pod %s of %s has %s, which the cloud has on %q", p.name, n.id, p.ip, owner[p.ip])
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("fleet: %v", err)
	}
	if !inspected {
		t.Fatal("the fleet was not inspected before teardown")
	}
	m := res.Metrics
	pods := o.Nodes * o.PodsPerNode
	if res.Kind != "fleet" || res.Scenario != "fleet" || res.Schema != bench.SchemaVersion || m.Pods != pods || m.Nodes != o.Nodes || m.PodsFailed != 0 {
		t.Fatalf("result header/pods: kind %q scenario %q pods %d/%d failed %d", res.Kind, res.Scenario, m.Pods, m.Nodes, m.PodsFailed)
	}
	var total int64
	for _, n := range m.CallsByAction {
		total += n
	}
	if got := float64(total) / float64(pods); got != m.CallsPerPod {
		t.Errorf("calls per pod %g, calls by action sum to %g per pod", m.CallsPerPod, got)
	}
	// Every node needs at least one ENI: created and attached at least
	// once each (throttled attempts included in the counts).
	if m.CallsByAction["CreateNetworkInterface"] < int64(o.Nodes) || m.CallsByAction["AttachNetworkInterface"] < int64(o.Nodes) ||
		m.MutatingCalls < 2*int64(o.Nodes) || m.MutatingCalls > total {
		t.Errorf("calls inconsistent with %d nodes: %v (mutating %d)", o.Nodes, m.CallsByAction, m.MutatingCalls)
	}
	// Nothing beats the lower bound (0 when no budget binds).
	if m.LowerBoundMs < 0 || (m.LowerBoundMs > 0 && m.RatioToLowerBound < 1) {
		t.Errorf("time %.0f ms against a lower bound of %.0f ms: ratio %.2f", m.TimeToAllMs, m.LowerBoundMs, m.RatioToLowerBound)
	}
	if !(m.AllocP50Ms > 0 && m.AllocP50Ms <= m.AllocP99Ms && m.AllocP99Ms <= m.AllocMaxMs && m.AllocMaxMs <= m.TimeToAllMs) {
		t.Errorf("latencies p50 %g p99 %g max %g, time to all %g", m.AllocP50Ms, m.AllocP99Ms, m.AllocMaxMs, m.TimeToAllMs)
	}
	if m.IdleIPsEnd < 0 || m.MemoryPerDaemonMiB <= 0 || m.WallSeconds <= 0 {
		t.Errorf("idle %d, memory per daemon %g MiB, wall %g s", m.IdleIPsEnd, m.MemoryPerDaemonMiB, m.WallSeconds)
	}
	ready := fleetSeries(t, res, "pods-ready")
	for i := 1; i < len(ready.Y); i++ {
		if ready.Y[i] < ready.Y[i-1] || ready.X[i] < ready.X[i-1] {
			t.Fatalf("pods-ready goes back at sample %d: %v", i, ready)
		}
	}
	if last := ready.Y[len(ready.Y)-1]; last != float64(pods) {
		t.Errorf("pods-ready ends at %g, want %d", last, pods)
	}
	if th := fleetSeries(t, res, "throttled"); th.Y[len(th.Y)-1] != float64(m.Throttled) {
		t.Errorf("throttled series ends at %g, metrics say %d", th.Y[len(th.Y)-1], m.Throttled)
	}
	fleetTornDown(t, o.TempDir, goroutines)
	return res
}

func fleetSeries(t *testing.T, r *bench.Result, name string) bench.Series {
	t.Helper()
	for _, s := range r.Series {
		if s.Name == name {
			if len(s.X) == 0 || len(s.X) != len(s.Y) {
				t.Fatalf("series %s: %d x, %d y", name, len(s.X), len(s.Y))
			}
			return s
		}
	}
	t.Fatalf("no series %s", name)
	return bench.Series{}
}

// fleetTornDown checks that the fleet removed its directory and that the
// goroutines it started ended (a few of the runtime's and the HTTP
// client's may take a moment).
func fleetTornDown(t *testing.T, dir string, before int) {
	t.Helper()
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Errorf("left in %s: %v %v", dir, left, err)
	}
	const tolerance = 5
	testwait.Goroutines(t, 20*time.Second, before+tolerance)
}

// TestFleetSmall is 10 nodes × 10 pods at 1/20 of real time under
// fakecloud's default budgets (far above what 10 nodes need).
func TestFleetSmall(t *testing.T) {
	res := fleetCheck(t, Options{Nodes: 10, PodsPerNode: 10, TimeScale: 0.05, Seed: 7, StartJitter: 5 * time.Second})
	if res.Metrics.Throttled != 0 {
		t.Errorf("%d calls throttled with budgets far above the demand", res.Metrics.Throttled)
	}
	t.Logf("10×10: %.1f s simulated, %.2f calls/pod, ratio %.1f, %.2f MiB/daemon, wall %.1f s",
		res.Metrics.TimeToAllMs/1000, res.Metrics.CallsPerPod, res.Metrics.RatioToLowerBound, res.Metrics.MemoryPerDaemonMiB, res.Metrics.WallSeconds)
}

// TestFleetThrottled squeezes the ENI budgets to 4 calls per 10 s window
// for 8 nodes: calls get throttled, the daemons and kubelet's retries
// still give every pod an address, and the time is at least what the
// budgets allow.
// Every daemon restarted at once, pods running, finds its limits and
// its pods' addresses without changing anything in the cloud: no
// mutating call, no DescribeInstanceTypes, no crash loop, every pod's
// sandbox gets its own address again.
func TestFleetRestart(t *testing.T) {
	o := Options{Nodes: 8, PodsPerNode: 10, TimeScale: 0.1, Seed: 3, StartJitter: time.Second, Restart: true, TempDir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("fleet restart: %v", err)
	}
	m := res.Metrics
	obs := res.Params["observed"].(map[string]any)
	if res.Scenario != "fleet-restart" || res.Name != "fleet-restart-8x10" || m.Pods != 80 || m.PodsFailed != 0 {
		t.Fatalf("result %s/%s: pods %d, failed %d", res.Scenario, res.Name, m.Pods, m.PodsFailed)
	}
	if m.MutatingCalls != 0 || m.CallsByAction["DescribeInstanceTypes"] != 0 || obs["daemonRestarts"] != int64(0) || obs["podsChangedAddress"] != int64(0) {
		t.Errorf("restart: calls %v (mutating %d), observed %v; want no mutating call, no DescribeInstanceTypes, no crash loop, no address changed",
			m.CallsByAction, m.MutatingCalls, obs)
	}
	if m.CallsByAction["DescribeNetworkInterfaces"] == 0 {
		t.Errorf("restart: calls %v; each daemon's restore reads its ENIs from the cloud", m.CallsByAction)
	}
}

func TestFleetThrottled(t *testing.T) {
	o := Options{Nodes: 8, PodsPerNode: 5, TimeScale: 0.05, Seed: 3, StartJitter: time.Second,
		ThrottleWindow: 10 * time.Second,
		Throttle:       map[string]int{"CreateNetworkInterface": 4, "AttachNetworkInterface": 4}}
	res := fleetCheck(t, o)
	m := res.Metrics
	if m.Throttled == 0 {
		t.Errorf("no call throttled: %v", m.CallsByAction)
	}
	// 8 ENIs at 4 per 10 s: the last one in the second window, 10 s.
	if m.LowerBoundMs < 10000 || m.RatioToLowerBound < 1 {
		t.Errorf("lower bound %.0f ms, ratio %.2f; want at least 10 s and 1", m.LowerBoundMs, m.RatioToLowerBound)
	}
	obs := res.Params["observed"].(map[string]any)
	if a := obs["lowerBoundAction"]; a != "CreateNetworkInterface" && a != "AttachNetworkInterface" {
		t.Errorf("the bound is set by %v, want an ENI action", a)
	}
	t.Logf("throttled: %.1f s simulated, %d throttled, ratio %.2f, retries %v", m.TimeToAllMs/1000, m.Throttled, m.RatioToLowerBound, obs["allocRetries"])
}

// TestFleetSameSeed runs one small fleet twice: the same seed gives the
// same calls. The scale leaves this machine's own delays far below the
// profile's margins (the daemon's polls fall a second or more of
// simulated time away from the transitions they look for). Only
// DescribeInstanceTypes may differ: a daemon asks the cloud when no node
// of its type has published the limits yet, which is a race between
// daemons starting within milliseconds; it is at least one and at most
// one per node.
func TestFleetSameSeed(t *testing.T) {
	o := Options{Nodes: 6, PodsPerNode: 12, TimeScale: 0.25, Seed: 11, StartJitter: 2 * time.Second}
	a, b := fleetCheck(t, o), fleetCheck(t, o)
	for _, r := range []*bench.Result{a, b} {
		if n := r.Metrics.CallsByAction["DescribeInstanceTypes"]; n < 1 || n > int64(o.Nodes) {
			t.Errorf("%d DescribeInstanceTypes for %d nodes", n, o.Nodes)
		}
	}
	ca, cb := maps.Clone(a.Metrics.CallsByAction), maps.Clone(b.Metrics.CallsByAction)
	delete(ca, "DescribeInstanceTypes")
	delete(cb, "DescribeInstanceTypes")
	if !maps.Equal(ca, cb) {
		t.Fatalf("same seed, different calls:\n%v\n%v", a.Metrics.CallsByAction, b.Metrics.CallsByAction)
	}
}

// TestFleetDeadline gives the fleet less time than an ENI takes to
// attach: pods fail, the result says so next to ErrPodsFailed, and
// the fleet is still torn down completely.
func TestFleetDeadline(t *testing.T) {
	dir := t.TempDir()
	goroutines := runtime.NumGoroutine()
	res, err := Run(context.Background(), Options{Nodes: 4, PodsPerNode: 3, TimeScale: 0.05, StartJitter: time.Second,
		Timeout: 2 * time.Second, TempDir: dir})
	if !errors.Is(err, ErrPodsFailed) || res == nil {
		t.Fatalf("want ErrPodsFailed and a result, got %v (result %v)", err, res != nil)
	}
	if m := res.Metrics; m.PodsFailed == 0 || m.PodsFailed > m.Pods || m.TimeToAllMs < 2000 {
		t.Errorf("%d of %d pods failed, time %g ms", m.PodsFailed, m.Pods, m.TimeToAllMs)
	}
	fleetTornDown(t, dir, goroutines)
}

func TestFleetLowerBound(t *testing.T) {
	s := fakecloud.Settings{Throttle: map[string]int{"*": 100, "A": 10, "Free": 0}}
	calls := map[string]int64{"A": 25, "B": 150, "Free": 1 << 20}
	throttled := map[string]int64{"A": 5, "B": 0}
	// A: 20 admitted at 10 per window: the 20th in window 1 at the
	// earliest, so 1 min (fluid: 20 / 10 × 60 s = 2 min). B: 150 at 100:
	// window 1, 1 min (fluid 90 s). The first action in order wins a tie.
	d, fluid, a := fleetLowerBound(calls, throttled, s, time.Minute)
	if d != time.Minute || fluid != 2*time.Minute || a != "A" {
		t.Fatalf("bound %v (fluid %v) by %q, want 1m (2m) by A", d, fluid, a)
	}
	calls["B"] = 301 // window 3 at the earliest
	if d, _, a := fleetLowerBound(calls, throttled, s, time.Minute); d != 3*time.Minute || a != "B" {
		t.Fatalf("bound %v by %q, want 3m by B", d, a)
	}
	if d, _, a := fleetLowerBound(map[string]int64{"Free": 9, "A": 10}, nil, s, time.Minute); d != 0 || a != "" {
		t.Fatalf("one window's budget or unlimited actions give a bound: %v %q", d, a)
	}
}

func TestFleetScaleConfig(t *testing.T) {
	sim, err := fleetDaemonConfig(map[string]any{"max_pool_size": 7, "ip_batch_window": "1s",
		"backoff_override": map[string]any{"eni_create": map[string]any{"Duration": "4s", "Steps": 3}},
		"rate_limit":       map[string]int{"CreateNetworkInterface": 30}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := fleetScaleConfig(sim, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	bo := run["backoff_override"].(map[string]any)
	rl := run["rate_limit"].(map[string]any)
	if run["ip_batch_window"] != "100ms" || run["gc_period"] != "30s" || run["max_pool_size"] != float64(7) ||
		bo["eni_create"].(map[string]any)["Duration"] != "400ms" || bo["throttled"].(map[string]any)["Cap"] != "6s" ||
		rl["CreateNetworkInterface"] != 300 || rl["*"] != 5000 {
		t.Fatalf("scaled: batch %v gc %v pool %v backoff %v/%v rate %v/%v", run["ip_batch_window"], run["gc_period"], run["max_pool_size"],
			bo["eni_create"], bo["throttled"], rl["CreateNetworkInterface"], rl["*"])
	}
	// The simulated configuration is left as it was.
	if sim["ip_batch_window"] != "1s" || sim["gc_period"] != "5m" {
		t.Fatalf("simulated config changed: %v %v", sim["ip_batch_window"], sim["gc_period"])
	}
	if _, err := fleetScaleConfig(map[string]any{"gc_period": "soon"}, 0.1); err == nil || !strings.Contains(err.Error(), "gc_period") {
		t.Fatalf("bad duration: %v", err)
	}
}

func TestFleetOptionsRefused(t *testing.T) {
	for _, o := range []Options{{Nodes: -1}, {TimeScale: 11}, {ThrottleWindow: -time.Second}, {Profile: profile.Profile{Name: "x"}}} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if _, err := fleetInstanceType(500, 5); err == nil {
		t.Error("500 pods per node fit an instance type")
	}
	if it, err := fleetInstanceType(100, 5); err != nil || it.InstanceTypeID != "ecs.g7.4xlarge" {
		t.Errorf("100 pods: %v %v", it.InstanceTypeID, err)
	}
}

// TestMain keeps an HTTP proxy from carrying the SDK's loopback calls
// to fakecloud.
func TestMain(m *testing.M) { noproxy.Main(m) }
