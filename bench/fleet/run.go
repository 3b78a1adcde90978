package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/bench"
	"github.com/terway-sim/terway/bench/harness"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/fakecloud"
)

// fleetNamespace is where every simulated pod lives.
const fleetNamespace = "fleet"

// fleet is one simulation: the world, the nodes and what was measured.
type fleet struct {
	o       Options
	created time.Time
	itype   string
	vsws    int
	simCfg  map[string]any // eni_conf in simulated time
	runCfg  map[string]any // eni_conf as the daemons ran it (scaled)
	fc      *fakecloud.Cloud
	clock   *fleetClock // fakecloud's
	// settings are fakecloud's in world time (the throttle window
	// unscaled).
	settings fakecloud.Settings
	srv      *fleetServers
	// nodesKube is the fleet's shared API server for nodes (fleetKube).
	nodesKube *fake.Clientset
	dir       string
	nodes     []*fleetNode
	total     int64

	t0                    time.Time
	podsReady, daemonsUp  atomic.Int64
	allocRetries, restart atomic.Int64

	// finishOnce ends the measurement: when the last pod has an address,
	// or at the deadline. final are the calls at that moment.
	finishOnce sync.Once
	allReady   chan struct{}
	finalAt    time.Time
	final      []fakecloud.CallStat

	samples []fleetSample
}

// fleetNode is one simulated node: an instance, its API server (a fake
// clientset), its directory (store, lock, socket) and its daemon.
type fleetNode struct {
	i        int
	id, name string
	dir      string
	kube     *fake.Clientset // its pods and events
	// api is what its daemon sees: kube, and the fleet's nodes.
	api      fleetKube
	cfg      *config.Config
	offset   time.Duration // real time after t0 at which the daemon starts
	pods     []*fleetPod
	run      *fleetDaemon
	readyAt  time.Time
	startErr error
}

// fleetPod is one pod and what its ADD saw.
type fleetPod struct {
	name        string
	ip          string
	start, done time.Time
	attempts    int
	err         error
}

func (f *fleet) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * f.o.TimeScale)
}

// sim converts a real instant into simulated time since t0.
func (f *fleet) sim(t time.Time) time.Duration {
	return time.Duration(float64(t.Sub(f.t0)) / f.o.TimeScale)
}

func newFleet(o Options) (_ *fleet, err error) {
	f := &fleet{o: o, created: time.Now(), allReady: make(chan struct{}), total: int64(o.Nodes * o.PodsPerNode)}
	// The daemons know the cloud's throttle window, as a node knows ECS's
	// clock minute, unless the run sets another.
	extra := maps.Clone(o.Daemon)
	if extra == nil {
		extra = map[string]any{}
	}
	if _, ok := extra["throttle_window"]; !ok {
		extra["throttle_window"] = o.ThrottleWindow.String()
	}
	if f.simCfg, err = fleetDaemonConfig(extra); err != nil {
		return nil, err
	}
	if f.runCfg, err = fleetScaleConfig(f.simCfg, o.TimeScale); err != nil {
		return nil, err
	}
	_, maxPool := fleetPoolSizes(f.simCfg)
	t, err := fleetInstanceType(o.PodsPerNode, maxPool)
	if o.InstanceType != "" {
		t, err = fleetInstanceTypeByID(o.InstanceType)
	}
	if err != nil {
		return nil, err
	}
	f.itype = t.InstanceTypeID
	f.vsws = fleetVSwitchCount(o.Nodes, o.PodsPerNode, maxPool)
	f.clock = &fleetClock{}
	f.settings = fleetSettings(o)
	run := f.settings
	run.ThrottleWindow = fakecloud.Duration(f.scale(o.ThrottleWindow))
	spec, err := fleetSpec(o, f.itype, f.vsws, run)
	if err != nil {
		return nil, fmt.Errorf("fleet: world: %w", err)
	}
	if f.fc, err = fakecloud.New(fakecloud.Options{Spec: &spec, Seed: o.Seed, TimeScale: o.TimeScale, Clock: f.clock}); err != nil {
		return nil, fmt.Errorf("fleet: fakecloud: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.close())
		}
	}()
	for _, flt := range append(o.Profile.Faults(), o.Faults...) {
		if _, err := f.fc.AddFault(flt); err != nil {
			return nil, fmt.Errorf("fleet: fault %s: %w", flt.Name, err)
		}
	}
	f.srv = newFleetServers(f.fc, o.Logger)
	if f.dir, err = os.MkdirTemp(o.TempDir, "fleet"); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	f.nodesKube = newFleetNodes()
	offsets := fleetStartOffsets(o.Seed, o.Nodes, f.scale(o.StartJitter))
	for i := 0; i < o.Nodes; i++ {
		n, err := f.newNode(i, offsets[i])
		if err != nil {
			return nil, err
		}
		f.nodes = append(f.nodes, n)
	}
	return f, nil
}

// newNode prepares node i: its directory, its configuration and its API
// server holding the node and its pods, as the scheduler placed them.
func (f *fleet) newNode(i int, offset time.Duration) (*fleetNode, error) {
	n := &fleetNode{i: i, id: fleetNodeID(i), name: fleetNodeName(i), dir: filepath.Join(f.dir, fmt.Sprintf("n%05d", i+1)), offset: offset}
	if err := os.Mkdir(n.dir, 0o700); err != nil {
		return nil, fmt.Errorf("fleet: node directory: %w", err)
	}
	c := make(map[string]any, len(f.runCfg)+8)
	for k, v := range f.runCfg {
		c[k] = v
	}
	c["endpoint"] = f.srv.api.URL
	c["metadata_endpoint"] = f.srv.metadataURL(n.id)
	c["store_path"] = filepath.Join(n.dir, "store.db")
	c["socket_path"] = filepath.Join(n.dir, "eni.socket")
	c["cni_conf_dir"] = filepath.Join(n.dir, "net.d")
	c["cni_bin_dir"] = filepath.Join(n.dir, "bin")
	c["cni_cache_dir"] = filepath.Join(n.dir, "cache")
	objs := []kruntime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}}
	for j := 0; j < f.o.PodsPerNode; j++ {
		p := &fleetPod{name: fmt.Sprintf("%s-p%03d", n.name, j+1)}
		n.pods = append(n.pods, p)
		objs = append(objs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: p.name, UID: types.UID(fleetNamespace + "-" + p.name)},
			Spec:       corev1.PodSpec{NodeName: n.name},
			Status:     corev1.PodStatus{Phase: corev1.PodPending},
		})
	}
	// The simple tracker: NewClientset's field-managed one builds a REST
	// mapper on every write (each event the daemon records), which makes
	// a thousand fake API servers, not the daemons, the CPU bottleneck.
	// The daemon needs no server-side apply.
	n.kube = fake.NewSimpleClientset(objs...)
	shared := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
		Labels: map[string]string{corev1.LabelInstanceTypeStable: f.itype}}}
	if err := f.nodesKube.Tracker().Add(shared); err != nil {
		return nil, fmt.Errorf("fleet: node %s: %w", n.name, err)
	}
	n.api = fleetKube{Interface: n.kube, nodes: f.nodesKube}
	var err error
	if n.cfg, err = harness.NodeConfig(context.Background(), n.kube, n.name, c); err != nil {
		return nil, fmt.Errorf("fleet: daemon configuration: %w", err)
	}
	return n, nil
}

// run starts every node at its offset and waits until every pod has an
// address or the deadline passes.
func (f *fleet) run(ctx context.Context) (*bench.Result, error) {
	heapBefore, _ := fleetHeap()
	f.clock.align(f.scale(f.o.ThrottleWindow))
	f.t0 = time.Now()
	ctx, cancel := context.WithDeadline(ctx, f.t0.Add(f.scale(f.o.Timeout)))
	defer cancel()
	f.o.Logger.Info("fleet starting", "nodes", f.o.Nodes, "podsPerNode", f.o.PodsPerNode, "instanceType", f.itype, "timeScale", f.o.TimeScale)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() { defer close(sampled); f.sample(stopSampling) }()
	var wg sync.WaitGroup
	for _, n := range f.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); f.runNode(ctx, n) }()
	}
	select {
	case <-f.allReady:
	case <-ctx.Done():
		f.finish()
	}
	heapAfter, stackAfter := fleetHeap()
	idle := f.idleAddresses()
	close(stopSampling)
	<-sampled
	cancel() // nodes still retrying give up
	wg.Wait()
	f.o.Logger.Info("fleet measured", "podsReady", f.podsReady.Load(), "simulated", f.sim(f.finalAt).Round(time.Millisecond))
	res := f.result(heapAfter-min(heapBefore, heapAfter), stackAfter, idle)
	if f.o.Restart && res.Metrics.PodsFailed == 0 {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), f.scale(f.o.Timeout))
		defer rcancel()
		f.o.Logger.Info("fleet restarting every daemon at once")
		return f.restartResult(f.restartAll(rctx))
	}
	if res.Metrics.PodsFailed > 0 {
		return res, fmt.Errorf("%w: %d of %d (%v)", ErrPodsFailed, res.Metrics.PodsFailed, res.Metrics.Pods, f.firstFailure())
	}
	return res, nil
}

// finish ends the measurement once.
func (f *fleet) finish() {
	f.finishOnce.Do(func() {
		f.final = f.fc.Calls()
		f.finalAt = time.Now()
		close(f.allReady)
	})
}

func (f *fleet) firstFailure() error {
	for _, n := range f.nodes {
		if n.startErr != nil {
			return fmt.Errorf("node %s: %w", n.name, n.startErr)
		}
		for _, p := range n.pods {
			if p.ip == "" && p.err != nil {
				return fmt.Errorf("pod %s: %w", p.name, p.err)
			}
		}
	}
	return errors.New("no error recorded")
}

// close stops every daemon, the servers and fakecloud, and removes the
// fleet's directory.
func (f *fleet) close() error {
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, n := range f.nodes {
		if n.run == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := n.run.stop(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %s: %w", n.name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if f.srv != nil {
		f.srv.close()
	}
	if f.fc != nil {
		errs = append(errs, f.fc.Close())
	}
	if f.dir != "" {
		errs = append(errs, os.RemoveAll(f.dir))
	}
	return errors.Join(errs...)
}

// fleetHeap returns the heap and stack in use after a full collection.
func fleetHeap() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}
