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
	handler func(c *Cloud, x *call) (response, error)
	// target names the parameter identifying the resource the action
	// changes; overlapping calls on one resource get Operation.Conflict.
	target string
}

// actions is the static table of actions by version and name.
var actions = func() map[string]map[string]*action {
	m := map[string]map[string]*action{ECSVersion: {}, VPCVersion: {}}
	for _, a := range append(ecsActions(), vpcActions()...) {
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

// ecsActions lists the ECS actions fakecloud implements.
func ecsActions() []*action {
	e := func(name string, h func(*Cloud, *call) (response, error), target string) *action {
		return &action{product: productECS, name: name, handler: h, target: target}
	}
	return []*action{
		e("CreateNetworkInterface", (*Cloud).createNetworkInterface, ""),
		e("AttachNetworkInterface", (*Cloud).attachNetworkInterface, "NetworkInterfaceId"),
		e("DetachNetworkInterface", (*Cloud).detachNetworkInterface, "NetworkInterfaceId"),
		e("DeleteNetworkInterface", (*Cloud).deleteNetworkInterface, "NetworkInterfaceId"),
		e("ModifyNetworkInterfaceAttribute", (*Cloud).modifyNetworkInterfaceAttribute, "NetworkInterfaceId"),
		e("DescribeNetworkInterfaces", (*Cloud).describeNetworkInterfaces, ""),
		e("DescribeNetworkInterfaceAttribute", (*Cloud).describeNetworkInterfaceAttribute, ""),
		e("AssignPrivateIpAddresses", (*Cloud).assignPrivateIPAddresses, "NetworkInterfaceId"),
		e("UnassignPrivateIpAddresses", (*Cloud).unassignPrivateIPAddresses, "NetworkInterfaceId"),
		e("AssignIpv6Addresses", (*Cloud).assignIPv6Addresses, "NetworkInterfaceId"),
		e("UnassignIpv6Addresses", (*Cloud).unassignIPv6Addresses, "NetworkInterfaceId"),
		e("DescribeInstanceTypes", (*Cloud).describeInstanceTypes, ""),
		e("DescribeInstances", (*Cloud).describeInstances, ""),
		e("DescribeInstanceAttribute", (*Cloud).describeInstanceAttribute, ""),
		e("TagResources", (*Cloud).tagResources, ""),
	}
}

// vpcActions lists the VPC actions fakecloud implements.
func vpcActions() []*action {
	v := func(name string, h func(*Cloud, *call) (response, error), target string) *action {
		return &action{product: productVPC, name: name, handler: h, target: target}
	}
	return []*action{
		v("DescribeVSwitches", (*Cloud).describeVSwitches, ""),
		v("DescribeVSwitchAttributes", (*Cloud).describeVSwitchAttributes, ""),
		v("DescribeVpcs", (*Cloud).describeVpcs, ""),
		v("DescribeRouteTableList", (*Cloud).describeRouteTableList, ""),
		v("CreateRouteEntry", (*Cloud).createRouteEntry, ""),
		v("DeleteRouteEntry", (*Cloud).deleteRouteEntry, ""),
		v("DescribeRouteEntryList", (*Cloud).describeRouteEntryList, ""),
		v("AllocateEipAddress", (*Cloud).allocateEipAddress, ""),
		v("AssociateEipAddress", (*Cloud).associateEipAddress, "AllocationId"),
		v("UnassociateEipAddress", (*Cloud).unassociateEipAddress, "AllocationId"),
		v("ReleaseEipAddress", (*Cloud).releaseEipAddress, "AllocationId"),
		v("DescribeEipAddresses", (*Cloud).describeEipAddresses, ""),
	}
}
