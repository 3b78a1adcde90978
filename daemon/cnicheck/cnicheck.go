// Package cnicheck is the daemon's periodic CNI CHECK of pods that have a
// network namespace. It runs the node's CNI configuration through libcni
// the way the container runtime would, so the daemon notices when a pod's
// network no longer matches what ADD set up and can raise a pod event
// (ResourceInvalid). Terway v1.2.5's daemon did the same every 10 minutes
// (terway-facts.md §1.3).
package cnicheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/terway-sim/terway/internal/nsexec"
)

// Production locations, the ones kubelet, containerd and CRI-O use, so a
// daemon checks the same network and cache the runtime set the pod up with.
const (
	DefaultConfDir  = "/etc/cni/net.d"
	DefaultBinDir   = "/opt/cni/bin"
	DefaultCacheDir = "/var/lib/cni"
)

// minCheckVersion is the CNI spec version that introduced CHECK.
const minCheckVersion = "0.4.0"

// Outcomes a caller has to tell apart: the skip cases (ErrCheckUnsupported,
// ErrCheckDisabled, ErrNotSetUp) are not a pod problem, ErrNoConfig is a
// node problem, and only ErrCheckFailed says the pod's network is wrong.
var (
	// ErrNoConfig means the configuration directory holds no usable network
	// (or none with Options.NetworkName): the node has no CNI set up, so
	// there is nothing to compare a pod against.
	ErrNoConfig = errors.New("no CNI network configuration")
	// ErrCheckUnsupported means the configuration's cniVersion predates
	// 0.4.0, where CHECK does not exist; callers skip the check.
	ErrCheckUnsupported = errors.New("CNI CHECK not supported by configuration version")
	// ErrCheckDisabled means the configuration list sets disableCheck; the
	// operator asked runtimes not to CHECK, so callers skip rather than
	// count a check that never ran as a pass.
	ErrCheckDisabled = errors.New("CNI CHECK disabled by configuration")
	// ErrNotSetUp means libcni's cache holds no ADD result for the
	// container: the pod was not set up through this configuration by a
	// libcni runtime (or was torn down), so there is no prevResult to check.
	ErrNotSetUp = errors.New("no cached CNI ADD result for container")
	// ErrCheckFailed means a plugin ran CHECK and answered with a CNI error
	// (other than code 11, "try again later"): the pod's network does not
	// match what was set up. The plugin's *types.Error is wrapped alongside,
	// so errors.As recovers its code and message.
	ErrCheckFailed = errors.New("CNI CHECK reported a failure")
)

// Options says where the node's CNI files are. Tests and the lab point
// them at temporary directories; zero values mean the production paths.
type Options struct {
	// ConfDir holds the network configurations (.conflist, .conf, .json).
	ConfDir string
	// BinDirs are searched for plugin executables, in order.
	BinDirs []string
	// CacheDir is libcni's cache of ADD results, which CHECK needs as
	// prevResult.
	CacheDir string
	// NetworkName selects the configuration with this name; empty means
	// the first file in lexical order, as kubelet and containerd pick it.
	NetworkName string
	// NetNS is the network namespace the plugins run in, the node's host
	// namespace; empty means the caller's own.
	NetNS string
}

// Target names one pod attachment, as the daemon's store records it.
type Target struct {
	// ContainerID is the sandbox (infra) container ID the runtime used for
	// ADD; it keys libcni's cache.
	ContainerID string
	// NetNS is the netns path as the plugin must open it; a daemon in a
	// container passes it through the host's /proc/1/root.
	NetNS string
	// IfName is the pod-side interface name given to ADD (usually eth0).
	IfName string
	// PodNamespace and PodName go to the plugin in CNI_ARGS, as the
	// runtime passed them on ADD.
	PodNamespace, PodName string
}

// Checker runs CNI CHECK for pods. It is safe for concurrent use; create
// it with New.
type Checker struct {
	opts  Options
	cni   *libcni.CNIConfig
	confs confCache
}

// New returns a Checker for the given locations. It reads nothing yet:
// the configuration is loaded on every Check, since it can change.
func New(o Options) *Checker {
	o = withDefaults(o)
	// An explicit Exec: libcni would otherwise create one lazily on first
	// use, which races when Checks run concurrently. Plugin stderr of a
	// successful run is dropped (a failed run's stderr is in the error).
	var exec invoke.Exec = &invoke.DefaultExec{RawExec: &invoke.RawExec{}, PluginDecoder: version.PluginDecoder{}}
	if o.NetNS != "" {
		exec = nsexec.Exec{Exec: exec, Path: o.NetNS}
	}
	return &Checker{
		opts:  o,
		cni:   libcni.NewCNIConfigWithCacheDir(o.BinDirs, o.CacheDir, exec),
		confs: confCache{entries: map[string]cacheEntry{}},
	}
}

func withDefaults(o Options) Options {
	if o.ConfDir == "" {
		o.ConfDir = DefaultConfDir
	}
	if len(o.BinDirs) == 0 {
		o.BinDirs = []string{DefaultBinDir}
	} else {
		o.BinDirs = append([]string(nil), o.BinDirs...)
	}
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir
	}
	return o
}

// Check runs CHECK for t through the node's current network configuration.
// nil means every plugin in the list accepted the pod's network; see the
// Err* values for the other outcomes. ctx bounds the plugin runs.
func (c *Checker) Check(ctx context.Context, t Target) error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("cni check: %w", err)
	}
	net, err := c.loadNetwork()
	if err != nil {
		return fmt.Errorf("cni check %s: %w", t, err)
	}
	if err := c.check(ctx, net, t); err != nil {
		return fmt.Errorf("cni check %s network %q (%s): %w", t, net.list.Name, net.path, err)
	}
	return nil
}

func (c *Checker) check(ctx context.Context, net network, t Target) error {
	if err := checkable(net.list); err != nil {
		return err
	}
	rt, err := c.runtimeConf(net.list, t)
	if err != nil {
		return err
	}
	if err := c.cni.CheckNetworkList(ctx, net.list, rt); err != nil {
		return classify(ctx, err)
	}
	return nil
}

// checkable rejects lists that libcni would refuse to CHECK or would skip
// silently, before any cache lookup or plugin run.
func checkable(list *libcni.NetworkConfigList) error {
	ok, err := version.GreaterThanOrEqualTo(list.CNIVersion, minCheckVersion)
	if err != nil {
		return fmt.Errorf("invalid cniVersion %q: %w", list.CNIVersion, err)
	}
	if !ok {
		return fmt.Errorf("%w: cniVersion %q, CHECK needs %s or later", ErrCheckUnsupported, list.CNIVersion, minCheckVersion)
	}
	if list.DisableCheck {
		return ErrCheckDisabled
	}
	return nil
}

// runtimeConf builds what the runtime would pass on CHECK. CNI_ARGS come
// from t in kubelet's order; capability args (port mappings, bandwidth…)
// are not known to the daemon, so they are replayed from the ADD cache,
// which is what the runtime would pass again.
func (c *Checker) runtimeConf(list *libcni.NetworkConfigList, t Target) (*libcni.RuntimeConf, error) {
	rt := &libcni.RuntimeConf{
		ContainerID: t.ContainerID,
		NetNS:       t.NetNS,
		IfName:      t.IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", t.PodNamespace},
			{"K8S_POD_NAME", t.PodName},
			{"K8S_POD_INFRA_CONTAINER_ID", t.ContainerID},
		},
	}
	prev, err := c.cni.GetNetworkListCachedResult(list, rt)
	if err != nil {
		return nil, fmt.Errorf("read cached ADD result in %s: %w", c.opts.CacheDir, err)
	}
	if prev == nil {
		return nil, fmt.Errorf("%w in %s", ErrNotSetUp, c.opts.CacheDir)
	}
	_, cached, err := c.cni.GetNetworkListCachedConfig(list, rt)
	if err != nil {
		return nil, fmt.Errorf("read cached runtime config in %s: %w", c.opts.CacheDir, err)
	}
	if cached != nil {
		rt.CapabilityArgs = cached.CapabilityArgs
	}
	return rt, nil
}

// classify separates a plugin's verdict from failures to get one: a
// cancelled context kills the plugin, and a plugin that crashed or printed
// no CNI error leaves code 0 — neither says anything about the pod.
func classify(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("CHECK interrupted: %w (plugin: %w)", ctxErr, err)
	}
	var cniErr *types.Error
	if !errors.As(err, &cniErr) {
		return fmt.Errorf("run CHECK: %w", err)
	}
	switch cniErr.Code {
	case types.ErrUnknown:
		return fmt.Errorf("plugin failed without a CNI error: %w", err)
	case types.ErrTryAgainLater:
		return fmt.Errorf("plugin asked to try again later (code %d): %w", cniErr.Code, err)
	}
	return fmt.Errorf("%w (code %d): %w", ErrCheckFailed, cniErr.Code, err)
}

func (t Target) validate() error {
	if t.ContainerID == "" || t.NetNS == "" || t.IfName == "" {
		return fmt.Errorf("target %s: container ID, netns and ifname are required", t)
	}
	return nil
}

// String names the target in errors and logs the way operators look pods up.
func (t Target) String() string {
	return fmt.Sprintf("pod %s/%s (container %s, netns %s, if %s)",
		t.PodNamespace, t.PodName, t.ContainerID, t.NetNS, t.IfName)
}
