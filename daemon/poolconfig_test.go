package daemon

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/ipam"
)

// poolConfigInstance is the instance of the pool-config tests: 6 ENIs
// (5 secondary) of 10 IPv4 and 10 IPv6 addresses.
var (
	poolConfigInstance = cloud.Instance{ID: "i-pool", ZoneID: "zone-a", VSwitchID: "vsw-primary"}
	poolConfigLimits   = cloud.Limits{InstanceType: "ecs.test", Adapters: 6, IPv4PerAdapter: 10, IPv6PerAdapter: 10}
)

// testPoolFacts derives the facts from cfg as Daemon.poolFacts does, with
// no cloud to ask for security groups (cfg must name them).
func testPoolFacts(t *testing.T, cfg *config.Config) poolFacts {
	t.Helper()
	capa, err := cfg.Capacity(poolConfigLimits.Adapters, poolConfigLimits.IPv4PerAdapter)
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{cfg: cfg, node: &cloud.Node{Instance: poolConfigInstance}}
	tags, owner, err := d.ownershipTags()
	if err != nil {
		t.Fatal(err)
	}
	return poolFacts{Instance: poolConfigInstance, Limits: poolConfigLimits, Capacity: capa,
		DualStack: cfg.DualStack() && poolConfigLimits.SupportIPv6(), SecurityGroups: cfg.SecurityGroupIDs(),
		Tags: tags, Owner: owner, Growth: cfg.Backoff(backoff.PoolGrowth)}
}

// TestPoolConfigsMapsEveryKey sets every eni_conf key the pools act on to
// a value of its own, none the default, and checks where each lands.
func TestPoolConfigsMapsEveryKey(t *testing.T) {
	cfg, err := config.Parse([]byte(`{
		"max_pool_size": 4, "min_pool_size": 1, "eni_cap_shift": -1,
		"security_groups": ["sg-2", "sg-1"],
		"vswitches": {"zone-a": ["vsw-1", "vsw-2"], "zone-b": ["vsw-9"]}, "vswitch_selection_policy": "ordered",
		"ip_stack": "dual",
		"ip_batch_window": "11ms", "ip_exhausted_inhibit": "12m", "reuse_cooldown": "13s",
		"idle_ip_reclaim_after": "14m", "idle_ip_reclaim_interval": "15m", "idle_ip_reclaim_batch_size": 16,
		"idle_ip_reclaim_jitter_factor": "0.17", "pool_check_period": "18s", "vswitch_cache_ttl": "19m",
		"eni_limit_inhibit": "24s",
		"eni_selection_policy": "least_ips", "resource_group_id": "rg-20",
		"backoff_override": {"pool_growth": {"Duration": "21ms", "Cap": "22s"}},
		"cluster_id": "c-23", "eni_tags": {"env": "prod"}, "eni_tag_filter": {"team": "net"}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := newPoolConfigs(cfg, testPoolFacts(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	owner := cloud.OwnerTags(poolConfigInstance.ID, "c-23")
	owner["team"] = "net"
	tags := map[string]string{"env": "prod"}
	for k, v := range owner {
		tags[k] = v
	}
	sgs := []string{"sg-1", "sg-2"}
	filter := map[string]string{"team": "net"}
	// MaxENI = int(6 × 1) − 1 (eni_cap_shift) − 1 (eth0) = 4.
	want := poolConfigs{
		MultiIP: ipam.MultiIPConfig{MaxENI: 4, IPsPerENI: 10, Capacity: 40, MinIdle: 1, MaxIdle: 4, DualStack: true,
			BatchWindow: 11 * time.Millisecond, ExhaustedInhibit: 12 * time.Minute, Cooldown: 13 * time.Second,
			ENILimitInhibit: 24 * time.Second, IdleReclaimAfter: 14 * time.Minute, IdleReclaimInterval: 15 * time.Minute, IdleReclaimBatch: 16, IdleReclaimJitter: 0.17,
			SyncPeriod: 18 * time.Second, FailureBackoff: 21 * time.Millisecond, FailureBackoffCap: 22 * time.Second,
			PackENIs: false, SecurityGroups: sgs, Tags: tags, Owner: owner, TagFilter: filter, ResourceGroupID: "rg-20"},
		ENI: ipam.ENIPoolConfig{MaxENI: 4, MinIdle: 1, MaxIdle: 4, DualStack: true, SyncPeriod: 18 * time.Second,
			FailureBackoff: 21 * time.Millisecond, FailureBackoffCap: 22 * time.Second, ENILimitInhibit: 24 * time.Second,
			SecurityGroups: sgs, Tags: tags, Owner: owner, TagFilter: filter, ResourceGroupID: "rg-20"},
		PodCIDRCooldown: 13 * time.Second,
		VSwitch: vswitchConfig{Policy: cloud.SelectMostFree, Candidates: []string{"vsw-1", "vsw-2"},
			CacheTTL: 19 * time.Minute, ExhaustedInhibit: 12 * time.Minute},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("newPoolConfigs:\n got %+v\nwant %+v", got, want)
	}

	// Every field is set but those the daemon leaves to the pools'
	// defaults: a field added to a pool config without a mapping here
	// (or a place on this list) fails.
	defaulted := map[string]bool{"MultiIP.MaxConcurrentCreates": true, "MultiIP.PackENIs": true /* false is least_ips */}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for i := range v.NumField() {
			name := prefix + v.Type().Field(i).Name
			f := v.Field(i)
			switch {
			case f.Kind() == reflect.Struct:
				walk(name+".", f)
			case defaulted[name]:
			case f.IsZero():
				t.Errorf("%s is not set from eni_conf or the node's facts", name)
			}
		}
	}
	walk("", reflect.ValueOf(got))

	// Nothing above is a default: each key moved its field.
	def, err := newPoolConfigs(config.Defaults(), testPoolFacts(t, withSGs(config.Defaults())))
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2]any{
		"MultiIP.MaxENI": {got.MultiIP.MaxENI, def.MultiIP.MaxENI}, "MultiIP.Capacity": {got.MultiIP.Capacity, def.MultiIP.Capacity},
		"MultiIP.MinIdle": {got.MultiIP.MinIdle, def.MultiIP.MinIdle}, "MultiIP.MaxIdle": {got.MultiIP.MaxIdle, def.MultiIP.MaxIdle},
		"MultiIP.DualStack": {got.MultiIP.DualStack, def.MultiIP.DualStack}, "MultiIP.BatchWindow": {got.MultiIP.BatchWindow, def.MultiIP.BatchWindow},
		"MultiIP.ExhaustedInhibit":    {got.MultiIP.ExhaustedInhibit, def.MultiIP.ExhaustedInhibit},
		"MultiIP.Cooldown":            {got.MultiIP.Cooldown, def.MultiIP.Cooldown},
		"MultiIP.IdleReclaimAfter":    {got.MultiIP.IdleReclaimAfter, def.MultiIP.IdleReclaimAfter},
		"MultiIP.IdleReclaimInterval": {got.MultiIP.IdleReclaimInterval, def.MultiIP.IdleReclaimInterval},
		"MultiIP.IdleReclaimBatch":    {got.MultiIP.IdleReclaimBatch, def.MultiIP.IdleReclaimBatch},
		"MultiIP.IdleReclaimJitter":   {got.MultiIP.IdleReclaimJitter, def.MultiIP.IdleReclaimJitter},
		"MultiIP.SyncPeriod":          {got.MultiIP.SyncPeriod, def.MultiIP.SyncPeriod},
		"MultiIP.FailureBackoff":      {got.MultiIP.FailureBackoff, def.MultiIP.FailureBackoff},
		"MultiIP.FailureBackoffCap":   {got.MultiIP.FailureBackoffCap, def.MultiIP.FailureBackoffCap},
		"MultiIP.PackENIs":            {got.MultiIP.PackENIs, def.MultiIP.PackENIs},
		"MultiIP.ResourceGroupID":     {got.MultiIP.ResourceGroupID, def.MultiIP.ResourceGroupID},
		"ENI.MinIdle":                 {got.ENI.MinIdle, def.ENI.MinIdle}, "ENI.MaxIdle": {got.ENI.MaxIdle, def.ENI.MaxIdle},
		"PodCIDRCooldown":          {got.PodCIDRCooldown, def.PodCIDRCooldown},
		"VSwitch.Policy":           {got.VSwitch.Policy, def.VSwitch.Policy},
		"VSwitch.Candidates":       {got.VSwitch.Candidates, def.VSwitch.Candidates},
		"VSwitch.CacheTTL":         {got.VSwitch.CacheTTL, def.VSwitch.CacheTTL},
		"VSwitch.ExhaustedInhibit": {got.VSwitch.ExhaustedInhibit, def.VSwitch.ExhaustedInhibit},
	} {
		if reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s = %v, the same as with the defaults: the test does not show where its key lands", name, pair[0])
		}
	}
}

// withSGs gives cfg a security group, which testPoolFacts needs.
func withSGs(cfg *config.Config) *config.Config {
	cfg.SecurityGroup = "sg-1"
	return cfg
}

// TestPoolConfigsChoices covers the keys that choose rather than copy.
func TestPoolConfigsChoices(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		check      func(poolConfigs) string
	}{
		{"vswitch_selection_policy random", `{"vswitch_selection_policy": "random"}`, func(p poolConfigs) string {
			return expect("VSwitch.Policy", p.VSwitch.Policy, cloud.SelectRandom)
		}},
		{"vswitch_selection_policy most", `{"vswitch_selection_policy": "most"}`, func(p poolConfigs) string {
			return expect("VSwitch.Policy", p.VSwitch.Policy, cloud.SelectMostFree)
		}},
		{"vswitch_selection_policy ordered", `{"vswitch_selection_policy": "ordered"}`, func(p poolConfigs) string {
			return expect("VSwitch.Policy", p.VSwitch.Policy, cloud.SelectMostFree)
		}},
		{"no vswitches: the instance's", `{}`, func(p poolConfigs) string {
			return expect("VSwitch.Candidates", p.VSwitch.Candidates, []string{"vsw-primary"})
		}},
		{"vswitches of another zone only: the instance's", `{"vswitches": {"zone-b": ["vsw-9"]}}`, func(p poolConfigs) string {
			return expect("VSwitch.Candidates", p.VSwitch.Candidates, []string{"vsw-primary"})
		}},
		{"eni_selection_policy most_ips packs", `{"eni_selection_policy": "most_ips"}`, func(p poolConfigs) string {
			return expect("MultiIP.PackENIs", p.MultiIP.PackENIs, true)
		}},
		{"eni_selection_policy least_ips spreads", `{"eni_selection_policy": "least_ips"}`, func(p poolConfigs) string {
			return expect("MultiIP.PackENIs", p.MultiIP.PackENIs, false)
		}},
		{"min_eni counts ENIs' worth of addresses", `{"min_eni": 2, "max_pool_size": 100}`, func(p poolConfigs) string {
			return expect("MultiIP idle", [3]int{p.MultiIP.MinIdle, p.MultiIP.MaxIdle, p.MultiIP.Capacity}, [3]int{20, 50, 50}) +
				expect("ENI idle", [2]int{p.ENI.MinIdle, p.ENI.MaxIdle}, [2]int{2, 5})
		}},
		{"max_eni caps both pools", `{"max_eni": 2, "max_pool_size": 100}`, func(p poolConfigs) string {
			return expect("MaxENI", [3]int{p.MultiIP.MaxENI, p.ENI.MaxENI, p.MultiIP.Capacity}, [3]int{2, 2, 20})
		}},
		{"ipv4 only", `{"ip_stack": "ipv4"}`, func(p poolConfigs) string {
			return expect("DualStack", [2]bool{p.MultiIP.DualStack, p.ENI.DualStack}, [2]bool{false, false})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.conf))
			if err != nil {
				t.Fatal(err)
			}
			got, err := newPoolConfigs(cfg, testPoolFacts(t, withSGs(cfg)))
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(got); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func expect(name string, got, want any) string {
	if reflect.DeepEqual(got, want) {
		return ""
	}
	return fmt.Sprintf("%s: got %v, want %v\n", name, got, want)
}
