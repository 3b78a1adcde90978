package fakecloud_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"
)

// field follows a dotted path of exported Go field names through v; "[0]"
// steps into the first element of a slice.
func field(t *testing.T, v any, path string) reflect.Value {
	t.Helper()
	x := reflect.ValueOf(v)
	for _, part := range strings.Split(path, ".") {
		for x.Kind() == reflect.Pointer {
			x = x.Elem()
		}
		idx := strings.HasSuffix(part, "[0]")
		x = x.FieldByName(strings.TrimSuffix(part, "[0]"))
		if !x.IsValid() {
			t.Fatalf("%T has no field path %s", v, path)
		}
		if idx {
			if x.Len() == 0 {
				t.Fatalf("%T.%s: empty list", v, path)
			}
			x = x.Index(0)
		}
	}
	return x
}

// requireFilled checks that every path Terway reads is set (non-zero).
func requireFilled(t *testing.T, v any, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if f := field(t, v, p); f.IsZero() {
			t.Errorf("%T.%s is empty", v, p)
		}
	}
}

// TestTerwayFieldsFilled decodes each action's answer into the SDK's own
// response type and checks the fields Terway reads (terway-facts.md §2.2).
func TestTerwayFieldsFilled(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	created := createENI(t, c, vsw1, func(r *ecs.CreateNetworkInterfaceRequest) {
		r.SecondaryPrivateIpAddressCount = requests.NewInteger(1)
		r.Ipv6AddressCount = requests.NewInteger(1)
		r.Tag = &[]ecs.CreateNetworkInterfaceTag{{Key: "creator", Value: "terway"}}
		r.ResourceGroupId = "rg-1"
		r.InstanceType = "Secondary"
		r.NetworkInterfaceName = "eni-cni-abcdef"
	})
	requireFilled(t, created, "RequestId", "NetworkInterfaceId", "Status", "MacAddress", "VSwitchId", "ZoneId", "VpcId",
		"PrivateIpAddress", "PrivateIpSets.PrivateIpSet[0].PrivateIpAddress", "PrivateIpSets.PrivateIpSet[0].Primary",
		"Ipv6Sets.Ipv6Set[0].Ipv6Address", "SecurityGroupIds.SecurityGroupId[0]", "Tags.Tag[0].TagKey", "Tags.Tag[0].TagValue",
		"Type", "ResourceGroupId", "NetworkInterfaceName", "OwnerId")
	id := created.NetworkInterfaceId
	att := ecs.CreateAttachNetworkInterfaceRequest()
	att.NetworkInterfaceId, att.InstanceId = id, node1
	requireFilled(t, try(c.AttachNetworkInterface(att)).must(t), "RequestId")
	d := waitStatus(t, c, id, "InUse")
	requireFilled(t, d, "NetworkInterfaceId", "Status", "Type", "MacAddress", "VSwitchId", "ZoneId", "PrivateIpAddress",
		"PrivateIpSets.PrivateIpSet[0].PrivateIpAddress", "Ipv6Sets.Ipv6Set[0].Ipv6Address", "SecurityGroupIds.SecurityGroupId[0]",
		"Tags.Tag[0].TagKey", "InstanceId", "Attachment.InstanceId", "Attachment.DeviceIndex", "NetworkInterfaceTrafficMode",
		"CreationTime", "VpcId")
	ar := ecs.CreateDescribeNetworkInterfaceAttributeRequest()
	ar.NetworkInterfaceId, ar.Attribute = id, "basic"
	requireFilled(t, try(c.DescribeNetworkInterfaceAttribute(ar)).must(t), "RequestId", "NetworkInterfaceId", "Status", "Type",
		"MacAddress", "VSwitchId", "ZoneId", "PrivateIpAddress", "PrivateIpSets.PrivateIpSet[0].PrivateIpAddress",
		"SecurityGroupIds.SecurityGroupId[0]", "Tags.Tag[0].TagKey", "InstanceId", "Attachment.InstanceId", "Attachment.DeviceIndex")
	requireFilled(t, try(assignIPs(c, id, 2)).must(t), "RequestId", "AssignedPrivateIpAddressesSet.NetworkInterfaceId",
		"AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress[0]")
	a6 := ecs.CreateAssignIpv6AddressesRequest()
	a6.NetworkInterfaceId, a6.Ipv6AddressCount = id, requests.NewInteger(1)
	requireFilled(t, try(c.AssignIpv6Addresses(a6)).must(t), "RequestId", "NetworkInterfaceId", "Ipv6Sets.Ipv6Address[0]")
	it := ecs.CreateDescribeInstanceTypesRequest()
	it.InstanceTypes = &[]string{"ecs.g7.xlarge"}
	requireFilled(t, try(c.DescribeInstanceTypes(it)).must(t), "RequestId", "InstanceTypes.InstanceType[0].InstanceTypeId",
		"InstanceTypes.InstanceType[0].EniQuantity", "InstanceTypes.InstanceType[0].EniPrivateIpAddressQuantity",
		"InstanceTypes.InstanceType[0].EniIpv6AddressQuantity", "InstanceTypes.InstanceType[0].EniTotalQuantity",
		"InstanceTypes.InstanceType[0].EniTrunkSupported", "InstanceTypes.InstanceType[0].NetworkCardQuantity")
	di := ecs.CreateDescribeInstancesRequest()
	di.InstanceIds = `["` + node1 + `"]`
	requireFilled(t, try(c.DescribeInstances(di)).must(t), "RequestId", "Instances.Instance[0].SecurityGroupIds.SecurityGroupId[0]",
		"Instances.Instance[0].InstanceType", "Instances.Instance[0].ZoneId")
	ia := ecs.CreateDescribeInstanceAttributeRequest()
	ia.InstanceId = node1
	requireFilled(t, try(c.DescribeInstanceAttribute(ia)).must(t), "RequestId", "SecurityGroupIds.SecurityGroupId[0]",
		"InstanceType", "VpcAttributes.VSwitchId")
	v := e.vpc()
	vs := vpc.CreateDescribeVSwitchesRequest()
	vs.VSwitchId = vsw1
	requireFilled(t, try(v.DescribeVSwitches(vs)).must(t), "RequestId", "VSwitches.VSwitch[0].AvailableIpAddressCount",
		"VSwitches.VSwitch[0].ZoneId", "VSwitches.VSwitch[0].CidrBlock", "VSwitches.VSwitch[0].Ipv6CidrBlock",
		"VSwitches.VSwitch[0].VSwitchId", "VSwitches.VSwitch[0].VpcId")
	al := try(v.AllocateEipAddress(vpc.CreateAllocateEipAddressRequest())).must(t)
	requireFilled(t, al, "RequestId", "AllocationId", "EipAddress")
	as := vpc.CreateAssociateEipAddressRequest()
	as.AllocationId, as.InstanceId, as.InstanceType = al.AllocationId, id, "NetworkInterface"
	try(v.AssociateEipAddress(as)).must(t)
	de := vpc.CreateDescribeEipAddressesRequest()
	de.AllocationId = al.AllocationId
	requireFilled(t, try(v.DescribeEipAddresses(de)).must(t), "RequestId", "EipAddresses.EipAddress[0].AllocationId",
		"EipAddresses.EipAddress[0].IpAddress", "EipAddresses.EipAddress[0].PrivateIpAddress",
		"EipAddresses.EipAddress[0].InstanceId", "EipAddresses.EipAddress[0].Status")
}
