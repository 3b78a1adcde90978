package config

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/internal/testwait"
)

func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(%s): %v", doc, err)
	}
	return cfg
}

func TestDefaults(t *testing.T) {
	for _, doc := range []string{`{}`, " \n{ }\t", `{"max_pool_size": null, "ip_stack": "", "gc_period": null}`} {
		cfg := mustParse(t, doc)
		if !reflect.DeepEqual(cfg, Defaults()) {
			t.Errorf("Parse(%q) = %+v, want Defaults() %+v", doc, cfg, Defaults())
		}
	}

	d := Defaults()
	checks := []struct {
		name      string
		got, want any
	}{
		{"eni_cap_ratio", d.ENICapRatio, 1.0},
		{"eni_cap_shift", d.ENICapShift, 0},
		{"max_pool_size", d.MaxPoolSize, 0},
		{"min_pool_size", d.MinPoolSize, 0},
		{"vswitch_selection_policy", d.VSwitchSelectionPolicy, "random"},
		{"ip_stack", d.IPStack, "ipv4"},
		{"idle_ip_reclaim_after", d.IdleIPReclaimAfter.Duration, time.Duration(0)},
		{"idle_ip_reclaim_interval", d.IdleIPReclaimInterval.Duration, 10 * time.Minute},
		{"idle_ip_reclaim_batch_size", d.IdleIPReclaimBatchSize, 5},
		{"idle_ip_reclaim_jitter_factor", float64(d.IdleIPReclaimJitterFactor), 0.1},
		{"ip_pool_sync_period", d.IPPoolSyncPeriod.Duration, 120 * time.Second},
		{"ip_batch_window", d.IPBatchWindow.Duration, 200 * time.Millisecond},
		{"eni_selection_policy", d.ENISelectionPolicy, "most_ips"},
		{"enable_patch_pod_ips", d.EnablePatchPodIPs, true},
		{"disable_device_plugin", d.DisableDevicePlugin, false},
		{"endpoint", d.Endpoint, ""},
		{"metadata_endpoint", d.MetadataEndpoint, "http://100.100.100.200"},
		{"gc_period", d.GCPeriod.Duration, 5 * time.Minute},
		{"pool_heal_period", d.PoolHealPeriod.Duration, 10 * time.Second},
		{"cni_gc_grace", d.CNIGCGrace.Duration, time.Minute},
		{"pool_check_period", d.PoolCheckPeriod.Duration, 2 * time.Minute},
		{"reuse_cooldown", d.ReuseCooldown.Duration, time.Duration(0)},
		{"sticky_time", d.StickyTime.Duration, 5 * time.Minute},
		{"degradation", d.Degradation, ""},
		{"store_path", d.StorePath, "/var/lib/cni/terway/ResRelation.db"},
		{"socket_path", d.SocketPath, "/var/run/eni/eni.socket"},
		{"metadata_lag_timeout", d.MetadataLagTimeout.Duration, 30 * time.Second},
		{"service_cidr v4", d.ServiceCIDRv4.IsValid(), false},
		{"backoff_override", len(d.BackoffOverride), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("default %s = %v, want %v", c.name, c.got, c.want)
		}
	}

	wantRate := map[string]int{
		"*":                                 500,
		"DescribeNetworkInterfaceAttribute": 2000,
		"DescribeNetworkInterfaces":         800,
		"CreateNetworkInterface":            500,
		"AttachNetworkInterface":            500,
		"DeleteNetworkInterface":            500,
		"DetachNetworkInterface":            400,
		"AssignPrivateIpAddresses":          400,
		"UnassignPrivateIpAddresses":        400,
		"AssignIpv6Addresses":               400,
		"UnassignIpv6Addresses":             400,
		"DescribeInstanceTypes":             400,
		"DescribeVSwitches":                 300,
	}
	if !reflect.DeepEqual(d.RateLimit, wantRate) {
		t.Errorf("default rate_limit = %v, want %v", d.RateLimit, wantRate)
	}
	if got := d.RateLimitFor("DescribeEipAddresses"); got != 500 {
		t.Errorf("RateLimitFor(unlisted API) = %d, want the \"*\" default 500", got)
	}

	// Defaults() hands out fresh maps: changing one must not leak into the next.
	d.RateLimit["DescribeVSwitches"] = 1
	if Defaults().RateLimit["DescribeVSwitches"] != 300 {
		t.Error("Defaults() shares its rate_limit map between calls")
	}
}

// TestKeys pins the key names to Terway's spelling plus our extensions.
func TestKeys(t *testing.T) {
	want := []string{
		// Terway's
		"access_key", "access_secret", "backoff_override", "credential_path",
		"custom_stateful_workload_kinds", "disable_device_plugin", "eni_cap_ratio", "eni_cap_shift",
		"enable_eip_pool", "allow_eip_rob",
		"eni_selection_policy", "eni_tag_filter", "eni_tags", "enable_patch_pod_ips", "extra_routes",
		"idle_ip_reclaim_after", "idle_ip_reclaim_batch_size", "idle_ip_reclaim_interval",
		"idle_ip_reclaim_jitter_factor", "ip_batch_window", "ip_pool_sync_period", "ip_stack", "kube_client_burst",
		"kube_client_qps", "max_eni", "max_pool_size", "min_eni", "min_pool_size", "rate_limit",
		"region_id", "resource_group_id", "security_group", "security_groups", "service_cidr",
		"version", "vswitch_selection_policy", "vswitches",
		// ours
		"cluster_id", "degradation", "ecs_endpoint", "endpoint", "gc_period", "metadata_endpoint",
		"metadata_lag_timeout", "pool_check_period", "reuse_cooldown", "socket_path", "sticky_time",
		"store_path", "vpc_endpoint", "not_ready_on_ip_exhaustion", "ip_exhausted_inhibit", "eni_limit_inhibit", "throttle_window", "vswitch_cache_ttl", "cni_conf_dir", "cni_bin_dir", "cni_cache_dir", "cni_gc_grace",
		"cni_state_dir", "kube_sync_timeout", "pool_heal_period",
	}
	slices.Sort(want)
	if got := Keys(); !slices.Equal(got, want) {
		t.Errorf("Keys() = %v\nwant      %v", got, want)
	}
	for _, k := range UnimplementedKeys() {
		if slices.Contains(want, k) {
			t.Errorf("%s is both implemented and unimplemented", k)
		}
	}
}

func TestParseValues(t *testing.T) {
	doc := `{
		"version": "1",
		"access_key": "AK", "access_secret": "SK",
		"credential_path": "/var/addon/token-config",
		"region_id": "cn-hangzhou",
		"service_cidr": "10.96.0.0/12",
		"vswitches": {"cn-hangzhou-g": ["vsw-1", "vsw-2"], "cn-hangzhou-h": ["vsw-3"]},
		"eni_tags": {"team": "net"},
		"eni_tag_filter": {"managed": "yes"},
		"max_pool_size": 10, "min_pool_size": 2, "min_eni": 1, "max_eni": 3,
		"security_group": "sg-1", "security_groups": ["sg-2", "sg-1"],
		"eni_cap_ratio": 0.5, "eni_cap_shift": 2,
		"vswitch_selection_policy": "ordered",
		"ip_stack": "dual",
		"custom_stateful_workload_kinds": ["CloneSet"],
		"rate_limit": {"DescribeVSwitches": 60, "*": 100},
		"idle_ip_reclaim_after": "30m", "idle_ip_reclaim_interval": "1m",
		"idle_ip_reclaim_batch_size": 2, "idle_ip_reclaim_jitter_factor": "0.5",
		"ip_pool_sync_period": "30s",
		"eni_selection_policy": "least_ips",
		"resource_group_id": "rg-1",
		"kube_client_qps": 20.5, "kube_client_burst": 40,
		"enable_patch_pod_ips": false,
		"disable_device_plugin": true,
		"extra_routes": [{"dst": "100.64.0.1/10"}],
		"endpoint": "http://100.100.0.10:8080",
		"vpc_endpoint": "https://vpc.example:8443",
		"metadata_endpoint": "http://127.0.0.1:9000",
		"cluster_id": "c-1",
		"gc_period": "1s", "pool_check_period": "500ms", "reuse_cooldown": "3s", "cni_gc_grace": "2s",
		"sticky_time": "0s", "degradation": "no_release",
		"store_path": "/tmp/x/store.db", "socket_path": "/tmp/x/eni.socket",
		"metadata_lag_timeout": "2s"
	}`
	c := mustParse(t, doc)
	checks := []struct {
		name      string
		got, want any
	}{
		{"version", c.Version, "1"},
		{"access_key", c.AccessKey, "AK"},
		{"access_secret", c.AccessSecret, "SK"},
		{"credential_path", c.CredentialPath, "/var/addon/token-config"},
		{"region_id", c.RegionID, "cn-hangzhou"},
		{"service_cidr v4", c.ServiceCIDRv4, netip.MustParsePrefix("10.96.0.0/12")},
		{"vswitches zone g", strings.Join(c.VSwitchesForZone("cn-hangzhou-g"), ","), "vsw-1,vsw-2"},
		{"vswitches other zone", len(c.VSwitchesForZone("cn-beijing-a")), 0},
		{"eni_tags", c.ENITags["team"], "net"},
		{"eni_tag_filter", c.ENITagFilter["managed"], "yes"},
		{"max_pool_size", c.MaxPoolSize, 10},
		{"min_pool_size", c.MinPoolSize, 2},
		{"min_eni", c.MinENI, 1},
		{"max_eni", c.MaxENI, 3},
		{"security groups", strings.Join(c.SecurityGroupIDs(), ","), "sg-1,sg-2"},
		{"eni_cap_ratio", c.ENICapRatio, 0.5},
		{"eni_cap_shift", c.ENICapShift, 2},
		{"vswitch_selection_policy", c.VSwitchSelectionPolicy, "ordered"},
		{"ip_stack", c.DualStack(), true},
		{"custom kind", c.IsStatefulKind("cloneset"), true},
		{"statefulset kind", c.IsStatefulKind("StatefulSet"), true},
		{"deployment kind", c.IsStatefulKind("Deployment"), false},
		{"rate_limit override", c.RateLimitFor("DescribeVSwitches"), 60},
		{"rate_limit kept default", c.RateLimitFor("DescribeNetworkInterfaces"), 800},
		{"rate_limit * override", c.RateLimitFor("DescribeEipAddresses"), 100},
		{"idle_ip_reclaim_after", c.IdleIPReclaimAfter.Duration, 30 * time.Minute},
		{"idle_ip_reclaim_interval", c.IdleIPReclaimInterval.Duration, time.Minute},
		{"idle_ip_reclaim_batch_size", c.IdleIPReclaimBatchSize, 2},
		{"idle_ip_reclaim_jitter_factor", float64(c.IdleIPReclaimJitterFactor), 0.5},
		{"ip_pool_sync_period", c.IPPoolSyncPeriod.Duration, 30 * time.Second},
		{"eni_selection_policy", c.ENISelectionPolicy, "least_ips"},
		{"resource_group_id", c.ResourceGroupID, "rg-1"},
		{"kube_client_qps", c.KubeClientQPS, float32(20.5)},
		{"kube_client_burst", c.KubeClientBurst, 40},
		{"enable_patch_pod_ips", c.EnablePatchPodIPs, false},
		{"disable_device_plugin", c.DisableDevicePlugin, true},
		{"extra_routes dst", c.ExtraRoutes[0].Dst, "100.64.0.1/10"},
		{"extra_routes prefix (masked)", c.ExtraRoutes[0].Prefix, netip.MustParsePrefix("100.64.0.0/10")},
		{"ECSEndpoint falls back to endpoint", c.ECSEndpoint(), "http://100.100.0.10:8080"},
		{"VPCEndpoint override", c.VPCEndpoint(), "https://vpc.example:8443"},
		{"metadata_endpoint", c.MetadataEndpoint, "http://127.0.0.1:9000"},
		{"cluster_id", c.ClusterID, "c-1"},
		{"gc_period", c.GCPeriod.Duration, time.Second},
		{"cni_gc_grace", c.CNIGCGrace.Duration, 2 * time.Second},
		{"pool_check_period", c.PoolCheckPeriod.Duration, 500 * time.Millisecond},
		{"reuse_cooldown", c.ReuseCooldown.Duration, 3 * time.Second},
		{"sticky_time", c.StickyTime.Duration, time.Duration(0)},
		{"degradation", c.Degradation, DegradationNoRelease},
		{"store_path", c.StorePath, "/tmp/x/store.db"},
		{"socket_path", c.SocketPath, "/tmp/x/eni.socket"},
		{"metadata_lag_timeout", c.MetadataLagTimeout.Duration, 2 * time.Second},
		{"ignored", len(c.Ignored), 0},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}

	// A parsed config marshals to eni_conf that parses to the same config.
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	again := mustParse(t, string(out))
	if !reflect.DeepEqual(again, c) {
		t.Errorf("round trip changed the config:\n got %+v\nwant %+v\njson %s", again, c, out)
	}

	r := c.Redacted()
	if r.AccessKey != "***" || r.AccessSecret != "***" || c.AccessKey != "AK" {
		t.Errorf("Redacted: key %q secret %q, original key now %q", r.AccessKey, r.AccessSecret, c.AccessKey)
	}
}

func TestParseNormalisation(t *testing.T) {
	cases := []struct {
		name  string
		doc   string
		check func(*Config) (got, want any)
	}{
		{"most is ordered", `{"vswitch_selection_policy": "most"}`,
			func(c *Config) (any, any) { return c.VSwitchSelectionPolicy, VSwitchOrdered }},
		{"eni_cap_ratio 0 means 1", `{"eni_cap_ratio": 0}`,
			func(c *Config) (any, any) { return c.ENICapRatio, 1.0 }},
		{"ip_pool_sync_period 0 means default", `{"ip_pool_sync_period": "0s"}`,
			func(c *Config) (any, any) { return c.IPPoolSyncPeriod.Duration, 120 * time.Second }},
		{"idle_ip_reclaim_interval 0 means default", `{"idle_ip_reclaim_interval": "0s"}`,
			func(c *Config) (any, any) { return c.IdleIPReclaimInterval.Duration, 10 * time.Minute }},
		{"idle_ip_reclaim_batch_size 0 means default", `{"idle_ip_reclaim_batch_size": 0}`,
			func(c *Config) (any, any) { return c.IdleIPReclaimBatchSize, 5 }},
		{"jitter factor explicit 0 stays 0", `{"idle_ip_reclaim_jitter_factor": "0"}`,
			func(c *Config) (any, any) { return float64(c.IdleIPReclaimJitterFactor), 0.0 }},
		{"jitter factor as a bare number", `{"idle_ip_reclaim_jitter_factor": 0.25}`,
			func(c *Config) (any, any) { return float64(c.IdleIPReclaimJitterFactor), 0.25 }},
		{"empty string means default", `{"metadata_endpoint": "", "store_path": ""}`,
			func(c *Config) (any, any) {
				return c.MetadataEndpoint + c.StorePath, DefaultMetadataEndpoint + DefaultStorePath
			}},
		{"null means default", `{"enable_patch_pod_ips": null}`,
			func(c *Config) (any, any) { return c.EnablePatchPodIPs, true }},
		{"case-insensitive key", `{"MAX_POOL_SIZE": 7}`,
			func(c *Config) (any, any) { return c.MaxPoolSize, 7 }},
		{"duplicate key: last wins", `{"max_pool_size": 1, "max_pool_size": 9}`,
			func(c *Config) (any, any) { return c.MaxPoolSize, 9 }},
		{"case variant later in the document wins, as with encoding/json", `{"max_pool_size": 2, "Max_Pool_Size": 1}`,
			func(c *Config) (any, any) { return c.MaxPoolSize, 1 }},
		{"rate_limit null entry keeps default", `{"rate_limit": {"DescribeVSwitches": null}}`,
			func(c *Config) (any, any) { return c.RateLimitFor("DescribeVSwitches"), 300 }},
		{"security groups deduplicated", `{"security_group": "sg-b", "security_groups": ["sg-a", "sg-b", ""]}`,
			func(c *Config) (any, any) { return strings.Join(c.SecurityGroupIDs(), ","), "sg-a,sg-b" }},
		{"ecs_endpoint override", `{"endpoint": "http://a:1", "ecs_endpoint": "http://b:2"}`,
			func(c *Config) (any, any) { return c.ECSEndpoint() + " " + c.VPCEndpoint(), "http://b:2 http://a:1" }},
		{"no endpoint: real cloud", `{}`,
			func(c *Config) (any, any) { return c.ECSEndpoint() + c.VPCEndpoint(), "" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, want := tc.check(mustParse(t, tc.doc))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestValidationErrorsNameKey(t *testing.T) {
	cases := []struct {
		doc  string
		key  string // KeyError.Key
		want string // substring of the message
	}{
		{`{"max_pool_size": -1}`, "max_pool_size", "eni_conf: max_pool_size: must be >= 0, got -1"},
		{`{"min_pool_size": -2}`, "min_pool_size", "must be >= 0"},
		{`{"min_eni": -1}`, "min_eni", "must be >= 0"},
		{`{"max_eni": -1}`, "max_eni", "must be >= 0"},
		{`{"eni_cap_ratio": -0.5}`, "eni_cap_ratio", "must be > 0"},
		{`{"ip_stack": "ipv6"}`, "ip_stack", `eni_conf: ip_stack: "ipv6" is not supported (ipv4, dual)`},
		{`{"ip_stack": "IPv4"}`, "ip_stack", "is not supported"},
		{`{"vswitch_selection_policy": "fastest"}`, "vswitch_selection_policy", `"fastest" is not supported`},
		{`{"eni_selection_policy": "random"}`, "eni_selection_policy", `"random" is not supported (most_ips, least_ips)`},
		{`{"degradation": "read_only"}`, "degradation", `"read_only" is not supported`},
		{`{"idle_ip_reclaim_batch_size": -1}`, "idle_ip_reclaim_batch_size", "must be >= 0"},
		{`{"idle_ip_reclaim_jitter_factor": "-0.1"}`, "idle_ip_reclaim_jitter_factor", "must be >= 0"},
		{`{"idle_ip_reclaim_jitter_factor": "lots"}`, "idle_ip_reclaim_jitter_factor", `want a number such as "0.1"`},
		{`{"kube_client_qps": -1}`, "kube_client_qps", "must be >= 0"},
		{`{"kube_client_burst": -1}`, "kube_client_burst", "must be >= 0"},
		{`{"gc_period": "0s"}`, "gc_period", "must be > 0"},
		{`{"pool_heal_period": "0s"}`, "pool_heal_period", "must be > 0"},
		{`{"gc_period": "-1m"}`, "gc_period", "must be > 0"},
		{`{"gc_period": "5"}`, "gc_period", `invalid duration "5"`},
		{`{"gc_period": 300}`, "gc_period", "want a duration string"},
		{`{"pool_check_period": "0s"}`, "pool_check_period", "must be > 0"},
		{`{"metadata_lag_timeout": "0s"}`, "metadata_lag_timeout", "must be > 0"},
		{`{"reuse_cooldown": "-1s"}`, "reuse_cooldown", "must be >= 0"},
		{`{"sticky_time": "-1s"}`, "sticky_time", "must be >= 0"},
		{`{"idle_ip_reclaim_after": "-1s"}`, "idle_ip_reclaim_after", "must be >= 0"},
		{`{"idle_ip_reclaim_interval": "-1m"}`, "idle_ip_reclaim_interval", "must be > 0"},
		{`{"ip_pool_sync_period": "-1s"}`, "ip_pool_sync_period", "must be > 0"},
		{`{"ip_pool_sync_period": "soon"}`, "ip_pool_sync_period", "invalid duration"},
		{`{"service_cidr": "10.96.0.0"}`, "service_cidr", "want \"<ipv4 cidr>[,<ipv6 cidr>]\""},
		{`{"service_cidr": "10.96.0.0/12,10.0.0.0/8"}`, "service_cidr", "two CIDRs of the same family"},
		{`{"service_cidr": "10.96.0.0/12,fd00::/108,fd01::/108"}`, "service_cidr", "got 3 entries"},
		{`{"vswitches": {"cn-hangzhou-g": ["vsw-1", ""]}}`, "vswitches.cn-hangzhou-g", "empty vSwitch ID"},
		{`{"vswitches": {"cn-hangzhou-g": "vsw-1"}}`, "vswitches.cn-hangzhou-g", "want an array, got a JSON string"},
		{`{"vswitches": ["vsw-1"]}`, "vswitches", "want an object, got a JSON array"},
		{`{"security_groups": ["a","b","c","d","e","f","g","h","i","j","k"]}`, "security_groups", "at most 10"},
		{`{"security_group": "z", "security_groups": ["a","b","c","d","e","f","g","h","i","j"]}`, "security_groups", "got 11"},
		{`{"rate_limit": {"DescribeVSwitches": 0}}`, "rate_limit.DescribeVSwitches", "must be >= 1"},
		{`{"rate_limit": {"*": -5}}`, "rate_limit.*", "must be >= 1"},
		{`{"rate_limit": {"DescribeVSwitches": "fast"}}`, "rate_limit.DescribeVSwitches", "want an integer, got a JSON string"},
		{`{"backoff_override": {"eni_ops": {"Steps": 0}}}`, "backoff_override.eni_ops.Steps", "must be >= 1"},
		{`{"backoff_override": {"eni_ops": {"Duration": -1}}}`, "backoff_override.eni_ops.Duration", "must be >= 0"},
		{`{"backoff_override": {"eni_ops": {"Factor": -2}}}`, "backoff_override.eni_ops.Factor", "must be >= 0"},
		{`{"backoff_override": {"eni_ops": {"Jitter": -1}}}`, "backoff_override.eni_ops.Jitter", "must be >= 0"},
		{`{"backoff_override": {"eni_ops": {"Cap": "-1s"}}}`, "backoff_override.eni_ops.Cap", "must be >= 0"},
		{`{"backoff_override": {"x": {"Factor": "big"}}}`, "backoff_override.x.Factor", "want a number"},
		{`{"backoff_override": {"x": {"Duration": 1.5}}}`, "backoff_override.x.Duration", "want integer nanoseconds"},
		{`{"backoff_override": {"x": {"Duration": "1 s"}}}`, "backoff_override.x.Duration", "invalid duration"},
		{`{"backoff_override": {"x": {"Steps": 2.5}}}`, "backoff_override.x.Steps", "want an integer"},
		{`{"backoff_override": {"x": 5}}`, "backoff_override.x", "want a JSON object"},
		{`{"backoff_override": []}`, "backoff_override", "want a JSON object"},
		{`{"extra_routes": [{"dst": "10.0.0.0/8"}, {"dst": "nowhere"}]}`, "extra_routes[1].dst", "want a CIDR"},
		{`{"extra_routes": [{"dst": 5}]}`, "extra_routes[0].dst", "want a string, got a JSON number"},
		{`{"endpoint": "100.100.0.10:80"}`, "endpoint", "want an http(s) URL"},
		{`{"ecs_endpoint": "ftp://x"}`, "ecs_endpoint", "want an http(s) URL"},
		{`{"vpc_endpoint": "http://"}`, "vpc_endpoint", "want an http(s) URL"},
		{`{"metadata_endpoint": "100.100.100.200"}`, "metadata_endpoint", "want an http(s) URL"},
		{`{"max_pool_size": "5"}`, "max_pool_size", "want an integer, got a JSON string"},
		{`{"max_pool_size": 5.5}`, "max_pool_size", "want an integer, got a JSON number"},
		{`{"ip_stack": 4}`, "ip_stack", "want a string, got a JSON number"},
		{`{"enable_patch_pod_ips": "yes"}`, "enable_patch_pod_ips", "want true or false"},
		{`{"security_groups": "sg-1"}`, "security_groups", "want an array"},
	}
	for _, tc := range cases {
		t.Run(tc.doc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want an error for %s", cfg, tc.key)
			}
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error %q (%T) is not a *KeyError", err, err)
			}
			if ke.Key != tc.key {
				t.Errorf("KeyError.Key = %q, want %q (error %q)", ke.Key, tc.key, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "eni_conf: "+tc.key+": ") {
				t.Errorf("error %q does not start with %q", msg, "eni_conf: "+tc.key+": ")
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse([]byte(`{"max_pool_size": -1, "ip_stack": "ipv6", "gc_period": "0s"}`))
	if err == nil {
		t.Fatal("Parse succeeded, want three errors")
	}
	for _, key := range []string{"max_pool_size", "ip_stack", "gc_period"} {
		if !strings.Contains(err.Error(), "eni_conf: "+key+": ") {
			t.Errorf("error %q does not mention %s", err, key)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
		t.Errorf("got %d error lines, want 3:\n%s", n, err)
	}

	// Decode errors of several keys are reported together, too.
	_, err = Parse([]byte(`{"max_pool_size": "1", "min_pool_size": "2"}`))
	if err == nil || !strings.Contains(err.Error(), "max_pool_size") || !strings.Contains(err.Error(), "min_pool_size") {
		t.Errorf("error %v, want both max_pool_size and min_pool_size", err)
	}
}

func TestMalformedJSON(t *testing.T) {
	cases := []struct {
		doc    string
		offset int64 // -1: not a syntax error
		want   string
	}{
		{`{"max_pool_size": 5,}`, 21, "malformed JSON at byte offset 21"},
		{`{"max_pool_size" 5}`, 18, "malformed JSON at byte offset 18"},
		{`{"a":`, 5, "malformed JSON at byte offset 5"},
		{``, 0, "malformed JSON at byte offset 0"},
		{`{} {}`, 4, "malformed JSON at byte offset 4"},
		{`[1, 2]`, -1, "eni_conf: want a JSON object, got [1, 2]"},
		{`null`, -1, "eni_conf: want a JSON object, got null"},
		{`"max_pool_size"`, -1, "eni_conf: want a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.doc, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			var se *json.SyntaxError
			if tc.offset >= 0 {
				if !errors.As(err, &se) {
					t.Fatalf("error %q does not wrap a *json.SyntaxError", err)
				}
				if se.Offset != tc.offset {
					t.Errorf("offset = %d, want %d", se.Offset, tc.offset)
				}
			} else if errors.As(err, &se) {
				t.Errorf("error %q wraps a SyntaxError, want none", err)
			}
		})
	}
}

func TestBackoffOverride(t *testing.T) {
	doc := `{"backoff_override": {
		"eni_ops": {"Duration": 1000000000, "Factor": 1.5, "Jitter": 0.1, "Steps": 3, "Cap": 4000000000},
		"eni_release": {"duration": "250ms", "factor": 2, "jitter": 0, "steps": 4, "cap": "1s", "initialdelay": "100ms"},
		"wait_eni_status": {"Steps": 2},
		"eni_create": {"Duration": 2e9, "Cap": null},
		"my_key": {"Duration": "1s"},
		"meta_assign_private_ip": {"Duration": "10ms", "Retries": 3},
		"throttled": {"InitialDelay": "2s"}
	}}`
	c := mustParse(t, doc)
	cases := []struct {
		key  string
		want backoff.Policy
	}{
		// numeric nanoseconds, Terway's form
		{"eni_ops", backoff.Policy{Duration: time.Second, Factor: 1.5, Jitter: 0.1, Steps: 3, Cap: 4 * time.Second}},
		// duration strings, lower-case field names
		{"eni_release", backoff.Policy{InitialDelay: 100 * time.Millisecond, Duration: 250 * time.Millisecond, Factor: 2, Steps: 4, Cap: time.Second}},
		// partial entry: the rest from the key's built-in schedule
		{"wait_eni_status", backoff.Policy{Duration: 3 * time.Second, Factor: 1.5, Jitter: 0.5, Steps: 2}},
		// whole-number exponent form; null field keeps the built-in value
		{"eni_create", backoff.Policy{Duration: 2 * time.Second, Factor: 2, Jitter: 0.3, Steps: 2}},
		// a key without a built-in schedule starts from the "" one
		{"my_key", backoff.Policy{Duration: time.Second, Factor: 1.5, Jitter: 0.3, Steps: 6}},
		{"meta_assign_private_ip", backoff.Policy{Duration: 10 * time.Millisecond, Factor: 1, Jitter: 0.2, Steps: 10}},
		// a daemon key config once had no table for starts from its own
		// schedule, not the "" one
		{"throttled", backoff.Policy{InitialDelay: 2 * time.Second, Duration: 5 * time.Second, Factor: 2, Jitter: 0.5, Steps: 5, Cap: time.Minute}},
		// not overridden: built-in
		{"eni_ip_ops", backoff.Policy{Duration: 5 * time.Second, Factor: 1, Jitter: 1.3, Steps: 6}},
		{"eni_delete_confirm", backoff.Policy{Duration: 2 * time.Second, Factor: 1.5, Steps: 4, Cap: 4 * time.Second}},
		// unknown key, no "" override: built-in default
		{"no_such_key", backoff.Policy{Duration: 2 * time.Second, Factor: 1.5, Jitter: 0.3, Steps: 6}},
	}
	for _, tc := range cases {
		if got := c.Backoff(tc.key); got != tc.want {
			t.Errorf("Backoff(%q) = %+v, want %+v", tc.key, got, tc.want)
		}
	}
	if want := []string{"backoff_override.meta_assign_private_ip.Retries"}; !slices.Equal(c.Ignored, want) {
		t.Errorf("Ignored = %v, want %v", c.Ignored, want)
	}

	// An override of "" serves keys without a schedule of their own, not keys with one.
	c = mustParse(t, `{"backoff_override": {"": {"Duration": "1ms", "Steps": 1}}}`)
	if got := c.Backoff("no_such_key"); got.Duration != time.Millisecond || got.Steps != 1 {
		t.Errorf("Backoff(no_such_key) = %+v, want the \"\" override", got)
	}
	if got := c.Backoff(backoff.ENIOps); got != backoff.DefaultFor(backoff.ENIOps) {
		t.Errorf("Backoff(eni_ops) = %+v, want the built-in %+v", got, backoff.DefaultFor(backoff.ENIOps))
	}

	// A policy marshals durations as integer nanoseconds, the form Terway reads.
	out, err := json.Marshal(backoff.Policy{Duration: time.Second, Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"Duration":1000000000`) {
		t.Errorf("Marshal(Backoff) = %s, want Duration in nanoseconds", out)
	}
	var b backoff.Policy
	if err := json.Unmarshal(out, &b); err != nil || b.Duration != time.Second || b.Steps != 2 {
		t.Errorf("Unmarshal(%s) = %+v, %v", out, b, err)
	}
}

func TestIgnoredKeys(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"unknown keys, sorted", `{"zzz": 1, "max_pool_sise": 5, "aaa": null}`, []string{"aaa", "max_pool_sise", "zzz"}},
		{"unimplemented keys set", `{
			"enable_eni_trunking": true,
			"ipam_type": "crd", "eni_cap_policy": "preferTrunk", "prefix": "x", "enable_erdma": true,
			"enable_ip_prefix": true, "ipv4_prefix_count": 2, "ipv6_prefix_count": 1,
			"ip_warm_up_size": 10, "eni_tag_block_list": [{"key": "a", "value": "b"}],
			"wait_trunk_eni": true, "disable_security_group_check": true,
			"in_cluster_loadbalance": "true", "enable_eip_migrate": true}`,
			[]string{"disable_security_group_check", "enable_eip_migrate",
				"enable_eni_trunking", "enable_erdma", "enable_ip_prefix", "eni_cap_policy", "eni_tag_block_list",
				"in_cluster_loadbalance", "ip_warm_up_size", "ipam_type", "ipv4_prefix_count", "ipv6_prefix_count",
				"prefix", "wait_trunk_eni"}},
		{"unimplemented keys at zero values are not reported", `{
			"enable_eni_trunking": false, "ipam_type": "",
			"ipv4_prefix_count": 0, "eni_tag_block_list": [], "ip_warm_up_size": null, "eni_cap_policy": {}}`, nil},
		{"unimplemented key spelled in another case", `{"ENABLE_ENI_TRUNKING": true}`, []string{"enable_eni_trunking"}},
		{"known keys are not ignored", `{"max_pool_size": 5, "Min_Pool_Size": 1}`, nil},
		{"mixed", `{"max_pool_size": 5, "enable_erdma": true, "foo": {}}`, []string{"enable_erdma", "foo"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.doc)
			if !slices.Equal(c.Ignored, tc.want) {
				t.Errorf("Ignored = %v, want %v", c.Ignored, tc.want)
			}
		})
	}
}

func TestServiceCIDR(t *testing.T) {
	cases := []struct {
		in     string
		v4, v6 string // "" = not set
	}{
		{"10.96.0.0/12", "10.96.0.0/12", ""},
		{"10.96.0.0/12,fd00:10:96::/112", "10.96.0.0/12", "fd00:10:96::/112"},
		{" 10.96.0.0/12 , fd00:10:96::/112 ", "10.96.0.0/12", "fd00:10:96::/112"},
		{"fd00:10:96::/112,10.96.0.0/12", "10.96.0.0/12", "fd00:10:96::/112"},
		{"fd00:10:96::/112", "", "fd00:10:96::/112"},
		{"10.96.0.10/12", "10.96.0.0/12", ""}, // masked, as net.ParseCIDR does in Terway
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			doc, _ := json.Marshal(map[string]string{"service_cidr": tc.in})
			c := mustParse(t, string(doc))
			check := func(fam string, got netip.Prefix, want string) {
				if want == "" {
					if got.IsValid() {
						t.Errorf("%s = %s, want unset", fam, got)
					}
					return
				}
				if got != netip.MustParsePrefix(want) {
					t.Errorf("%s = %s, want %s", fam, got, want)
				}
			}
			check("ServiceCIDRv4", c.ServiceCIDRv4, tc.v4)
			check("ServiceCIDRv6", c.ServiceCIDRv6, tc.v6)
		})
	}
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "eni_conf")
	if err := os.WriteFile(path, []byte(`{"max_pool_size": 4}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseFile(path)
	if err != nil || c.MaxPoolSize != 4 {
		t.Fatalf("ParseFile = %+v, %v; want max_pool_size 4", c, err)
	}

	if _, err := ParseFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ParseFile(missing) error %v, want os.ErrNotExist", err)
	}

	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte(`{"max_pool_size": -3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ParseFile(bad)
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "max_pool_size" || !strings.Contains(err.Error(), bad) {
		t.Errorf("ParseFile(bad) error %v, want a max_pool_size KeyError naming the file", err)
	}
}

// An InitialDelay set in backoff_override reaches the backoff.Set built
// from BackoffOverride (as the daemon builds its one) and delays the first
// attempt by that much on the Set's clock. Before backoff.Policy the field
// was parsed here and dropped on the way to the Set.
func TestBackoffInitialDelayReachesSet(t *testing.T) {
	c := mustParse(t, `{"backoff_override": {"wait_eni_status": {"InitialDelay": "7s", "Duration": "1s", "Steps": 1}}}`)
	if got := c.Backoff(backoff.WaitENIStatus).InitialDelay; got != 7*time.Second {
		t.Fatalf("Backoff(wait_eni_status).InitialDelay = %v, want 7s", got)
	}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	set := backoff.NewSet(clk, c.BackoffOverride)
	start := clk.Now()
	first := make(chan time.Time, 1)
	done := make(chan error, 1)
	go func() {
		done <- set.Retry(context.Background(), backoff.WaitENIStatus, func(context.Context) (bool, error) {
			first <- clk.Now()
			return true, nil
		})
	}()
	testwait.Until(t, 5*time.Second, "Retry to arm a timer on the fake clock", func() bool {
		select {
		case at := <-first:
			t.Fatalf("first attempt at +%v, before the configured InitialDelay of 7s", at.Sub(start))
		default:
		}
		return clk.HasWaiters()
	})
	clk.Step(7 * time.Second)
	select {
	case at := <-first:
		if d := at.Sub(start); d != 7*time.Second {
			t.Errorf("first attempt at +%v, want +7s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no attempt after the configured InitialDelay passed")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestEIPSwitches: Terway writes its EIP switches as strings; booleans and
// "" (off) are read too, anything else is a clear error.
func TestEIPSwitches(t *testing.T) {
	for _, tc := range []struct {
		doc       string
		pool, rob bool
	}{
		{`{"enable_eip_pool": "true", "allow_eip_rob": "TRUE"}`, true, true},
		{`{"enable_eip_pool": true, "allow_eip_rob": false}`, true, false},
		{`{"enable_eip_pool": "", "allow_eip_rob": "false"}`, false, false},
		{`{}`, false, false},
	} {
		c := mustParse(t, tc.doc)
		if bool(c.EnableEIPPool) != tc.pool || bool(c.AllowEIPRob) != tc.rob {
			t.Errorf("%s: pool %v rob %v", tc.doc, c.EnableEIPPool, c.AllowEIPRob)
		}
	}
	_, err := Parse([]byte(`{"enable_eip_pool": "yes"}`))
	if err == nil || !strings.Contains(err.Error(), "enable_eip_pool") {
		t.Errorf("enable_eip_pool \"yes\": %v, want an error naming the key", err)
	}
}
