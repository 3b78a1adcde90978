package fakecloud

import "sort"

// API versions of the two products fakecloud serves.
const (
	ECSVersion = "2014-05-26"
	VPCVersion = "2016-04-28"
)

// product is an OpenAPI product as the gateway names it.
type product struct {
	name    string // "Ecs", "Vpc": as in the Recommend link
	version string
}

var (
	productECS = &product{name: "Ecs", version: ECSVersion}
	productVPC = &product{name: "Vpc", version: VPCVersion}
)

// action is one API action.
type action struct {
	product *product
	name    string
	handler handler
	// target names the parameter identifying the resource the action
	// changes; overlapping calls on one resource get Operation.Conflict.
	target string
}

// actions is the static table of actions by version and name.
var actions = func() map[string]map[string]*action {
	m := map[string]map[string]*action{ECSVersion: {}, VPCVersion: {}}
	for _, a := range allActions() {
		m[a.product.version][a.name] = a
	}
	return m
}()

// Actions lists the supported actions as "Product:Action".
func Actions() []string {
	var out []string
	for _, byName := range actions {
		for _, a := range byName {
			out = append(out, a.product.name+":"+a.name)
		}
	}
	sort.Strings(out)
	return out
}

// handler serves one action: it decodes the call's request, makes one
// call to the world and renders the answer.
type handler func(c *Cloud, x *call) (response, error)

// allActions lists the actions fakecloud implements. The third column is
// the action's target (see action).
func allActions() []*action {
	ecs, vpc := productECS.action, productVPC.action
	return []*action{
		ecs("CreateNetworkInterface", (*Cloud).createNetworkInterface, ""),
		ecs("AttachNetworkInterface", (*Cloud).attachNetworkInterface, "NetworkInterfaceId"),
		ecs("DetachNetworkInterface", (*Cloud).detachNetworkInterface, "NetworkInterfaceId"),
		ecs("DeleteNetworkInterface", (*Cloud).deleteNetworkInterface, "NetworkInterfaceId"),
		ecs("ModifyNetworkInterfaceAttribute", (*Cloud).modifyNetworkInterfaceAttribute, "NetworkInterfaceId"),
		ecs("DescribeNetworkInterfaces", (*Cloud).describeNetworkInterfaces, ""),
		ecs("DescribeNetworkInterfaceAttribute", (*Cloud).describeNetworkInterfaceAttribute, ""),
		ecs("AssignPrivateIpAddresses", (*Cloud).assignPrivateIPAddresses, "NetworkInterfaceId"),
		ecs("UnassignPrivateIpAddresses", (*Cloud).unassignPrivateIPAddresses, "NetworkInterfaceId"),
		ecs("AssignIpv6Addresses", (*Cloud).assignIPv6Addresses, "NetworkInterfaceId"),
		ecs("UnassignIpv6Addresses", (*Cloud).unassignIPv6Addresses, "NetworkInterfaceId"),
		ecs("DescribeInstanceTypes", (*Cloud).describeInstanceTypes, ""),
		ecs("DescribeInstances", (*Cloud).describeInstances, ""),
		ecs("DescribeInstanceAttribute", (*Cloud).describeInstanceAttribute, ""),
		ecs("TagResources", (*Cloud).tagResources, ""),
		vpc("DescribeVSwitches", (*Cloud).describeVSwitches, ""),
		vpc("DescribeVSwitchAttributes", (*Cloud).describeVSwitchAttributes, ""),
		vpc("DescribeVpcs", (*Cloud).describeVpcs, ""),
		vpc("DescribeRouteTableList", (*Cloud).describeRouteTableList, ""),
		vpc("CreateRouteEntry", (*Cloud).createRouteEntry, ""),
		vpc("DeleteRouteEntry", (*Cloud).deleteRouteEntry, ""),
		vpc("DescribeRouteEntryList", (*Cloud).describeRouteEntryList, ""),
		vpc("AllocateEipAddress", (*Cloud).allocateEipAddress, ""),
		vpc("AssociateEipAddress", (*Cloud).associateEipAddress, "AllocationId"),
		vpc("UnassociateEipAddress", (*Cloud).unassociateEipAddress, "AllocationId"),
		vpc("ReleaseEipAddress", (*Cloud).releaseEipAddress, "AllocationId"),
		vpc("DescribeEipAddresses", (*Cloud).describeEipAddresses, ""),
		vpc("TagResources", (*Cloud).tagVPCResources, ""),
		vpc("AddCommonBandwidthPackageIp", (*Cloud).addCommonBandwidthPackageIP, "IpInstanceId"),
		vpc("RemoveCommonBandwidthPackageIp", (*Cloud).removeCommonBandwidthPackageIP, "IpInstanceId"),
	}
}

// action builds an action of p.
func (p *product) action(name string, h handler, target string) *action {
	return &action{product: p, name: name, handler: h, target: target}
}
