package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/dynconfig"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/fakecloud"
)

// BaseDaemonConfig is the eni_conf every node starts from, in simulated
// time: Terway's chart pool (min 0, max 5), the harness's pod vSwitches
// chosen in the configured order ("ordered": most free first, ties in
// order, so that the choice does not depend on a random draw), and the
// daemon's defaults for everything else. Scenarios and users override
// keys on top of it.
func BaseDaemonConfig(podVSwitches []string) map[string]any {
	if len(podVSwitches) == 0 {
		podVSwitches = []string{DefaultPodVSwitch}
	}
	return map[string]any{
		"min_pool_size":            0,
		"max_pool_size":            5,
		"service_cidr":             defaultServiceCIDR,
		"cluster_id":               defaultClusterID,
		"security_group":           fakecloud.DefaultSecurityGroup,
		"vswitches":                map[string][]string{Zone: podVSwitches},
		"vswitch_selection_policy": config.VSwitchOrdered,
	}
}

// MergeConfig returns base with over's keys on top (a nil value removes
// a key).
func MergeConfig(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// parseConfig turns an eni_conf map into a Config (defaults applied).
func parseConfig(m map[string]any) (*config.Config, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode eni_conf: %w", err)
	}
	cfg, err := config.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("eni_conf: %w", err)
	}
	return cfg, nil
}

// NodeConfig is eni_conf m as node's daemon gets it: through dynconfig,
// the path terwayd takes, so that a node labelled terway-config=<name> in
// kube has the eni_conf of ConfigMap kube-system/<name> merged over m.
// The fleet's daemons take the same path.
func NodeConfig(ctx context.Context, kube kubernetes.Interface, node string, m map[string]any) (*config.Config, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode eni_conf: %w", err)
	}
	return dynconfig.Load(ctx, clientset.Wrap(kube), node, b, dynconfig.DefaultNamespace)
}

// scaledConfig is sim (simulated time) at time scale s: every duration
// key (defaults included), every backoff schedule and every rate limit
// is scaled, so that a scaled daemon behaves as a real one at 1/s the
// speed (the pool's failure backoff is backoff_override's pool_growth,
// its ENI-limit pause eni_limit_inhibit). What eni_conf cannot reach is
// not scaled (see README: the RPC and HTTP timeouts); figures that depend
// on those say so.
func scaledConfig(sim map[string]any, s float64) (map[string]any, error) {
	cfg, err := parseConfig(sim)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(sim)
	dur := func(d time.Duration) string { return time.Duration(float64(d) * s).String() }
	for k, d := range map[string]time.Duration{
		"idle_ip_reclaim_after":    cfg.IdleIPReclaimAfter.Duration,
		"idle_ip_reclaim_interval": cfg.IdleIPReclaimInterval.Duration,
		"ip_pool_sync_period":      cfg.IPPoolSyncPeriod.Duration,
		"gc_period":                cfg.GCPeriod.Duration,
		"cni_gc_grace":             cfg.CNIGCGrace.Duration,
		"pool_check_period":        cfg.PoolCheckPeriod.Duration,
		"reuse_cooldown":           cfg.ReuseCooldown.Duration,
		"sticky_time":              cfg.StickyTime.Duration,
		"metadata_lag_timeout":     cfg.MetadataLagTimeout.Duration,
		"ip_batch_window":          cfg.IPBatchWindow.Duration,
		"ip_exhausted_inhibit":     cfg.IPExhaustedInhibit.Duration,
		"eni_limit_inhibit":        cfg.ENILimitInhibit.Duration,
		"throttle_window":          cfg.ThrottleWindow.Duration,
		"vswitch_cache_ttl":        cfg.VSwitchCacheTTL.Duration,
	} {
		out[k] = dur(d)
	}
	limits := map[string]int{}
	for api, n := range cfg.RateLimit {
		if n > 0 {
			limits[api] = max(1, int(math.Ceil(float64(n)/s)))
		}
	}
	out["rate_limit"] = limits
	out["backoff_override"] = scaledBackoffs(cfg, s)
	return out, nil
}

// scaledBackoffs writes every schedule the daemon uses (its built-in
// ones, with eni_conf's overrides) in full, every duration scaled: an
// entry that set only Duration would otherwise keep its key's unscaled
// InitialDelay and Cap.
func scaledBackoffs(cfg *config.Config, s float64) map[string]map[string]any {
	out := map[string]map[string]any{}
	sc := func(d time.Duration) string { return time.Duration(float64(d) * s).String() }
	for key := range backoff.Defaults() {
		b := cfg.Backoff(key)
		out[key] = map[string]any{"InitialDelay": sc(b.InitialDelay), "Duration": sc(b.Duration), "Factor": b.Factor,
			"Jitter": b.Jitter, "Steps": b.Steps, "Cap": sc(b.Cap)}
	}
	return out
}
