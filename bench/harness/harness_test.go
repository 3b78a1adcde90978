package harness

import (
	"context"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/bench/profile"
	"github.com/terway-sim/terway/daemon/dynconfig"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/testwait"
)

// builtIn returns the built-in profile called name.
func builtIn(t *testing.T, name string) profile.Profile {
	t.Helper()
	p, err := profile.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHarnessLeavesNothing runs a harness with two nodes through an
// allocation and checks that Close leaves no goroutine, listener or
// directory behind.
func TestHarnessLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := runtime.NumGoroutine()
	h, err := New(ctx, Options{Profile: builtIn(t, "fast"), Seed: 1, TimeScale: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	dir := h.dir
	var mdAddrs []string
	for i := 0; i < 2; i++ {
		n, err := h.AddNode(ctx, NodeSpec{InstanceType: "ecs.g7.xlarge"})
		if err != nil {
			h.Close()
			t.Fatal(err)
		}
		if err := n.AddPod(ctx, "ns", "p"); err != nil {
			t.Fatal(err)
		}
		ip, err := n.Alloc(ctx, "ns", "p")
		if err != nil || !strings.HasPrefix(ip, "192.168.") {
			h.Close()
			t.Fatalf("alloc on %s: %q %v", n.Name, ip, err)
		}
		if err := n.Release(ctx, "ns", "p"); err != nil {
			t.Fatal(err)
		}
		mdAddrs = append(mdAddrs, strings.TrimPrefix(n.MetadataURL, "http://"))
	}
	if calls, _ := h.Calls(h.Nodes()[0].InstanceID); calls["CreateNetworkInterface"] != 1 {
		t.Errorf("node 1's calls are not its own: %v", calls)
	}
	api := strings.TrimPrefix(h.APIURL, "http://")
	if err := h.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("harness directory %s still there: %v", dir, err)
	}
	for _, a := range append(mdAddrs, api) {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still listening", a)
		}
	}
	testwait.Goroutines(t, 15*time.Second, before)
}

// TestScaledConfig checks that every interval, backoff and rate limit
// eni_conf can set is scaled, defaults included, and that the rest is
// left alone.
func TestScaledConfig(t *testing.T) {
	sim := MergeConfig(BaseDaemonConfig(nil), map[string]any{"ip_batch_window": "300ms", "rate_limit": map[string]int{"CreateNetworkInterface": 100},
		"backoff_override": map[string]any{"eni_create": map[string]any{"Duration": "4s"}}})
	out, err := scaledConfig(sim, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IPBatchWindow.Duration != 30*time.Millisecond || cfg.GCPeriod.Duration != 30*time.Second ||
		cfg.IPExhaustedInhibit.Duration != 30*time.Second || cfg.PoolCheckPeriod.Duration != 12*time.Second {
		t.Errorf("durations: batch %v gc %v inhibit %v pool check %v", cfg.IPBatchWindow, cfg.GCPeriod, cfg.IPExhaustedInhibit, cfg.PoolCheckPeriod)
	}
	if cfg.RateLimitFor("CreateNetworkInterface") != 1000 || cfg.RateLimitFor("DescribeVSwitches") != 3000 {
		t.Errorf("rate limits per minute must grow by 1/scale: %v", cfg.RateLimit)
	}
	if b := cfg.Backoff("eni_create"); b.Duration != 400*time.Millisecond || b.Steps != 2 || b.Factor != 2 {
		t.Errorf("eni_create: %+v (an override keeps its other fields)", b)
	}
	if b := cfg.Backoff("throttled"); b.Duration != 500*time.Millisecond || b.Cap != 6*time.Second || b.Steps != 5 {
		t.Errorf("throttled (a daemon schedule eni_conf has no default for): %+v", b)
	}
	if cfg.MaxPoolSize != 5 || cfg.VSwitchSelectionPolicy != "ordered" {
		t.Errorf("non-time keys changed: max %d policy %s", cfg.MaxPoolSize, cfg.VSwitchSelectionPolicy)
	}
	if sim["ip_batch_window"] != "300ms" {
		t.Error("the simulated configuration was modified")
	}
}

// TestNodeConfigDynamic: a node's eni_conf takes the path terwayd's does,
// so a node labelled terway-config=<name> gets that ConfigMap merged in.
func TestNodeConfigDynamic(t *testing.T) {
	kube := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "big", Labels: map[string]string{k8s.LabelDynamicConfig: "big-pool"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: dynconfig.DefaultNamespace, Name: "big-pool"},
			Data: map[string]string{dynconfig.Key: `{"max_pool_size":20}`}})
	base := BaseDaemonConfig(nil)
	for node, want := range map[string]int{"plain": 5, "big": 20} {
		cfg, err := NodeConfig(context.Background(), kube, node, base)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxPoolSize != want || cfg.ClusterID != defaultClusterID {
			t.Errorf("%s: max_pool_size %d cluster_id %s, want %d %s", node, cfg.MaxPoolSize, cfg.ClusterID, want, defaultClusterID)
		}
	}
}

// TestHarnessAppliesProfile checks the world of a harness: the profile's
// delays in the settings, its latencies as faults, the throttle window
// scaled with the run.
func TestHarnessAppliesProfile(t *testing.T) {
	slow := builtIn(t, "slow")
	h, err := New(context.Background(), Options{Profile: slow, Seed: 3, TimeScale: 0.5,
		ThrottleWindow: 10 * time.Second, Throttle: map[string]int{"*": 7}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	s := h.Cloud.Settings()
	if s.AttachDelay.D() != 6*time.Second || s.MetadataLag.D() != 5*time.Second || s.ConsistencyWindow.D() != 2*time.Second {
		t.Errorf("delays not applied (fakecloud scales them itself): %+v", s)
	}
	if s.ThrottleWindow.D() != 5*time.Second || s.Throttle["*"] != 7 {
		t.Errorf("throttle window %v (want 10s × 0.5), budgets %v", s.ThrottleWindow, s.Throttle)
	}
	if got, want := len(h.Cloud.Faults()), len(slow.Faults()); got != want || want == 0 {
		t.Errorf("%d latency faults installed, want %d (one per action)", got, want)
	}
	if h.Real(10*time.Second) != 5*time.Second || h.Sim(time.Second) != 2*time.Second {
		t.Errorf("time conversion: %v %v", h.Real(10*time.Second), h.Sim(time.Second))
	}
}

// TestMain keeps an HTTP proxy from carrying the SDK's loopback calls
// to fakecloud.
func TestMain(m *testing.M) { noproxy.Main(m) }
