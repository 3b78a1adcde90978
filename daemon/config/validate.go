package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
)

// validate checks every key, normalises values (vswitch_selection_policy
// "most" → "ordered") and fills the parsed fields (service CIDRs, route
// prefixes). It reports every problem, joined.
func (c *Config) validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: fmt.Errorf(format, args...)})
	}

	for _, f := range []struct {
		key string
		v   int
	}{
		{"max_pool_size", c.MaxPoolSize},
		{"min_pool_size", c.MinPoolSize},
		{"min_eni", c.MinENI},
		{"max_eni", c.MaxENI},
		{"idle_ip_reclaim_batch_size", c.IdleIPReclaimBatchSize},
		{"kube_client_burst", c.KubeClientBurst},
	} {
		if f.v < 0 {
			bad(f.key, "must be >= 0, got %d", f.v)
		}
	}
	if c.ENICapRatio < 0 || math.IsNaN(c.ENICapRatio) || math.IsInf(c.ENICapRatio, 0) {
		bad("eni_cap_ratio", "must be > 0, got %g", c.ENICapRatio)
	}
	if c.KubeClientQPS < 0 {
		bad("kube_client_qps", "must be >= 0, got %g", c.KubeClientQPS)
	}
	if f := float64(c.IdleIPReclaimJitterFactor); f < 0 {
		bad("idle_ip_reclaim_jitter_factor", "must be >= 0, got %g", f)
	}

	switch c.IPStack {
	case IPStackIPv4, IPStackDual:
	default:
		bad("ip_stack", "%q is not supported (%s, %s)", c.IPStack, IPStackIPv4, IPStackDual)
	}
	switch c.VSwitchSelectionPolicy {
	case VSwitchRandom, VSwitchOrdered:
	case VSwitchMost:
		c.VSwitchSelectionPolicy = VSwitchOrdered
	default:
		bad("vswitch_selection_policy", "%q is not supported (%s, %s = %s: most free IPs first)",
			c.VSwitchSelectionPolicy, VSwitchRandom, VSwitchOrdered, VSwitchMost)
	}
	switch c.ENISelectionPolicy {
	case ENIMostIPs, ENILeastIPs:
	default:
		bad("eni_selection_policy", "%q is not supported (%s, %s)", c.ENISelectionPolicy, ENIMostIPs, ENILeastIPs)
	}
	switch c.Degradation {
	case DegradationNone, DegradationNoMutation, DegradationNoRelease:
	default:
		bad("degradation", "%q is not supported (\"\", %s, %s)", c.Degradation, DegradationNoMutation, DegradationNoRelease)
	}

	// Durations: periods and timeouts must be positive; the rest may be 0.
	for _, f := range []struct {
		key      string
		d        time.Duration
		positive bool
	}{
		{"idle_ip_reclaim_after", c.IdleIPReclaimAfter.Duration, false},
		{"idle_ip_reclaim_interval", c.IdleIPReclaimInterval.Duration, true},
		{"ip_pool_sync_period", c.IPPoolSyncPeriod.Duration, true},
		{"gc_period", c.GCPeriod.Duration, true},
		{"pool_heal_period", c.PoolHealPeriod.Duration, true},
		{"cni_gc_grace", c.CNIGCGrace.Duration, false},
		{"pool_check_period", c.PoolCheckPeriod.Duration, true},
		{"reuse_cooldown", c.ReuseCooldown.Duration, false},
		{"sticky_time", c.StickyTime.Duration, false},
		{"metadata_lag_timeout", c.MetadataLagTimeout.Duration, true},
		{"ip_batch_window", c.IPBatchWindow.Duration, false},
		{"ip_exhausted_inhibit", c.IPExhaustedInhibit.Duration, true},
		{"eni_limit_inhibit", c.ENILimitInhibit.Duration, true},
		{"throttle_window", c.ThrottleWindow.Duration, true},
		{"vswitch_cache_ttl", c.VSwitchCacheTTL.Duration, true},
		{"kube_sync_timeout", c.KubeSyncTimeout.Duration, true},
	} {
		switch {
		case f.positive && f.d <= 0:
			bad(f.key, "must be > 0, got %s", f.d)
		case f.d < 0:
			bad(f.key, "must be >= 0, got %s", f.d)
		}
	}

	if err := c.parseServiceCIDR(); err != nil {
		errs = append(errs, &KeyError{Key: "service_cidr", Err: err})
	}

	zones := sortedKeys(c.VSwitches)
	for _, zone := range zones {
		if zone == "" {
			bad("vswitches", "empty zone ID")
		}
		if slices.Contains(c.VSwitches[zone], "") {
			bad("vswitches."+zone, "empty vSwitch ID")
		}
	}

	if n := len(c.SecurityGroupIDs()); n > MaxSecurityGroups {
		bad("security_groups", "at most %d security groups (security_group and security_groups together), got %d",
			MaxSecurityGroups, n)
	}

	for _, api := range sortedKeys(c.RateLimit) {
		if v := c.RateLimit[api]; v < 1 {
			bad("rate_limit."+api, "must be >= 1 call per minute, got %d", v)
		}
	}
	for _, key := range sortedKeys(c.BackoffOverride) {
		if err := validateBackoff(c.BackoffOverride[key]); err != nil {
			errs = append(errs, under("backoff_override."+key, err))
		}
	}

	for i := range c.ExtraRoutes {
		r := &c.ExtraRoutes[i]
		p, err := netip.ParsePrefix(strings.TrimSpace(r.Dst))
		if err != nil {
			bad(fmt.Sprintf("extra_routes[%d].dst", i), "want a CIDR such as \"10.0.0.0/8\": %w", err)
			continue
		}
		r.Prefix = p.Masked()
	}

	for _, f := range []struct{ key, v string }{
		{"endpoint", c.Endpoint},
		{"ecs_endpoint", c.ECSEndpointURL},
		{"vpc_endpoint", c.VPCEndpointURL},
		{"metadata_endpoint", c.MetadataEndpoint},
	} {
		if f.v == "" {
			continue
		}
		if err := checkURL(f.v); err != nil {
			errs = append(errs, &KeyError{Key: f.key, Err: err})
		}
	}
	return errors.Join(errs...)
}

// parseServiceCIDR fills ServiceCIDRv4/v6 from the comma-separated
// service_cidr: at most one CIDR per family, in either order.
func (c *Config) parseServiceCIDR() error {
	c.ServiceCIDRv4, c.ServiceCIDRv6 = netip.Prefix{}, netip.Prefix{}
	if strings.TrimSpace(c.ServiceCIDR) == "" {
		return nil
	}
	parts := strings.Split(c.ServiceCIDR, ",")
	if len(parts) > 2 {
		return fmt.Errorf("want \"<ipv4 cidr>[,<ipv6 cidr>]\", got %d entries", len(parts))
	}
	for _, s := range parts {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("want \"<ipv4 cidr>[,<ipv6 cidr>]\": %w", err)
		}
		p = p.Masked()
		dst := &c.ServiceCIDRv4
		if p.Addr().Is6() {
			dst = &c.ServiceCIDRv6
		}
		if dst.IsValid() {
			return fmt.Errorf("two CIDRs of the same family: %s and %s", *dst, p)
		}
		*dst = p
	}
	return nil
}

// checkURL accepts an absolute http or https URL with a host.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("want an http(s) URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("want an http(s) URL such as \"http://100.100.0.10:80\", got %q", s)
	}
	return nil
}

// sortedKeys returns a map's keys in order, for deterministic error lists.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
