package fakecloud

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
