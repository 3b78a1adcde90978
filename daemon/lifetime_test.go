package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/rpc"
)

// TestServeStopsCloudCallsInFlight ends Serve's context while the cloud
// holds one of the daemon's calls (a pause fault that is never lifted):
// Serve returns once that call was cancelled and the store and the lock
// are closed, so a process may exit as soon as Serve returns. The daemon
// has no closer goroutine: ending the context is all it takes.
func TestServeStopsCloudCallsInFlight(t *testing.T) {
	l := newLab(t)
	l.pod("default", "p1", nil)
	hold, err := l.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "CreateNetworkInterface"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.cloud.RemoveFault(hold) })
	cfg := l.daemonConfig()
	reg := prometheus.NewRegistry()
	d, err := New(ctxT(t), Options{Mode: mode.ENIMultiIP, Config: cfg, NodeName: nodeName, Kube: clientset.Wrap(l.kube), StoreNoSync: true,
		Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	<-d.Ready()
	conn, err := grpc.NewClient("unix://"+cfg.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	allocated := make(chan error, 1)
	go func() {
		_, err := alloc(t, rpc.NewTerwayBackendClient(conn), "default", "p1", "c1")
		allocated <- err
	}()
	if err := l.cloud.WaitHeld(ctxT(t), hold, 1); err != nil {
		t.Fatalf("the pod's allocation never reached CreateNetworkInterface: %v", err)
	}

	stopped := time.Now()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return within a minute while the cloud held one of its calls")
	}
	// The SDK gives up on a call after its own timeout (20 s): returning
	// well before it means the call was cancelled, not timed out.
	if took := time.Since(stopped); took >= 10*time.Second {
		t.Fatalf("Serve returned %v after its context ended: the call in flight ran into the SDK's timeout instead of being cancelled", took)
	}
	// The cloud still holds the call (the fault was never lifted, and a
	// server goes on with a call whose client left): the daemon stopped
	// waiting for it, and said so before Serve returned.
	if n := heldBy(l.cloud, hold); n != 1 {
		t.Fatalf("the fault holds %d calls, want the daemon's 1", n)
	}
	canceled := apiCalls(t, reg, "CreateNetworkInterface", "Canceled")
	if canceled != 1 {
		t.Fatalf("terway_cloud_api_calls_total{api=CreateNetworkInterface,outcome=Canceled} = %v, want 1", canceled)
	}
	select {
	case err := <-allocated:
		if err == nil {
			t.Fatal("the allocation whose cloud call was cancelled succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the allocation in flight did not end with the daemon")
	}
	// The store and the node lock were closed before Serve returned: a
	// new daemon takes them at once (New waits 5 s for the lock at most).
	l.cloud.RemoveFault(hold)
	next, err := New(ctxT(t), Options{Mode: mode.ENIMultiIP, Config: l.daemonConfig(), NodeName: nodeName, Kube: clientset.Wrap(l.kube),
		StoreNoSync: true, LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("a daemon after Serve returned: %v", err)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
}

// apiCalls reads terway_cloud_api_calls_total{api, outcome} from reg.
func apiCalls(t *testing.T, reg *prometheus.Registry, api, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "terway_cloud_api_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["api"] == api && labels["outcome"] == outcome {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// heldBy is how many calls the pause fault name holds now.
func heldBy(c *fakecloud.Cloud, name string) int {
	for _, f := range c.Faults() {
		if f.Name == name {
			return f.Held
		}
	}
	return 0
}
