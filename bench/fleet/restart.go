package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/rpc"
)

// restartQuiet is how long (simulated) the fleet's calls must not change
// for the restart phase to count as settled, and restartSettleMax the
// longest it waits for that.
const (
	restartQuiet     = 5 * time.Second
	restartSettleMax = 5 * time.Minute
)

// restartPhase is what the fleet-restart scenario measures: every
// daemon stopped and started again at once (a DaemonSet rollout with
// maxUnavailable 100 %, or a node agent upgrade), its pods running.
type restartPhase struct {
	t0       time.Time
	base     []fakecloud.CallStat
	restarts int64 // crash-loop restarts before the phase
	final    []fakecloud.CallStat
	finalAt  time.Time
	// confirmed counts pods whose sandbox got its address again; changed
	// those that got another one (a double assignment in waiting).
	confirmed, changed atomic.Int64
	lat                []time.Duration
	mu                 sync.Mutex
	firstErr           error
}

// restartAll stops every daemon, then starts them all at once; each
// pod's sandbox asks again for its address (AllocIP with the container ID
// that got it, as a retried ADD does) and must get the same one. The
// phase ends when every pod is confirmed and the fleet's calls have been
// quiet for restartQuiet.
func (f *fleet) restartAll(ctx context.Context) *restartPhase {
	ph := &restartPhase{restarts: f.restart.Load()}
	var wg sync.WaitGroup
	for _, n := range f.nodes {
		if n.run == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.run.stop(); err != nil {
				ph.fail(fmt.Errorf("stop %s: %w", n.name, err))
			}
			n.run = nil
		}()
	}
	wg.Wait()
	ph.base, ph.t0 = f.fc.Calls(), time.Now()
	for _, n := range f.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); f.restartNode(ctx, n, ph) }()
	}
	wg.Wait()
	ph.final, ph.finalAt = f.settle(ctx)
	return ph
}

func (ph *restartPhase) fail(err error) {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	if ph.firstErr == nil {
		ph.firstErr = err
	}
}

// restartNode starts n's daemon again and confirms each pod's address.
func (f *fleet) restartNode(ctx context.Context, n *fleetNode, ph *restartPhase) {
	run, err := f.startDaemon(ctx, n)
	if err != nil {
		ph.fail(fmt.Errorf("restart %s: %w", n.name, err))
		return
	}
	n.run = run
	conn, err := grpc.NewClient("unix://"+n.cfg.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		ph.fail(fmt.Errorf("dial %s: %w", n.cfg.SocketPath, err))
		return
	}
	defer conn.Close()
	c := rpc.NewTerwayBackendClient(conn)
	for _, p := range n.pods {
		if p.ip == "" {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, max(f.scale(fleetADDTimeout), fleetADDTimeoutFloor))
		cid := fmt.Sprintf("%s-s%d", p.name, p.attempts)
		r, err := c.AllocIP(cctx, &rpc.AllocIPRequest{K8SPodNamespace: fleetNamespace, K8SPodName: p.name,
			K8SPodInfraContainerId: cid, Netns: n.dir + "/netns/" + cid, IfName: "eth0"})
		cancel()
		ip := fleetPodIP(r)
		switch {
		case err != nil || ip == "":
			ph.fail(fmt.Errorf("pod %s after the restart: %v %w", p.name, r, err))
			continue
		case ip != p.ip:
			ph.changed.Add(1)
			ph.fail(fmt.Errorf("pod %s had %s before the restart and %s after", p.name, p.ip, ip))
		}
		ph.confirmed.Add(1)
		ph.mu.Lock()
		ph.lat = append(ph.lat, f.sim(time.Now())-f.sim(ph.t0))
		ph.mu.Unlock()
	}
}

// settle waits until the fleet's calls stop changing (restartQuiet of
// simulated time, at most restartSettleMax) and returns them with the
// time they last changed.
func (f *fleet) settle(ctx context.Context) ([]fakecloud.CallStat, time.Time) {
	last, lastAt := f.fc.Calls(), time.Now()
	deadline := time.Now().Add(f.scale(restartSettleMax))
	for time.Now().Before(deadline) && f.wait(ctx, f.scale(restartQuiet)) {
		now := f.fc.Calls()
		if slices.Equal(now, last) {
			break
		}
		last, lastAt = now, time.Now()
	}
	return last, lastAt
}

// restartResult is the fleet-restart result: the calls of the restart
// phase only (the cold start before it is the fleet scenario's), the
// time until every pod was confirmed, crash loops and changed addresses
// (both must be 0).
func (f *fleet) restartResult(ph *restartPhase) (*bench.Result, error) {
	res := f.result(0, 0, f.idleAddresses())
	res.Scenario = "fleet-restart"
	m := &res.Metrics
	calls, throttled := fleetAggregate(ph.final)
	before, beforeTh := fleetAggregate(ph.base)
	m.CallsByAction, m.Throttled, m.MutatingCalls = map[string]int64{}, 0, 0
	var total int64
	for a, n := range calls {
		if d := n - before[a]; d > 0 {
			m.CallsByAction[a] = d
			total += d
			if bench.IsMutating(a) {
				m.MutatingCalls += d
			}
		}
	}
	thByAction := map[string]int64{}
	for a, n := range throttled {
		if d := n - beforeTh[a]; d > 0 {
			thByAction[a] = d
			m.Throttled += d
		}
	}
	m.CallsPerPod = float64(total) / float64(f.total)
	m.MutatingPerPod = float64(m.MutatingCalls) / float64(f.total)
	m.PodsFailed = int(f.total - ph.confirmed.Load())
	slices.Sort(ph.lat)
	m.AllocP50Ms, m.AllocP90Ms = fleetMs(fleetQuantile(ph.lat, 0.5)), fleetMs(fleetQuantile(ph.lat, 0.9))
	m.AllocP99Ms, m.AllocMaxMs = fleetMs(fleetQuantile(ph.lat, 0.99)), fleetMs(fleetQuantile(ph.lat, 1))
	m.TimeToAllMs = m.AllocMaxMs
	m.LowerBoundMs, m.RatioToLowerBound, m.MemoryPerDaemonMiB = 0, 0, 0
	obs := res.Params["observed"].(map[string]any)
	obs["daemonRestarts"] = f.restart.Load() - ph.restarts
	obs["podsChangedAddress"] = ph.changed.Load()
	obs["throttledByAction"] = thByAction
	obs["settledAfterMs"] = fleetMs(f.sim(ph.finalAt) - f.sim(ph.t0))
	for _, k := range []string{"lowerBoundAction", "fluidLowerBoundMs", "stackPerDaemonMiB", "daemonStartP50Ms", "daemonStartMaxMs", "allocRetries"} {
		delete(obs, k)
	}
	res.Series = nil
	if ph.firstErr != nil {
		return res, errors.Join(ErrPodsFailed, ph.firstErr)
	}
	return res, nil
}
