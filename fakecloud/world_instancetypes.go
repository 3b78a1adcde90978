package fakecloud

import "sort"

// InstanceType holds the DescribeInstanceTypes fields that bound networking
// on an instance. Field names follow the API.
type InstanceType struct {
	InstanceTypeID              string  `json:"instanceTypeId"`
	InstanceTypeFamily          string  `json:"instanceTypeFamily"`
	CPUCoreCount                int     `json:"cpuCoreCount"`
	MemorySize                  float64 `json:"memorySize"`
	EniQuantity                 int     `json:"eniQuantity"`
	EniTotalQuantity            int     `json:"eniTotalQuantity"`
	EniPrivateIPAddressQuantity int     `json:"eniPrivateIpAddressQuantity"`
	EniIPv6AddressQuantity      int     `json:"eniIpv6AddressQuantity"`
	EniTrunkSupported           bool    `json:"eniTrunkSupported"`
	// AttachRequiresStopped marks types whose instances must be Stopped to
	// attach or detach a secondary ENI (some burstable t6 sizes).
	AttachRequiresStopped bool `json:"attachRequiresStopped,omitempty"`
	// Assumed lists the fields whose value has no public source and was
	// chosen by fakecloud; a world file can override any of them.
	Assumed []string `json:"assumed,omitempty"`
}

// MaxPodsENIMultiIP is the shared-ENI pod capacity Terway derives from a
// type: every secondary ENI's addresses, eth0 excluded.
func (t InstanceType) MaxPodsENIMultiIP() int {
	return (t.EniQuantity - 1) * t.EniPrivateIPAddressQuantity
}

// DefaultInstanceTypes returns the built-in instance-type table: the
// sourced figures of shared/reference/instance-types.md. Where the
// reference marks a cell unconfirmed the value here is assumed (and named
// in Assumed): EniTotalQuantity = EniQuantity and no trunking unless a
// captured response says otherwise, and CPU/memory of ecs.ebmre7p from its
// family's sibling ebmg7.
func DefaultInstanceTypes() []InstanceType {
	unTotalTrunk := []string{"eniTotalQuantity", "eniTrunkSupported"}
	return []InstanceType{
		{InstanceTypeID: "ecs.t6-c1m1.large", InstanceTypeFamily: "ecs.t6", CPUCoreCount: 2, MemorySize: 2, EniQuantity: 2, EniTotalQuantity: 2, EniPrivateIPAddressQuantity: 2, EniIPv6AddressQuantity: 1, AttachRequiresStopped: true, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.g6.large", InstanceTypeFamily: "ecs.g6", CPUCoreCount: 2, MemorySize: 8, EniQuantity: 2, EniTotalQuantity: 2, EniPrivateIPAddressQuantity: 6, EniIPv6AddressQuantity: 1},
		{InstanceTypeID: "ecs.g6.xlarge", InstanceTypeFamily: "ecs.g6", CPUCoreCount: 4, MemorySize: 16, EniQuantity: 3, EniTotalQuantity: 3, EniPrivateIPAddressQuantity: 10, EniIPv6AddressQuantity: 1, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.g6.2xlarge", InstanceTypeFamily: "ecs.g6", CPUCoreCount: 8, MemorySize: 32, EniQuantity: 4, EniTotalQuantity: 4, EniPrivateIPAddressQuantity: 10, EniIPv6AddressQuantity: 1, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.g7.large", InstanceTypeFamily: "ecs.g7", CPUCoreCount: 2, MemorySize: 8, EniQuantity: 3, EniTotalQuantity: 3, EniPrivateIPAddressQuantity: 6, EniIPv6AddressQuantity: 6, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.g7.xlarge", InstanceTypeFamily: "ecs.g7", CPUCoreCount: 4, MemorySize: 16, EniQuantity: 4, EniTotalQuantity: 20, EniPrivateIPAddressQuantity: 15, EniIPv6AddressQuantity: 15, EniTrunkSupported: true},
		{InstanceTypeID: "ecs.g7.2xlarge", InstanceTypeFamily: "ecs.g7", CPUCoreCount: 8, MemorySize: 32, EniQuantity: 4, EniTotalQuantity: 10, EniPrivateIPAddressQuantity: 15, EniIPv6AddressQuantity: 15, EniTrunkSupported: true},
		{InstanceTypeID: "ecs.g7.4xlarge", InstanceTypeFamily: "ecs.g7", CPUCoreCount: 16, MemorySize: 64, EniQuantity: 8, EniTotalQuantity: 8, EniPrivateIPAddressQuantity: 30, EniIPv6AddressQuantity: 30, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.g7.16xlarge", InstanceTypeFamily: "ecs.g7", CPUCoreCount: 64, MemorySize: 256, EniQuantity: 8, EniTotalQuantity: 8, EniPrivateIPAddressQuantity: 30, EniIPv6AddressQuantity: 30, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.g7.32xlarge", InstanceTypeFamily: "ecs.g7", CPUCoreCount: 128, MemorySize: 512, EniQuantity: 15, EniTotalQuantity: 15, EniPrivateIPAddressQuantity: 30, EniIPv6AddressQuantity: 30, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.c7.xlarge", InstanceTypeFamily: "ecs.c7", CPUCoreCount: 4, MemorySize: 8, EniQuantity: 4, EniTotalQuantity: 4, EniPrivateIPAddressQuantity: 15, EniIPv6AddressQuantity: 15, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.r7.2xlarge", InstanceTypeFamily: "ecs.r7", CPUCoreCount: 8, MemorySize: 64, EniQuantity: 4, EniTotalQuantity: 4, EniPrivateIPAddressQuantity: 15, EniIPv6AddressQuantity: 15, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.g8i.large", InstanceTypeFamily: "ecs.g8i", CPUCoreCount: 2, MemorySize: 8, EniQuantity: 3, EniTotalQuantity: 3, EniPrivateIPAddressQuantity: 6, EniIPv6AddressQuantity: 6, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.g8i.xlarge", InstanceTypeFamily: "ecs.g8i", CPUCoreCount: 4, MemorySize: 16, EniQuantity: 4, EniTotalQuantity: 4, EniPrivateIPAddressQuantity: 15, EniIPv6AddressQuantity: 15, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.g8i.4xlarge", InstanceTypeFamily: "ecs.g8i", CPUCoreCount: 16, MemorySize: 64, EniQuantity: 8, EniTotalQuantity: 8, EniPrivateIPAddressQuantity: 30, EniIPv6AddressQuantity: 30, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.ebmg7.32xlarge", InstanceTypeFamily: "ecs.ebmg7", CPUCoreCount: 128, MemorySize: 512, EniQuantity: 32, EniTotalQuantity: 32, EniPrivateIPAddressQuantity: 20, EniIPv6AddressQuantity: 20, Assumed: unTotalTrunk},
		{InstanceTypeID: "ecs.u1-c1m4.xlarge", InstanceTypeFamily: "ecs.u1", CPUCoreCount: 4, MemorySize: 16, EniQuantity: 3, EniTotalQuantity: 6, EniPrivateIPAddressQuantity: 10, EniIPv6AddressQuantity: 1, EniTrunkSupported: true},
		{InstanceTypeID: "ecs.ebmre7p.32xlarge", InstanceTypeFamily: "ecs.ebmre7p", CPUCoreCount: 128, MemorySize: 512, EniQuantity: 32, EniTotalQuantity: 110, EniPrivateIPAddressQuantity: 15, EniIPv6AddressQuantity: 1, EniTrunkSupported: true, Assumed: []string{"cpuCoreCount", "memorySize"}},
	}
}

// mergeInstanceTypes overlays overrides (by ID, whole entries) on base and
// returns the table sorted by ID.
func mergeInstanceTypes(base, overrides []InstanceType) []InstanceType {
	byID := map[string]InstanceType{}
	for _, t := range base {
		byID[t.InstanceTypeID] = t
	}
	for _, t := range overrides {
		byID[t.InstanceTypeID] = t
	}
	out := make([]InstanceType, 0, len(byID))
	for _, t := range byID {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceTypeID < out[j].InstanceTypeID })
	return out
}
