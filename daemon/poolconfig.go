package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/ipam"
	"github.com/terway-sim/terway/daemon/mode"
)

// poolFacts are what the pools are configured from besides eni_conf: the
// instance, its type's limits and capacity, and what the daemon looked up
// or derived at start (see Daemon.poolFacts).
type poolFacts struct {
	Instance cloud.Instance
	Limits   cloud.Limits
	// Capacity is eni_conf's ENI capacity on this instance type
	// (config.Config.Capacity).
	Capacity config.ENICapacity
	// DualStack is ip_stack dual on a type that supports it.
	DualStack bool
	// SecurityGroups are those of eni_conf, else the instance's.
	SecurityGroups []string
	// Tags and Owner are the ownership tags (Daemon.ownershipTags).
	Tags, Owner map[string]string
	// Growth is the backoff_override "pool_growth" schedule.
	Growth backoff.Policy
}

// poolConfigs are the typed configurations of the daemon's pools; the
// daemon's mode picks which it builds (Daemon.newPool).
type poolConfigs struct {
	// MultiIP is the shared-ENI pool of ENIMultiIP mode; its Capacity is
	// the node's pod capacity in that mode.
	MultiIP ipam.MultiIPConfig
	// ENI is the exclusive-ENI pool of ENIOnly and VPC modes.
	ENI ipam.ENIPoolConfig
	// PodCIDRCooldown is the reuse cooldown of VPC mode's node podCIDR.
	PodCIDRCooldown time.Duration
	// VSwitch is the vSwitch pool both ENI pools create ENIs in.
	VSwitch vswitchConfig
}

// vswitchConfig is what cloud.NewVSwitchPool takes besides the API, the
// clock and the seed.
type vswitchConfig struct {
	// Policy is cloud.SelectRandom or cloud.SelectMostFree.
	Policy string
	// Candidates are vswitches[zone], else the instance's own vSwitch.
	Candidates []string
	// CacheTTL is vswitch_cache_ttl; ExhaustedInhibit ip_exhausted_inhibit.
	CacheTTL, ExhaustedInhibit time.Duration
}

// newPoolConfigs maps eni_conf and the node's facts onto the pools'
// configurations: every eni_conf key a pool acts on lands here, and only
// here. It does no I/O.
func newPoolConfigs(cfg *config.Config, f poolFacts) (poolConfigs, error) {
	ips, err := cfg.PoolSizes(f.Capacity.MaxENI, f.Limits.IPv4PerAdapter)
	if err != nil {
		return poolConfigs{}, err
	}
	enis, err := cfg.PoolSizes(f.Capacity.MaxENI, 1) // one pod per ENI
	if err != nil {
		return poolConfigs{}, err
	}
	vsws := cfg.VSwitchesForZone(f.Instance.ZoneID)
	if len(vsws) == 0 {
		vsws = []string{f.Instance.VSwitchID}
	}
	policy := cloud.SelectRandom
	if cfg.VSwitchSelectionPolicy != "" && cfg.VSwitchSelectionPolicy != config.VSwitchRandom {
		policy = cloud.SelectMostFree
	}
	return poolConfigs{
		MultiIP: ipam.MultiIPConfig{MaxENI: f.Capacity.MaxENI, IPsPerENI: f.Limits.IPv4PerAdapter,
			Capacity: ips.Capacity, MinIdle: ips.MinPoolSize, MaxIdle: ips.MaxPoolSize, DualStack: f.DualStack,
			BatchWindow: cfg.IPBatchWindow.Duration, ExhaustedInhibit: cfg.IPExhaustedInhibit.Duration, Cooldown: cfg.ReuseCooldown.Duration,
			ENILimitInhibit:  cfg.ENILimitInhibit.Duration,
			IdleReclaimAfter: cfg.IdleIPReclaimAfter.Duration, IdleReclaimInterval: cfg.IdleIPReclaimInterval.Duration,
			IdleReclaimBatch: cfg.IdleIPReclaimBatchSize, IdleReclaimJitter: float64(cfg.IdleIPReclaimJitterFactor),
			SyncPeriod: cfg.PoolCheckPeriod.Duration, FailureBackoff: f.Growth.Duration, FailureBackoffCap: f.Growth.Cap,
			PackENIs: cfg.ENISelectionPolicy != config.ENILeastIPs, SecurityGroups: f.SecurityGroups, Tags: f.Tags, Owner: f.Owner,
			TagFilter: cfg.ENITagFilter, ResourceGroupID: cfg.ResourceGroupID},
		ENI: ipam.ENIPoolConfig{MaxENI: f.Capacity.MaxENI, MinIdle: enis.MinPoolSize, MaxIdle: enis.MaxPoolSize,
			DualStack: f.DualStack, SyncPeriod: cfg.PoolCheckPeriod.Duration, SecurityGroups: f.SecurityGroups, Tags: f.Tags, Owner: f.Owner,
			TagFilter: cfg.ENITagFilter, ResourceGroupID: cfg.ResourceGroupID, FailureBackoff: f.Growth.Duration,
			FailureBackoffCap: f.Growth.Cap, ENILimitInhibit: cfg.ENILimitInhibit.Duration},
		PodCIDRCooldown: cfg.ReuseCooldown.Duration,
		VSwitch: vswitchConfig{Policy: policy, Candidates: vsws, CacheTTL: cfg.VSwitchCacheTTL.Duration,
			ExhaustedInhibit: cfg.IPExhaustedInhibit.Duration},
	}, nil
}

// poolFacts gathers what newPoolConfigs needs besides eni_conf: ip_stack
// checked against the instance type, the security groups (eni_conf's,
// else those of the instance, read from the cloud), the ownership tags
// and the pool-growth backoff.
func (d *Daemon) poolFacts(ctx context.Context, capa config.ENICapacity) (poolFacts, error) {
	f := poolFacts{Instance: d.node.Instance, Limits: d.limits, Capacity: capa, DualStack: d.cfg.DualStack(),
		SecurityGroups: d.cfg.SecurityGroupIDs(), Growth: d.backoffSet().Get(backoff.PoolGrowth)}
	if f.DualStack && !d.limits.SupportIPv6() {
		d.log.Warn("ip_stack dual but the instance type has fewer IPv6 than IPv4 addresses per ENI; using IPv4 only",
			"type", d.limits.InstanceType)
		f.DualStack = false
	}
	var err error
	if len(f.SecurityGroups) == 0 {
		if f.SecurityGroups, err = d.node.API.SecurityGroupsOfInstance(ctx, d.node.Instance.ID); err != nil {
			return poolFacts{}, err
		}
	}
	if f.Tags, f.Owner, err = d.ownershipTags(); err != nil {
		return poolFacts{}, err
	}
	return f, nil
}

// newPool builds the pool of the daemon's mode from pc and returns it
// with the node's pod capacity in that mode.
func (d *Daemon) newPool(ctx context.Context, capa config.ENICapacity, pc poolConfigs, vp *cloud.VSwitchPool) (ipam.Pool, int, error) {
	switch d.mode {
	case mode.ENIMultiIP:
		pool, err := ipam.NewMultiIP(pc.MultiIP, d.node, vp, d.clock, d.log, nodeEvents{d})
		if err != nil {
			return nil, 0, err
		}
		return pool, pc.MultiIP.Capacity, nil
	case mode.ENIOnly:
		pool, err := ipam.NewENIPool(pc.ENI, d.node, vp, d.clock, d.log, nodeEvents{d})
		if err != nil {
			return nil, 0, err
		}
		return pool, capa.ENIOnly, nil
	case mode.VPC:
		n, err := d.kube.Node(ctx)
		if err != nil {
			return nil, 0, err
		}
		prefix, err := netip.ParsePrefix(n.Spec.PodCIDR)
		if err != nil {
			return nil, 0, fmt.Errorf("VPC mode needs the node's spec.podCIDR (got %q): %w", n.Spec.PodCIDR, err)
		}
		cidr, err := ipam.NewPodCIDR(prefix, pc.PodCIDRCooldown, d.clock)
		if err != nil {
			return nil, 0, err
		}
		pool, err := ipam.NewENIPool(pc.ENI, d.node, vp, d.clock, d.log, nodeEvents{d})
		if err != nil {
			return nil, 0, err
		}
		return ipam.NewVPC(cidr, pool), cidr.Size(), nil
	}
	return nil, 0, fmt.Errorf("daemon: unknown mode %q", d.mode) // New has checked it
}
