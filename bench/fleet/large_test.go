package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/terway-sim/terway/bench"
)

// TestFleetLarge is the fleet, 1,000 nodes × 30 pods, run on
// request only (it takes minutes and a few GiB):
//
//	BENCH_FLEET_LARGE=1 GOFLAGS=-tags=grpcnotrace go test -count=1 -timeout 60m -run TestFleetLarge -v ./bench/fleet/
//
// BENCH_FLEET_NODES, BENCH_FLEET_PODS and BENCH_FLEET_SCALE change the
// size and the time scale; BENCH_FLEET_OUT=file.json writes the result.
func TestFleetLarge(t *testing.T) {
	if os.Getenv("BENCH_FLEET_LARGE") != "1" {
		t.Skip("the 1,000-node fleet runs only with BENCH_FLEET_LARGE=1 (minutes of wall time)")
	}
	o := Options{Nodes: fleetEnvInt(t, "BENCH_FLEET_NODES", 1000), PodsPerNode: fleetEnvInt(t, "BENCH_FLEET_PODS", 30),
		TimeScale: fleetDefaultScale, Seed: 1, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if v := os.Getenv("BENCH_FLEET_SCALE"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("BENCH_FLEET_SCALE: %v", err)
		}
		o.TimeScale = s
	}
	o.Command = fmt.Sprintf("BENCH_FLEET_LARGE=1 BENCH_FLEET_NODES=%d BENCH_FLEET_PODS=%d BENCH_FLEET_SCALE=%g "+
		"GOFLAGS=-tags=grpcnotrace go test -count=1 -timeout 60m -run TestFleetLarge -v ./bench/fleet/", o.Nodes, o.PodsPerNode, o.TimeScale)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if res != nil {
		m := res.Metrics
		t.Logf("%d×%d at time scale %g: all pods in %.1f s simulated (wall %.1f s), %d failed, %d throttled, %.3f calls/pod "+
			"(%.3f mutating), lower bound %.1f s, ratio %.2f, %.2f MiB heap per daemon, alloc p50/p99 %.1f/%.1f s",
			o.Nodes, o.PodsPerNode, o.TimeScale, m.TimeToAllMs/1000, m.WallSeconds, m.PodsFailed, m.Throttled, m.CallsPerPod,
			m.MutatingPerPod, m.LowerBoundMs/1000, m.RatioToLowerBound, m.MemoryPerDaemonMiB, m.AllocP50Ms/1000, m.AllocP99Ms/1000)
		t.Logf("calls by action: %v; observed: %v", m.CallsByAction, res.Params["observed"])
		if out := os.Getenv("BENCH_FLEET_OUT"); out != "" {
			if err := bench.WriteJSON(out, res); err != nil {
				t.Error(err)
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Metrics.LowerBoundMs > 0 && res.Metrics.RatioToLowerBound < 1 {
		t.Errorf("the fleet beat the lower bound: ratio %.2f", res.Metrics.RatioToLowerBound)
	}
}

func fleetEnvInt(t *testing.T, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return n
}
