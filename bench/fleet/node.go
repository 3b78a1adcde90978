package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/terway-sim/terway/daemon"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/rpc"
)

// Kubelet-like behaviour of the fleet, in simulated time.
const (
	// fleetADDTimeout is the deadline of one ADD: kubelet's 2-minute CNI
	// timeout. It is never below fleetADDTimeoutFloor of real time, so a
	// busy machine does not turn slow answers into failures.
	fleetADDTimeout      = 2 * time.Minute
	fleetADDTimeoutFloor = 30 * time.Second
	// fleetSandboxRetry is how long kubelet waits before a new sandbox
	// after a failed ADD (its pod-worker backoff, 10 s, plus up to 50 %
	// jitter).
	fleetSandboxRetry = 10 * time.Second
	// fleetCrashLoop is the first restart delay of a daemon whose start
	// failed (CrashLoopBackOff: 10 s doubling to 5 min).
	fleetCrashLoop    = 10 * time.Second
	fleetCrashLoopCap = 5 * time.Minute
)

// fleetStartOffsets spreads n starts uniformly over jitter, reproducibly.
func fleetStartOffsets(seed int64, n int, jitter time.Duration) []time.Duration {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed0f1ee7))
	out := make([]time.Duration, n)
	for i := range out {
		if jitter > 0 {
			out[i] = time.Duration(rng.Int64N(int64(jitter)))
		}
	}
	return out
}

// fleetDaemon is a running daemon and its serving goroutine.
type fleetDaemon struct {
	d      *daemon.Daemon
	served chan error
}

func (r *fleetDaemon) stop() error {
	err := r.d.Close()
	return errors.Join(err, <-r.served)
}

// runNode is one node's life: wait for its start, start the daemon
// (restarting it as a DaemonSet would if it fails), then ADD every pod at
// once over the daemon's socket.
func (f *fleet) runNode(ctx context.Context, n *fleetNode) {
	if !f.wait(ctx, n.offset) {
		n.startErr = ctx.Err()
		return
	}
	if n.run, n.startErr = f.startDaemon(ctx, n); n.startErr != nil {
		return
	}
	n.readyAt = time.Now()
	f.daemonsUp.Add(1)
	conn, err := grpc.NewClient("unix://"+n.cfg.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.startErr = fmt.Errorf("dial %s: %w", n.cfg.SocketPath, err)
		return
	}
	defer conn.Close()
	c := rpc.NewTerwayBackendClient(conn)
	var wg sync.WaitGroup
	for j, p := range n.pods {
		wg.Add(1)
		go func() { defer wg.Done(); f.addPod(ctx, n, j, c, p) }()
	}
	wg.Wait()
}

// startDaemon starts node n's daemon, retrying with CrashLoopBackOff.
func (f *fleet) startDaemon(ctx context.Context, n *fleetNode) (*fleetDaemon, error) {
	delay := fleetCrashLoop
	for {
		d, err := daemon.New(ctx, daemon.Options{Mode: mode.ENIMultiIP, Config: n.cfg, NodeName: n.name, Kube: clientset.Wrap(n.api),
			Logger: f.o.DaemonLogger, HTTPClient: f.srv.mdClient, StoreNoSync: true, Clock: f.clock})
		if err == nil {
			r := &fleetDaemon{d: d, served: make(chan error, 1)}
			// The daemon lives until close, not as long as the run's context.
			go func() { r.served <- d.Serve(context.Background()) }()
			<-d.Ready()
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("start daemon: %w", err)
		}
		f.restart.Add(1)
		f.o.Logger.Debug("daemon start failed; restarting", "node", n.name, "in", delay, "err", err)
		if !f.wait(ctx, f.scale(delay)) {
			return nil, fmt.Errorf("start daemon: %w", err)
		}
		delay = min(2*delay, fleetCrashLoopCap)
	}
}

// addPod is the CNI ADD of one pod as kubelet drives it: on failure a
// DEL of the failed sandbox, then a new sandbox after 10–15 s.
func (f *fleet) addPod(ctx context.Context, n *fleetNode, j int, c rpc.TerwayBackendClient, p *fleetPod) {
	rng := rand.New(rand.NewPCG(uint64(f.o.Seed), uint64(n.i)<<20|uint64(j)))
	timeout := max(f.scale(fleetADDTimeout), fleetADDTimeoutFloor)
	p.start = time.Now()
	for attempt := 1; ; attempt++ {
		p.attempts = attempt
		cid := fmt.Sprintf("%s-s%d", p.name, attempt)
		cctx, cancel := context.WithTimeout(ctx, timeout)
		r, err := c.AllocIP(cctx, &rpc.AllocIPRequest{K8SPodNamespace: fleetNamespace, K8SPodName: p.name,
			K8SPodInfraContainerId: cid, Netns: filepath.Join(n.dir, "netns", cid), IfName: "eth0"})
		cancel()
		if ip := fleetPodIP(r); err == nil && ip != "" {
			p.ip, p.done, p.err = ip, time.Now(), nil
			if f.podsReady.Add(1) == f.total {
				f.finish()
			}
			return
		}
		if err == nil {
			err = fmt.Errorf("AllocIP answered without an address: %v", r)
		}
		p.err = err
		if ctx.Err() != nil {
			return
		}
		f.allocRetries.Add(1)
		cctx, cancel = context.WithTimeout(ctx, timeout)
		_, _ = c.ReleaseIP(cctx, &rpc.ReleaseIPRequest{K8SPodNamespace: fleetNamespace, K8SPodName: p.name, K8SPodInfraContainerId: cid})
		cancel()
		if !f.wait(ctx, f.scale(fleetSandboxRetry+time.Duration(rng.Float64()*0.5*float64(fleetSandboxRetry)))) {
			return
		}
	}
}

func fleetPodIP(r *rpc.AllocIPReply) string {
	if r == nil || !r.Success || len(r.NetConfs) == 0 || r.NetConfs[0].BasicInfo == nil || r.NetConfs[0].BasicInfo.PodIP == nil {
		return ""
	}
	return r.NetConfs[0].BasicInfo.PodIP.IPv4
}

// wait sleeps d of real time; false when ctx ended first.
func (f *fleet) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
