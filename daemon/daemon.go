package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/cnicheck"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/deviceplugin"
	"github.com/terway-sim/terway/daemon/hostnet"
	"github.com/terway-sim/terway/daemon/ipam"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/kubeapi"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// Options are what a Daemon uses.
type Options struct {
	// Mode is terwayd's --daemon-mode.
	Mode     mode.Mode
	Config   *config.Config
	NodeName string
	Kube     kubeapi.Interface
	// Clock drives every interval; nil means the real clock.
	Clock clock.WithTicker
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the daemon's metrics; nil registers nowhere.
	Registerer prometheus.Registerer
	// HTTPClient is used for the metadata service (nil: a default one).
	HTTPClient *http.Client
	// StoreNoSync skips fsync (tests only).
	StoreNoSync bool
	// ImportTerwayDB reads a Terway-written store instead of refusing it.
	ImportTerwayDB bool
	// RebuildStore (terwayd --rebuild-store): a damaged store
	// (store.ErrDamaged) is moved aside to "<store_path>.damaged-<UTC
	// time>" and rebuilt from the node's truth instead of refused. Without
	// it, New fails and records a StoreDamaged node event.
	RebuildStore bool
	// LockTimeout is how long to wait for the node lock (default 5s).
	LockTimeout time.Duration
	// HostNetNS is the path of the node's host network namespace (e.g.
	// /proc/self/ns/net). With it, GC also removes the host rules and
	// routes of the addresses it takes back from pods that are gone, and
	// the mapping reports host leftovers, and the periodic CNI CHECK runs
	// the plugin in it, as the runtime does. Empty: the daemon never
	// touches the host network and runs CHECK in its own namespace.
	HostNetNS string
	// DevicePluginDir is kubelet's device-plugin directory. Non-empty, the
	// daemon advertises aliyun/eni there in ENIOnly and VPC modes.
	DevicePluginDir string
	// CheckPeriod is how often every pod is checked: its resources against
	// the three-way mapping and, with a netns, its network through CNI
	// CHECK (Terway: POOL_CHECK_PERIOD_SECONDS, 10 min). 0 disables it.
	CheckPeriod time.Duration
}

// Daemon is one node's terwayd.
type Daemon struct {
	opts  Options
	cfg   *config.Config
	mode  mode.Mode
	clock clock.WithTicker
	log   *slog.Logger

	kube *k8s.Client
	// supply is the SufficientIP condition last published.
	supply  atomic.Pointer[supplyCondition]
	host    *hostnet.Host
	devices *deviceplugin.Plugin
	checker *cnicheck.Checker
	store   *store.Store
	lock    *flock.Flock // the node lock (takeLock)
	node    *cloud.Node
	limits  cloud.Limits
	// limitsInfo is the cloud's description of the instance type that
	// limits come from (JSON), published on the node.
	limitsInfo []byte
	pool       ipam.Pool
	metrics    *metrics

	capacity int
	sticky   time.Duration
	// podIPs writes the pod-ips annotation (enable_patch_pod_ips; nil when
	// off); set in Serve before calls are taken.
	podIPs *podIPsWriter

	mu      sync.Mutex
	pending map[string]bool // pods with an RPC in progress
	// eipBusy counts AllocIPs that may allocate an EIP, until their record
	// is written (sweepEIPs waits them out).
	eipBusy atomic.Int64

	grpc     *grpc.Server
	listener net.Listener
	// served is closed when the gRPC server has stopped, serveErr is its
	// result. A stopped server closes (and unlinks) its socket only then,
	// so whoever stops it waits, or a later daemon's socket would vanish.
	served   chan struct{}
	serveErr error
	// initialised turns true when Serve starts; until then the socket
	// answers Status with "initialising" and every other call with
	// Unavailable, so the runtime sees why the node is not ready.
	initialised atomic.Bool
	phase       atomic.Pointer[string]
	// apiRead turns true once the API server's pods have been read: until
	// then GC releases nothing, since only the node's local sources say
	// what is held (see restore).
	apiRead atomic.Bool
	// gcRounds counts the rounds the GC loop has completed, whatever
	// their outcome (the tracing API shows it: proof, for whoever waits on
	// it, that a whole round ran after a given moment).
	gcRounds atomic.Int64
	ready    chan struct{}

	// life ends when the daemon stops (Serve's context ends, or Close):
	// the loops, the pools' cloud calls and the allocations in flight
	// end with it, detached from the requests that started them but not
	// from the daemon.
	life context.Context
	stop context.CancelFunc
	// lifeMu orders starting children (Serve) against stopping them.
	lifeMu  sync.Mutex
	stopped bool
	wg      sync.WaitGroup
	// closeOnce closes the resources once; closeErr is its result.
	closeOnce sync.Once
	closeErr  error
}

// New prepares a daemon: it takes the node lock, starts answering on the
// socket (STATUS says "initialising", other calls are Unavailable), opens
// the store, reads the instance identity and limits, and restores the pool
// from the cloud, metadata and store. Serve then starts the background
// loops and takes calls.
func New(ctx context.Context, o Options) (*Daemon, error) {
	if o.Config == nil {
		o.Config = config.Defaults()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Kube == nil || o.NodeName == "" {
		return nil, errors.New("daemon: a Kubernetes client and the node name are required")
	}
	if _, err := mode.Parse(string(o.Mode)); err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	d := &Daemon{opts: o, cfg: o.Config, mode: o.Mode, clock: o.Clock, log: o.Logger.With("node", o.NodeName),
		pending: map[string]bool{}, ready: make(chan struct{}), sticky: o.Config.StickyTime.Duration}
	d.life, d.stop = context.WithCancel(context.Background())
	for _, k := range d.cfg.Ignored {
		d.log.Info("config key accepted and ignored", "key", k)
	}
	d.metrics = newMetrics(o.Registerer)
	if err := d.init(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(newPoolCollector(d)); err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("register pool metrics: %w", err)
		}
	}
	return d, nil
}

func (d *Daemon) init(ctx context.Context) error {
	timeout := d.opts.LockTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	lock, err := takeLock(filepath.Join(filepath.Dir(d.cfg.SocketPath), "terwayd.lock"), timeout)
	if err != nil {
		return err
	}
	d.lock = lock
	if err := d.listen(); err != nil {
		return err
	}
	if d.opts.HostNetNS != "" {
		if d.host, err = hostnet.Open(d.opts.HostNetNS); err != nil {
			return err
		}
	}
	d.checker = cnicheck.New(cnicheck.Options{ConfDir: d.cfg.CNIConfDir, BinDirs: []string{d.cfg.CNIBinDir}, CacheDir: d.cfg.CNICacheDir,
		NetNS: d.opts.HostNetNS})
	// The client exists before the store, whose refusal is a node event;
	// its informer starts below.
	d.kube = k8s.New(d.opts.Kube, d.opts.NodeName, d.cfg.CustomStatefulWorkloadKinds, d.log)
	d.setPhase("opening the store")
	if err := d.openStore(ctx); err != nil {
		return err
	}
	d.setPhase("starting the Kubernetes client")
	sctx, cancel := context.WithTimeout(ctx, d.cfg.KubeSyncTimeout.Duration)
	err = d.kube.Start(sctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return err
	}
	if err != nil {
		// Serve from the local sources; nothing they show as held is
		// released or reused until the informer syncs.
		d.log.Warn("the API server could not be read; restoring from the node's local sources", "err", err)
	}
	d.setPhase("reading the instance and its limits from the cloud")
	if err := d.initCloud(ctx); err != nil {
		return err
	}
	d.setPhase("restoring the pool")
	return d.initPool(ctx)
}

// listen serves gRPC on the socket from the start of initialisation, so
// that CNI STATUS can tell "initialising" from "no daemon" (see
// Daemon.initialised).
func (d *Daemon) listen() error {
	ln, err := listenUnix(d.cfg.SocketPath)
	if err != nil {
		return err
	}
	d.listener = ln
	d.grpc = grpc.NewServer(grpc.UnaryInterceptor(d.interceptor))
	rpc.RegisterTerwayBackendServer(d.grpc, &backend{d: d})
	rpc.RegisterTerwayTracingServer(d.grpc, &tracing{d: d})
	rpc.RegisterTerwayRecordsServer(d.grpc, &records{d: d})
	d.served = make(chan struct{})
	go func() { d.serveErr = d.grpc.Serve(ln); close(d.served) }()
	return nil
}

func (d *Daemon) setPhase(p string) { d.phase.Store(&p) }

// initialising says what a daemon that does not serve yet is doing.
func (d *Daemon) initialising() string {
	p := "starting"
	if s := d.phase.Load(); s != nil {
		p = *s
	}
	return "terwayd is initialising: " + p
}

// backoffSet turns backoff_override into the one backoff mechanism; the
// entries are whole policies already (config merged each over its key's
// built-in one), InitialDelay included.
func (d *Daemon) backoffSet() *backoff.Set {
	return backoff.NewSet(d.clock, d.cfg.BackoffOverride)
}

func (d *Daemon) initCloud(ctx context.Context) error {
	bo := d.backoffSet()
	md := cloud.NewMetadata(d.cfg.MetadataEndpoint, d.opts.HTTPClient, d.clock, bo, d.metrics)
	inst, err := md.Instance(ctx)
	if err != nil {
		return fmt.Errorf("read instance identity from metadata (%s): %w", d.cfg.MetadataEndpoint, err)
	}
	if d.cfg.RegionID != "" {
		inst.RegionID = d.cfg.RegionID
	}
	creds, source, err := cloud.NewCredentials(cloud.CredentialSource{AccessKeyID: d.cfg.AccessKey,
		AccessKeySecret: d.cfg.AccessSecret, CredentialPath: d.cfg.CredentialPath}, md, d.clock)
	if err != nil {
		return err
	}
	d.log.Info("cloud credentials", "source", source)
	api, err := cloud.New(cloud.Options{RegionID: inst.RegionID, ECSEndpoint: d.cfg.ECSEndpoint(), VPCEndpoint: d.cfg.VPCEndpoint(),
		Credentials: creds, RateLimits: d.cfg.RateLimit, Backoff: bo, Clock: d.clock, Observer: d.metrics,
		Journal: storeJournal{d.store}, ThrottleWindow: d.cfg.ThrottleWindow.Duration})
	if err != nil {
		return err
	}
	api.SetDegradation(cloud.Degradation(d.cfg.Degradation))
	d.node = &cloud.Node{API: api, Metadata: md, Instance: inst, MetadataTimeout: d.cfg.MetadataLagTimeout.Duration}
	if d.limits, err = d.instanceLimits(ctx, api, inst.InstanceType); err != nil {
		return err
	}
	d.log.Info("instance", "id", inst.ID, "type", inst.InstanceType, "zone", inst.ZoneID,
		"enis", d.limits.Adapters, "ipsPerENI", d.limits.IPv4PerAdapter)
	return nil
}

// ownershipTags are the tags the daemon creates ENIs with (tags: eni_tags,
// its own and eni_tag_filter) and the part of them that marks an ENI as
// its own (owner: creator, instance, cluster and eni_tag_filter), so that
// it (and only it) recognises and sweeps its own ENIs, also those created
// before eni_tags changed. The daemon manages only ENIs carrying the
// filter's tags, its own among them. A filter that contradicts eni_tags
// or the daemon's own tags is refused, since the daemon would lose track
// of every ENI it creates.
func (d *Daemon) ownershipTags() (tags, owner map[string]string, err error) {
	owner = cloud.OwnerTags(d.node.Instance.ID, d.cfg.ClusterID)
	tags = map[string]string{}
	for k, v := range d.cfg.ENITags {
		tags[k] = v
	}
	for k, v := range owner {
		tags[k] = v
	}
	keys := make([]string, 0, len(d.cfg.ENITagFilter))
	for k := range d.cfg.ENITagFilter {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := d.cfg.ENITagFilter[k]
		if got, ok := tags[k]; ok && got != v {
			return nil, nil, &config.KeyError{Key: "eni_tag_filter", Err: fmt.Errorf(
				"%s=%q contradicts the tag %s=%q the daemon puts on the ENIs it creates (eni_tags, creator, instance or cluster_id): it would not manage its own ENIs",
				k, v, k, got)}
		}
		tags[k], owner[k] = v, v
	}
	return tags, owner, nil
}

// initPool configures the pools from eni_conf and the instance
// (newPoolConfigs), builds those of the daemon's mode and restores them
// from the cloud, metadata and store.
func (d *Daemon) initPool(ctx context.Context) error {
	capa, err := d.cfg.Capacity(d.limits.Adapters, d.limits.IPv4PerAdapter)
	if err != nil {
		return err
	}
	facts, err := d.poolFacts(ctx, capa)
	if err != nil {
		return err
	}
	pc, err := newPoolConfigs(d.cfg, facts)
	if err != nil {
		return err
	}
	vp, err := cloud.NewVSwitchPool(d.node.API, d.clock, pc.VSwitch.Policy, pc.VSwitch.Candidates, pc.VSwitch.CacheTTL,
		pc.VSwitch.ExhaustedInhibit, uint64(d.clock.Now().UnixNano()))
	if err != nil {
		return err
	}
	if d.pool, d.capacity, err = d.newPool(ctx, capa, pc, vp); err != nil {
		return err
	}
	if d.opts.DevicePluginDir != "" && d.mode != mode.ENIMultiIP && !d.cfg.DisableDevicePlugin {
		// Exclusive ENIs reach the scheduler as a countable resource.
		d.devices = deviceplugin.New(deviceplugin.Options{Dir: d.opts.DevicePluginDir, Logger: d.log, Clock: d.clock})
		d.devices.SetCount(capa.MaxENI)
	}
	return d.restore(ctx)
}

// Serve starts the background loops and serves gRPC on the configured
// socket until ctx ends, Close is called or the socket fails. It returns
// only when everything the daemon started has stopped — the loops, the
// calls in flight (cancelled, cloud calls included) — and the store and
// the node lock are closed, so a process may exit as soon as it returns.
// Pods keep their addresses: the next daemon adopts them.
func (d *Daemon) Serve(ctx context.Context) error {
	stopWithCtx := context.AfterFunc(ctx, d.stop)
	defer stopWithCtx()
	if err := d.startChildren(); err != nil {
		return err
	}
	d.initialised.Store(true)
	close(d.ready)
	d.log.Info("serving", "socket", d.cfg.SocketPath, "mode", d.mode, "capacity", d.capacity)
	select {
	case <-d.life.Done():
	case <-d.served: // the socket failed
	}
	err := d.Close()
	if !errors.Is(d.serveErr, grpc.ErrServerStopped) {
		err = errors.Join(d.serveErr, err)
	}
	return err
}

// startChildren starts the daemon's loops under its lifetime.
func (d *Daemon) startChildren() error {
	d.lifeMu.Lock()
	defer d.lifeMu.Unlock()
	if d.stopped {
		return errors.New("daemon: Serve after Close")
	}
	run := func(f func(context.Context)) {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); f(d.life) }()
	}
	run(d.pool.Run)
	run(d.checkLoop)
	if d.devices != nil {
		run(func(ctx context.Context) {
			if err := d.devices.Run(ctx); err != nil {
				d.log.Error("device plugin", "err", err)
			}
		})
	}
	run(func(ctx context.Context) { d.waitForAPI(ctx); d.gcLoop(ctx) })
	run(d.publishLoop)
	run(d.supplyLoop)
	run(d.healLoop)
	if d.cfg.EnablePatchPodIPs {
		d.podIPs = newPodIPsWriter(d.kube, d.backoffSet().Get(backoff.KubernetesAPIRetry), d.clock, d.log)
		run(d.podIPs.run)
	}
	return nil
}

// Ready is closed once Serve accepts calls.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// Close stops the daemon as the end of Serve's context does, and returns
// when everything has stopped and the store and the lock are closed. It
// is for a daemon that New made and Serve never ran (Serve calls it
// itself) and may be called more than once, also while Serve runs.
func (d *Daemon) Close() error {
	d.stop()
	d.closeOnce.Do(func() { d.closeErr = d.shutdown() })
	return d.closeErr
}

// shutdown stops the calls in flight and the loops, then closes the
// resources. The lifetime has ended: allocations in flight and the
// pools' cloud calls are being cancelled.
func (d *Daemon) shutdown() error {
	d.lifeMu.Lock()
	d.stopped = true
	d.lifeMu.Unlock()
	if d.grpc != nil {
		d.grpc.GracefulStop() // the handlers return, their calls cancelled
	}
	d.wg.Wait()
	if d.pool != nil {
		d.pool.Close() // a pool whose Run never ran (New failed)
	}
	return d.closeResources()
}

func (d *Daemon) closeResources() error {
	var err error
	if d.grpc != nil {
		d.grpc.Stop() // a no-op after GracefulStop
		<-d.served
	}
	if d.kube != nil {
		d.kube.Stop()
	}
	if d.host != nil {
		d.host.Close()
	}
	if d.store != nil {
		err = errors.Join(err, d.store.Close())
	}
	if d.lock != nil {
		err = errors.Join(err, d.lock.Unlock())
	}
	if d.listener != nil {
		_ = os.Remove(d.cfg.SocketPath)
	}
	return err
}

// nodeEvents turns pool warnings into node events.
type nodeEvents struct{ d *Daemon }

func (n nodeEvents) Warn(reason, message string) {
	n.d.log.Warn(message, "reason", reason)
	n.d.kube.NodeEvent(k8s.Warning, reason, message)
}
