package cluster

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/terway-sim/terway/fakecloud"
)

// DefaultInstanceType is the nodes' instance type when none is given:
// four ENIs of 15 addresses, so ENIMultiIP holds 45 pods per node and
// ENIOnly 3.
const DefaultInstanceType = "ecs.g7.xlarge"

// LabConsistencyWindow is how long a new ENI is missing from Describe in
// the lab's default world (world time; a world file sets its own).
const LabConsistencyWindow = 500 * time.Millisecond

// labSpec is the emulated world: the world file's, or the default world's
// topology with the lab's own instances, spread over the zones.
func labSpec(c Config) (fakecloud.Spec, error) {
	var spec fakecloud.Spec
	if c.WorldFile != "" {
		s, err := fakecloud.LoadSpec(c.WorldFile)
		if err != nil {
			return spec, err
		}
		spec = s
		if c.Nodes > 0 {
			spec.Instances = firstRunning(spec.Instances, c.Nodes)
		}
	} else {
		spec = fakecloud.DefaultSpec()
		// The lab opts in to eventual consistency after Create, which
		// fakecloud's default world no longer has (ECS documents
		// CreateNetworkInterface as synchronous): the window the lab has
		// always run with, so that the daemon's handling of a lagging
		// Describe stays exercised end to end and the demo is unchanged.
		spec.Settings.ConsistencyWindow = fakecloud.Duration(LabConsistencyWindow)
		nodeVSws := spec.VSwitches
		spec.VSwitches = append(slices.Clip(nodeVSws), podVSwitches(nodeVSws)...)
		spec.Instances = nil
		for i := range c.Nodes {
			vsw := nodeVSws[i%len(nodeVSws)]
			spec.Instances = append(spec.Instances, fakecloud.InstanceSpec{
				ID:   fmt.Sprintf("i-bp1terwaylab%08d", i+1),
				Name: fmt.Sprintf("%s-%d", c.Name, i+1), InstanceType: c.InstanceType,
				VSwitchID: vsw.ID, SecurityGroupIDs: []string{fakecloud.DefaultSecurityGroup},
				RAMRole: fakecloud.DefaultRAMRole,
			})
		}
	}
	if err := spec.Validate(); err != nil {
		return spec, fmt.Errorf("lab world: %w", err)
	}
	return spec, nil
}

// podVSwitches are a second vSwitch in each zone of the default world,
// named in no eni_conf: a node's dynamic config (or a user's) can move its
// new ENIs there, as clusters with dedicated pod vSwitches do. Their
// CIDRs are those of nodes' (192.168.i.0/24) plus 16.
func podVSwitches(nodes []fakecloud.VSwitchSpec) []fakecloud.VSwitchSpec {
	out := make([]fakecloud.VSwitchSpec, len(nodes))
	for i, v := range nodes {
		out[i] = fakecloud.VSwitchSpec{ID: fmt.Sprintf("%s%d", podVSwitchPrefix, i+1), Name: v.Name + "-pods",
			VPCID: v.VPCID, ZoneID: v.ZoneID, CIDR: fmt.Sprintf("192.168.%d.0/24", 16+i)}
		if v.IPv6CIDR != "" {
			out[i].IPv6CIDR = fmt.Sprintf("fd00:192:168:%x::/64", 16+i)
		}
	}
	return out
}

// podVSwitchPrefix starts the IDs of the pod vSwitches (podVSwitches).
const podVSwitchPrefix = "vsw-bp1labpods00000000"

// nodeVSwitches are the world's vSwitches but the lab's pod vSwitches:
// those the lab's eni_conf names and its new nodes are placed on.
func nodeVSwitches(vsws []fakecloud.VSwitchView) []fakecloud.VSwitchView {
	return slices.DeleteFunc(slices.Clone(vsws), func(v fakecloud.VSwitchView) bool { return strings.HasPrefix(v.ID, podVSwitchPrefix) })
}

// firstRunning keeps the first n running instances of a world file; the
// others would be nodes without a kubelet.
func firstRunning(in []fakecloud.InstanceSpec, n int) []fakecloud.InstanceSpec {
	var out []fakecloud.InstanceSpec
	for _, i := range in {
		if i.Status == "" || i.Status == "Running" {
			if len(out) == n {
				continue
			}
		}
		out = append(out, i)
	}
	return out
}
