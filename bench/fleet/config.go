package fleet

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/fakecloud"
)

// fleetDurationKeys are the eni_conf keys holding a duration; all are
// scaled. Keys whose "0s" means "the default" are given explicitly in
// fleetDaemonDefaults, or the unscaled default would apply.
var fleetDurationKeys = []string{
	"ip_batch_window", "metadata_lag_timeout", "gc_period", "pool_check_period", "ip_pool_sync_period",
	"ip_exhausted_inhibit", "eni_limit_inhibit", "throttle_window", "vswitch_cache_ttl", "idle_ip_reclaim_after", "idle_ip_reclaim_interval",
	"reuse_cooldown", "sticky_time", "cni_gc_grace",
}

// fleetDaemonDefaults is every daemon's eni_conf in simulated time:
// Terway's chart pool (max 5, min 0), security group set (as Terway's
// ConfigMap has it), ENIs in the node's own vSwitch (no vswitches key),
// Terway's intervals, and every backoff schedule and client rate limit
// spelled out so that all of them get scaled.
func fleetDaemonDefaults() map[string]any {
	m := map[string]any{
		"max_pool_size": 5, "min_pool_size": 0,
		"security_group": fakecloud.DefaultSecurityGroup, "service_cidr": "10.96.0.0/12", "cluster_id": "c-fleet",
		"ip_batch_window": "200ms", "metadata_lag_timeout": "30s", "gc_period": "5m", "pool_check_period": "2m",
		"ip_pool_sync_period": "2m", "ip_exhausted_inhibit": "5m", "eni_limit_inhibit": "1m", "throttle_window": "1m", "vswitch_cache_ttl": "10m",
		"idle_ip_reclaim_interval": "10m", "sticky_time": "5m", "cni_gc_grace": "1m",
	}
	bo := map[string]any{}
	for k, b := range backoff.Defaults() {
		e := map[string]any{"Duration": b.Duration.String(), "Factor": b.Factor, "Jitter": b.Jitter, "Steps": b.Steps}
		if b.InitialDelay > 0 {
			e["InitialDelay"] = b.InitialDelay.String()
		}
		if b.Cap > 0 {
			e["Cap"] = b.Cap.String()
		}
		bo[k] = e
	}
	m["backoff_override"] = bo
	rl := map[string]any{}
	for k, v := range cloud.DefaultRateLimits() {
		rl[k] = v
	}
	m["rate_limit"] = rl
	return m
}

// fleetDaemonConfig merges extra over the defaults (backoff_override and
// rate_limit per entry) and returns it normalised through JSON, in
// simulated time.
func fleetDaemonConfig(extra map[string]any) (map[string]any, error) {
	m := fleetDaemonDefaults()
	for k, v := range extra {
		switch k {
		case "backoff_override", "rate_limit":
			add, err := fleetJSONMap(v)
			if err != nil {
				return nil, fmt.Errorf("fleet: daemon key %s: %w", k, err)
			}
			cur := m[k].(map[string]any)
			maps.Copy(cur, add)
		default:
			m[k] = v
		}
	}
	return fleetJSONMap(m)
}

// fleetJSONMap turns v into a generic JSON object (numbers as float64).
func fleetJSONMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("want a JSON object: %w", err)
	}
	return out, nil
}

// fleetScaleConfig returns a copy of a simulated-time configuration for a
// world running at scale s: durations × s, rate limits (calls per
// minute) ÷ s, rounded up.
func fleetScaleConfig(sim map[string]any, s float64) (map[string]any, error) {
	out, err := fleetJSONMap(sim) // a deep copy
	if err != nil {
		return nil, err
	}
	for _, k := range fleetDurationKeys {
		if v, ok := out[k]; ok && v != nil {
			if out[k], err = fleetScaleDuration(v, s); err != nil {
				return nil, fmt.Errorf("fleet: daemon key %s: %w", k, err)
			}
		}
	}
	if bo, ok := out["backoff_override"].(map[string]any); ok {
		for key, e := range bo {
			entry, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("fleet: backoff_override[%q] is not an object", key)
			}
			for f, v := range entry {
				switch strings.ToLower(f) {
				case "duration", "initialdelay", "cap":
					if entry[f], err = fleetScaleDuration(v, s); err != nil {
						return nil, fmt.Errorf("fleet: backoff_override[%q].%s: %w", key, f, err)
					}
				}
			}
		}
	}
	if rl, ok := out["rate_limit"].(map[string]any); ok {
		for k, v := range rl {
			n, ok := v.(float64)
			if !ok {
				return nil, fmt.Errorf("fleet: rate_limit[%q] is not a number", k)
			}
			rl[k] = int(math.Ceil(n / s))
		}
	}
	return out, nil
}

// fleetScaleDuration scales a duration given as a Go duration string or
// as integer nanoseconds (Terway's form).
func fleetScaleDuration(v any, s float64) (any, error) {
	switch x := v.(type) {
	case string:
		if x == "" {
			return x, nil
		}
		d, err := time.ParseDuration(x)
		if err != nil {
			return nil, err
		}
		return time.Duration(float64(d) * s).String(), nil
	case float64:
		return int64(x * s), nil
	}
	return nil, fmt.Errorf("a duration must be a string or nanoseconds, got %T", v)
}

// fleetPoolSizes reads max_pool_size and min_pool_size back from a
// configuration (for picking an instance type).
func fleetPoolSizes(cfg map[string]any) (minPool, maxPool int) {
	if v, ok := cfg["max_pool_size"].(float64); ok {
		maxPool = int(v)
	}
	if v, ok := cfg["min_pool_size"].(float64); ok {
		minPool = int(v)
	}
	return minPool, maxPool
}
