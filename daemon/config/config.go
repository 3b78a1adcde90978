package config

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
)

// Paths where the daemon finds eni_conf. The Helm chart mounts the
// ConfigMap key eni_conf at DefaultPath; DefaultLegacyPath is the
// default of Terway's -config flag.
const (
	DefaultPath       = "/etc/eni/eni_conf"
	DefaultLegacyPath = "/etc/eni/eni.json"
)

// Values of ip_stack.
const (
	IPStackIPv4 = "ipv4"
	IPStackDual = "dual"
)

// Values of vswitch_selection_policy. VSwitchOrdered and VSwitchMost mean the
// same: the vSwitch with the most free IPs (DescribeVSwitches
// AvailableIpAddressCount) first. "ordered" is what Terway's config calls it,
// "most" what Terway calls it internally; Parse turns "most" into "ordered".
const (
	VSwitchRandom  = "random"
	VSwitchOrdered = "ordered"
	VSwitchMost    = "most"
)

// Values of eni_selection_policy.
const (
	// ENIMostIPs fills the ENI that already holds the most IPs first (packs
	// pods, so emptied ENIs can be released whole).
	ENIMostIPs = "most_ips"
	// ENILeastIPs spreads IPs over ENIs, the emptiest first.
	ENILeastIPs = "least_ips"
)

// Values of degradation.
const (
	// DegradationNone: normal operation.
	DegradationNone = ""
	// DegradationNoMutation: no mutating cloud call at all (no create,
	// attach, assign, unassign, detach, delete); pods get only what the pool
	// already holds.
	DegradationNoMutation = "no_mutation"
	// DegradationNoRelease: allocate as usual but never give anything back
	// to the cloud (no unassign, detach, delete).
	DegradationNoRelease = "no_release"
)

// Default values of keys whose default is not the zero value.
const (
	DefaultENICapRatio               = 1.0
	DefaultIdleIPReclaimInterval     = 10 * time.Minute
	DefaultIdleIPReclaimBatchSize    = 5
	DefaultIdleIPReclaimJitterFactor = 0.1
	DefaultIPPoolSyncPeriod          = 120 * time.Second
	DefaultMetadataEndpoint          = "http://100.100.100.200"
	DefaultGCPeriod                  = 5 * time.Minute
	DefaultPoolHealPeriod            = 10 * time.Second
	DefaultCNIGCGrace                = time.Minute
	DefaultPoolCheckPeriod           = 2 * time.Minute
	DefaultStickyTime                = 5 * time.Minute
	DefaultStorePath                 = "/var/lib/cni/terway/ResRelation.db"
	DefaultSocketPath                = "/var/run/eni/eni.socket"
	DefaultMetadataLagTimeout        = 30 * time.Second
	DefaultIPBatchWindow             = 200 * time.Millisecond
	DefaultIPExhaustedInhibit        = 5 * time.Minute
	DefaultENILimitInhibit           = time.Minute
	DefaultThrottleWindow            = time.Minute
	DefaultVSwitchCacheTTL           = 10 * time.Minute
	DefaultCNIConfDir                = "/etc/cni/net.d"
	DefaultCNIBinDir                 = "/opt/cni/bin"
	DefaultCNICacheDir               = "/var/lib/cni"
	// DefaultCNIStateDir is the terway plugin's state_dir default
	// (cni.DefaultStateDir), where it records every attachment.
	DefaultCNIStateDir     = "/var/lib/cni/terway"
	DefaultKubeSyncTimeout = 30 * time.Second
	// MaxSecurityGroups bounds security_group ∪ security_groups (Terway main).
	MaxSecurityGroups = 10
)

// Config is the daemon configuration eni_conf. Field tags are Terway's key
// names; see the package documentation for every key, its default and its
// meaning. Parse fills in defaults, so every field of a parsed Config is
// ready to use.
type Config struct {
	// Terway's keys.

	// Version is informational.
	Version string `json:"version,omitempty"`
	// AccessKey and AccessSecret are a static AccessKey pair.
	AccessKey    string `json:"access_key,omitempty"`
	AccessSecret string `json:"access_secret,omitempty"`
	// CredentialPath is an encrypted STS token file.
	CredentialPath string `json:"credential_path,omitempty"`
	// RegionID overrides the metadata service's region-id.
	RegionID string `json:"region_id,omitempty"`
	// ServiceCIDR is "<v4>[,<v6>]"; see ServiceCIDRv4 and ServiceCIDRv6.
	ServiceCIDR string `json:"service_cidr,omitempty"`
	// VSwitches maps a zone ID to the vSwitches ENIs are created in.
	VSwitches map[string][]string `json:"vswitches,omitempty"`
	// ENITags are added to every ENI created.
	ENITags map[string]string `json:"eni_tags,omitempty"`
	// ENITagFilter, when set, limits the ENIs managed to those tagged so.
	ENITagFilter map[string]string `json:"eni_tag_filter,omitempty"`
	// MaxPoolSize bounds the idle pool; see PoolSizes.
	MaxPoolSize int `json:"max_pool_size"`
	// MinPoolSize is the warm pool; see PoolSizes.
	MinPoolSize int `json:"min_pool_size"`
	// MinENI, when > 0, sets the warm pool to MinENI ENIs' worth of IPs.
	MinENI int `json:"min_eni"`
	// MaxENI, when > 0, caps the secondary ENIs used; see Capacity.
	MaxENI int `json:"max_eni"`
	// SecurityGroup and SecurityGroups are unioned by SecurityGroupIDs.
	SecurityGroup  string   `json:"security_group,omitempty"`
	SecurityGroups []string `json:"security_groups,omitempty"`
	// ENICapRatio and ENICapShift scale the instance's ENI count; see Capacity.
	ENICapRatio float64 `json:"eni_cap_ratio"`
	ENICapShift int     `json:"eni_cap_shift"`
	// VSwitchSelectionPolicy is VSwitchRandom or VSwitchOrdered after Parse.
	VSwitchSelectionPolicy string `json:"vswitch_selection_policy"`
	// IPStack is IPStackIPv4 or IPStackDual.
	IPStack string `json:"ip_stack"`
	// CustomStatefulWorkloadKinds are owner kinds treated like StatefulSet.
	CustomStatefulWorkloadKinds []string `json:"custom_stateful_workload_kinds,omitempty"`
	// BackoffOverride holds the configured schedules, each already merged
	// over its key's built-in one ([backoff.DefaultFor]); read schedules
	// through Backoff, or hand the map to [backoff.NewSet].
	BackoffOverride map[string]backoff.Policy `json:"backoff_override,omitempty"`
	// RateLimit holds the defaults merged with the configured entries
	// (calls per minute by API name); read it through RateLimitFor.
	RateLimit map[string]int `json:"rate_limit"`
	// IdleIPReclaimAfter enables idle IP reclaim when > 0.
	IdleIPReclaimAfter Duration `json:"idle_ip_reclaim_after"`
	// IdleIPReclaimInterval is the time between reclaim rounds.
	IdleIPReclaimInterval Duration `json:"idle_ip_reclaim_interval"`
	// IdleIPReclaimBatchSize is the most IPs returned per round.
	IdleIPReclaimBatchSize int `json:"idle_ip_reclaim_batch_size"`
	// IdleIPReclaimJitterFactor stretches the interval at random.
	IdleIPReclaimJitterFactor StringFloat `json:"idle_ip_reclaim_jitter_factor"`
	// IPPoolSyncPeriod is how often the pool is trimmed and refilled.
	IPPoolSyncPeriod Duration `json:"ip_pool_sync_period"`
	// ENISelectionPolicy is ENIMostIPs or ENILeastIPs.
	ENISelectionPolicy string `json:"eni_selection_policy"`
	// ResourceGroupID is the resource group of the ENIs created.
	ResourceGroupID string `json:"resource_group_id,omitempty"`
	// KubeClientQPS and KubeClientBurst limit the Kubernetes client (0: default).
	KubeClientQPS   float32 `json:"kube_client_qps,omitempty"`
	KubeClientBurst int     `json:"kube_client_burst,omitempty"`
	// EnablePatchPodIPs turns on the k8s.aliyun.com/pod-ips annotation.
	EnablePatchPodIPs bool `json:"enable_patch_pod_ips"`
	// EnableEIPPool gives pods that ask for one (k8s.aliyun.com/
	// pod-with-eip) an elastic IP of their own.
	EnableEIPPool StringBool `json:"enable_eip_pool"`
	// AllowEIPRob lets a pod take a user's EIP (pod-eip-instanceid) that
	// is bound elsewhere.
	AllowEIPRob StringBool `json:"allow_eip_rob"`
	// DisableDevicePlugin turns off the aliyun/eni device plugin.
	DisableDevicePlugin bool `json:"disable_device_plugin"`
	// ExtraRoutes are routed into pods through the pod's gateway.
	ExtraRoutes []Route `json:"extra_routes,omitempty"`

	// Our extensions.

	// Endpoint is one URL serving both the ECS and the VPC API ("": real cloud).
	Endpoint string `json:"endpoint,omitempty"`
	// ECSEndpointURL and VPCEndpointURL override Endpoint per API; read them
	// through ECSEndpoint and VPCEndpoint.
	ECSEndpointURL string `json:"ecs_endpoint,omitempty"`
	VPCEndpointURL string `json:"vpc_endpoint,omitempty"`
	// MetadataEndpoint is the instance metadata service's base URL.
	MetadataEndpoint string `json:"metadata_endpoint"`
	// ClusterID goes into the ownership tags of the ENIs created.
	ClusterID string `json:"cluster_id,omitempty"`
	// GCPeriod is how often store, pods and cloud are reconciled.
	GCPeriod Duration `json:"gc_period"`
	// PoolHealPeriod is how often the pool compares metadata with what it
	// holds to heal what an operator changed out of band (ours).
	PoolHealPeriod Duration `json:"pool_heal_period"`
	// CNIGCGrace protects attachments younger than this from CNI GC: the
	// runtime may have listed its valid attachments just before an ADD.
	CNIGCGrace Duration `json:"cni_gc_grace"`
	// PoolCheckPeriod is how often the pool is reconciled.
	PoolCheckPeriod Duration `json:"pool_check_period"`
	// ReuseCooldown is how long a released IP waits before reuse.
	ReuseCooldown Duration `json:"reuse_cooldown"`
	// StickyTime is how long a deleted stateful pod's IP stays reserved.
	StickyTime Duration `json:"sticky_time"`
	// Degradation is DegradationNone, DegradationNoMutation or
	// DegradationNoRelease.
	Degradation string `json:"degradation,omitempty"`
	// StorePath is the daemon's bbolt store.
	StorePath string `json:"store_path"`
	// SocketPath is the gRPC socket the CNI plugin dials.
	SocketPath string `json:"socket_path"`
	// MetadataLagTimeout bounds the wait for metadata to show an ENI or IP.
	MetadataLagTimeout Duration `json:"metadata_lag_timeout"`
	// IPBatchWindow is how long new demand waits to aggregate into one
	// cloud call (Terway waits 300ms).
	IPBatchWindow Duration `json:"ip_batch_window"`
	// IPExhaustedInhibit is how long a dry vSwitch (and the ENIs in it)
	// is not asked for addresses again.
	IPExhaustedInhibit Duration `json:"ip_exhausted_inhibit"`
	// ENILimitInhibit is how long ENI creation pauses after the cloud
	// answered that the instance holds all the ENIs it can.
	ENILimitInhibit Duration `json:"eni_limit_inhibit"`
	// ThrottleWindow is the cloud's flow-control window: a call throttled
	// in one window waits for the next (ECS: the clock minute).
	ThrottleWindow Duration `json:"throttle_window"`
	// VSwitchCacheTTL is how long a DescribeVSwitches answer is trusted.
	VSwitchCacheTTL Duration `json:"vswitch_cache_ttl"`
	// NotReadyOnIPExhaustion makes CNI STATUS fail while no address can
	// be handed out (off: exhaustion is only a node condition).
	NotReadyOnIPExhaustion bool `json:"not_ready_on_ip_exhaustion,omitempty"`
	// CNIConfDir, CNIBinDir and CNICacheDir are where the periodic CNI
	// CHECK finds the network config, the plugins and the runtime's
	// cached ADD results.
	CNIConfDir  string `json:"cni_conf_dir"`
	CNIBinDir   string `json:"cni_bin_dir"`
	CNICacheDir string `json:"cni_cache_dir"`
	// CNIStateDir is the terway plugin's state_dir: its attachment
	// records are one of the sources the daemon restores from.
	CNIStateDir string `json:"cni_state_dir"`
	// KubeSyncTimeout bounds the wait for the API server at start; past
	// it the daemon restores from local sources and serves, releasing or
	// reusing nothing any source shows as held until the API server has
	// been read.
	KubeSyncTimeout Duration `json:"kube_sync_timeout"`

	// Results of Parse, not keys.

	// ServiceCIDRv4 and ServiceCIDRv6 are service_cidr parsed (masked);
	// the zero Prefix (IsValid false) where that family is not configured.
	ServiceCIDRv4 netip.Prefix `json:"-"`
	ServiceCIDRv6 netip.Prefix `json:"-"`
	// Ignored lists, sorted, the keys that were accepted but have no effect:
	// unknown keys, Terway keys this daemon does not implement (only when
	// set to a non-zero value), and unknown fields of backoff_override
	// entries (as "backoff_override.<key>.<field>"). The daemon logs them.
	Ignored []string `json:"-"`
}

// Defaults returns the configuration of an empty eni_conf ({}).
func Defaults() *Config {
	return &Config{
		ENICapRatio:               DefaultENICapRatio,
		VSwitchSelectionPolicy:    VSwitchRandom,
		IPStack:                   IPStackIPv4,
		RateLimit:                 cloud.DefaultRateLimits(),
		IdleIPReclaimInterval:     Duration{DefaultIdleIPReclaimInterval},
		IdleIPReclaimBatchSize:    DefaultIdleIPReclaimBatchSize,
		IdleIPReclaimJitterFactor: DefaultIdleIPReclaimJitterFactor,
		IPPoolSyncPeriod:          Duration{DefaultIPPoolSyncPeriod},
		ENISelectionPolicy:        ENIMostIPs,
		EnablePatchPodIPs:         true,
		MetadataEndpoint:          DefaultMetadataEndpoint,
		GCPeriod:                  Duration{DefaultGCPeriod},
		PoolHealPeriod:            Duration{DefaultPoolHealPeriod},
		CNIGCGrace:                Duration{DefaultCNIGCGrace},
		PoolCheckPeriod:           Duration{DefaultPoolCheckPeriod},
		StickyTime:                Duration{DefaultStickyTime},
		StorePath:                 DefaultStorePath,
		SocketPath:                DefaultSocketPath,
		MetadataLagTimeout:        Duration{DefaultMetadataLagTimeout},
		IPBatchWindow:             Duration{DefaultIPBatchWindow},
		IPExhaustedInhibit:        Duration{DefaultIPExhaustedInhibit},
		ENILimitInhibit:           Duration{DefaultENILimitInhibit},
		ThrottleWindow:            Duration{DefaultThrottleWindow},
		VSwitchCacheTTL:           Duration{DefaultVSwitchCacheTTL},
		CNIConfDir:                DefaultCNIConfDir,
		CNIBinDir:                 DefaultCNIBinDir,
		CNICacheDir:               DefaultCNICacheDir,
		CNIStateDir:               DefaultCNIStateDir,
		KubeSyncTimeout:           Duration{DefaultKubeSyncTimeout},
	}
}

// Backoff returns the schedule for key: backoff_override[key] if configured,
// else the built-in one for key, else backoff_override[""], else the built-in
// default — the schedule the daemon's [backoff.Set] uses for key.
func (c *Config) Backoff(key string) backoff.Policy {
	return backoff.NewSet(nil, c.BackoffOverride).Get(key)
}

// RateLimitFor returns the client limit in calls per minute for an API:
// rate_limit[api], else rate_limit["*"], else the built-in default.
func (c *Config) RateLimitFor(api string) int {
	if v, ok := c.RateLimit[api]; ok {
		return v
	}
	if v, ok := c.RateLimit[cloud.DefaultRateLimitKey]; ok {
		return v
	}
	return cloud.DefaultRateLimits()[cloud.DefaultRateLimitKey]
}

// SecurityGroupIDs returns security_group ∪ security_groups, sorted, without
// duplicates or empty strings (as Terway does). Empty means: use the
// security groups of the instance's primary ENI.
func (c *Config) SecurityGroupIDs() []string {
	var ids []string
	if c.SecurityGroup != "" {
		ids = append(ids, c.SecurityGroup)
	}
	for _, id := range c.SecurityGroups {
		if id != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// VSwitchesForZone returns vswitches[zone]. Empty means: use the vSwitch of
// the instance's primary ENI (metadata vswitch-id).
func (c *Config) VSwitchesForZone(zone string) []string {
	return slices.Clone(c.VSwitches[zone])
}

// IsStatefulKind reports whether pods owned by a workload of this kind keep
// their IP for sticky_time after deletion: StatefulSet always, plus
// custom_stateful_workload_kinds; compared case-insensitively.
func (c *Config) IsStatefulKind(kind string) bool {
	if strings.EqualFold(kind, "StatefulSet") {
		return true
	}
	for _, k := range c.CustomStatefulWorkloadKinds {
		if strings.EqualFold(k, kind) {
			return true
		}
	}
	return false
}

// DualStack reports whether ip_stack is dual.
func (c *Config) DualStack() bool {
	return c.IPStack == IPStackDual
}

// ECSEndpoint returns the ECS API endpoint URL: ecs_endpoint, else endpoint,
// else "" (the real cloud's regional endpoint).
func (c *Config) ECSEndpoint() string {
	if c.ECSEndpointURL != "" {
		return c.ECSEndpointURL
	}
	return c.Endpoint
}

// VPCEndpoint returns the VPC API endpoint URL: vpc_endpoint, else endpoint,
// else "" (the real cloud's regional endpoint).
func (c *Config) VPCEndpoint() string {
	if c.VPCEndpointURL != "" {
		return c.VPCEndpointURL
	}
	return c.Endpoint
}

// Redacted returns a shallow copy fit for logging: access_key and
// access_secret are masked when set. Maps and slices are shared.
func (c *Config) Redacted() *Config {
	out := *c
	if out.AccessKey != "" {
		out.AccessKey = "***"
	}
	if out.AccessSecret != "" {
		out.AccessSecret = "***"
	}
	return &out
}
