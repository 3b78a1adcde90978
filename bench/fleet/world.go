package fleet

import (
	"fmt"
	"maps"
	"net/netip"

	"github.com/terway-sim/terway/fakecloud"
)

// The fleet's world: one VPC in 172.16.0.0/12 (room for 100,000 pods and
// more; the lab's 192.168.0.0/16 holds 65,536 addresses, too few for
// 1,000 × 100) with /18 vSwitches spread over three zones. Nothing of it
// exists outside this process.
const (
	fleetVPCCIDR   = "172.16.0.0/12"
	fleetVSwBits   = 18
	fleetVSwUsable = 1<<(32-fleetVSwBits) - 4 // first and last three are reserved
)

var fleetZones = []string{"cn-hangzhou-h", "cn-hangzhou-i", "cn-hangzhou-j"}

// fleetTypes are the instance types tried, smallest first.
var fleetTypes = []string{"ecs.g7.xlarge", "ecs.g7.2xlarge", "ecs.g7.4xlarge", "ecs.g7.32xlarge"}

// fleetInstanceType picks the smallest type whose ENIMultiIP capacity
// (secondary ENIs × addresses per ENI) holds the pods and the idle pool.
func fleetInstanceType(pods, maxPool int) (fakecloud.InstanceType, error) {
	byID := map[string]fakecloud.InstanceType{}
	for _, t := range fakecloud.DefaultInstanceTypes() {
		byID[t.InstanceTypeID] = t
	}
	for _, id := range fleetTypes {
		t := byID[id]
		if (t.EniQuantity-1)*t.EniPrivateIPAddressQuantity >= pods+maxPool {
			return t, nil
		}
	}
	return fakecloud.InstanceType{}, fmt.Errorf("fleet: no instance type holds %d pods and %d idle addresses", pods, maxPool)
}

// fleetInstanceTypeByID looks a type up in fakecloud's table.
func fleetInstanceTypeByID(id string) (fakecloud.InstanceType, error) {
	for _, t := range fakecloud.DefaultInstanceTypes() {
		if t.InstanceTypeID == id {
			return t, nil
		}
	}
	return fakecloud.InstanceType{}, fmt.Errorf("fleet: unknown instance type %q", id)
}

// fleetVSwitchCount is how many /18 vSwitches the fleet needs: each node
// may hold pods + max_pool_size + one batch of overshoot (10) + its own
// primary address, and vSwitches are filled to 80 % at most.
func fleetVSwitchCount(nodes, pods, maxPool int) int {
	perNode := pods + maxPool + 11
	perVSw := max(1, fleetVSwUsable*8/10/perNode)
	return max(len(fleetZones), (nodes+perVSw-1)/perVSw)
}

func fleetNodeID(i int) string   { return fmt.Sprintf("i-bp1fleet%012d", i+1) }
func fleetNodeName(i int) string { return fmt.Sprintf("node-%05d", i+1) }

// fleetSpec builds the world: the nodes are spread round-robin over the
// vSwitches, so over the zones too.
func fleetSpec(o Options, itype string, vsws int, settings fakecloud.Settings) (fakecloud.Spec, error) {
	vpc := netip.MustParsePrefix(fleetVPCCIDR)
	if vsws > 1<<(fleetVSwBits-vpc.Bits()) {
		return fakecloud.Spec{}, fmt.Errorf("fleet: %d vSwitches do not fit in %s", vsws, fleetVPCCIDR)
	}
	s := fakecloud.Spec{
		RegionID: fakecloud.DefaultRegion, AccountID: fakecloud.DefaultAccountID, Zones: fleetZones,
		VPCs: []fakecloud.VPCSpec{{ID: fakecloud.DefaultVPCID, Name: "fleet", CIDR: fleetVPCCIDR,
			VRouterID: fakecloud.DefaultVRouterID, RouteTableID: fakecloud.DefaultRouteTableID}},
		SecurityGroups: []fakecloud.SecurityGroupSpec{{ID: fakecloud.DefaultSecurityGroup, Name: "fleet", VPCID: fakecloud.DefaultVPCID}},
		Settings:       settings,
	}
	base := vpc.Addr().As4()
	for i := 0; i < vsws; i++ {
		off := uint32(i) << (32 - fleetVSwBits)
		a := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
		a += off
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), fleetVSwBits)
		s.VSwitches = append(s.VSwitches, fakecloud.VSwitchSpec{ID: fleetVSwitchID(i), Name: fmt.Sprintf("fleet-%d", i+1),
			VPCID: fakecloud.DefaultVPCID, ZoneID: fleetZones[i%len(fleetZones)], CIDR: p.String()})
	}
	for i := 0; i < o.Nodes; i++ {
		s.Instances = append(s.Instances, fakecloud.InstanceSpec{ID: fleetNodeID(i), Name: fleetNodeName(i), InstanceType: itype,
			VSwitchID: fleetVSwitchID(i % vsws), SecurityGroupIDs: []string{fakecloud.DefaultSecurityGroup},
			RAMRole: fakecloud.DefaultRAMRole})
	}
	return s, s.Validate()
}

// fleetSettings are fakecloud's settings for the fleet, in world time:
// the defaults, the profile's delays and the budget overrides. The
// throttle window is the simulated one; newFleet scales it.
func fleetSettings(o Options) fakecloud.Settings {
	s := fakecloud.DefaultSettings()
	o.Profile.ApplySettings(&s)
	maps.Copy(s.Throttle, o.Throttle)
	s.ThrottleWindow = fakecloud.Duration(o.ThrottleWindow)
	return s
}

func fleetVSwitchID(i int) string { return fmt.Sprintf("vsw-bp1fleet%010d", i+1) }
