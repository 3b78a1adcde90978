package fakecloud_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/fakecloud"
)

// eniWithEIP is an ENI on node1 with two secondary addresses and an EIP
// associated (InUse) with the second.
func eniWithEIP(t *testing.T, e *env) (eniID, secondary string, alloc *vpc.AllocateEipAddressResponse) {
	t.Helper()
	c, ec := e.vpc(), e.ecs()
	eni := createENI(t, ec, vsw1, func(r *ecs.CreateNetworkInterfaceRequest) {
		r.SecondaryPrivateIpAddressCount = requests.NewInteger(2)
	})
	att := ecs.CreateAttachNetworkInterfaceRequest()
	att.NetworkInterfaceId, att.InstanceId = eni.NetworkInterfaceId, node1
	try(ec.AttachNetworkInterface(att)).must(t)
	waitStatus(t, ec, eni.NetworkInterfaceId, "InUse")
	secondary = eni.PrivateIpSets.PrivateIpSet[2].PrivateIpAddress
	alloc = allocateEIP(t, c)
	if err := associateEIP(c, alloc.AllocationId, "NetworkInterface", eni.NetworkInterfaceId, secondary); err != nil {
		t.Fatalf("associate: %v", err)
	}
	waitEIP(t, c, alloc.AllocationId, "InUse")
	return eni.NetworkInterfaceId, secondary, alloc
}

// The hypervisor learns which EIPs forward: when one becomes InUse, and at
// once when its unassociation starts.
func TestEipHypervisorEvents(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.Hypervisor = rec }), withSettings(slowEIPs))
	_, secondary, alloc := eniWithEIP(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lastEIPs := func() string {
		if err := e.cloud.WaitHypervisor(ctx); err != nil {
			t.Fatal(err)
		}
		log := rec.log()
		for i := len(log) - 1; i >= 0; i-- {
			if strings.HasPrefix(log[i], "eips ") {
				return log[i]
			}
		}
		return ""
	}
	if got, want := lastEIPs(), "eips ["+alloc.EipAddress+"="+secondary+"]"; got != want {
		t.Fatalf("after association: %q, want %q", got, want)
	}
	un := vpc.CreateUnassociateEipAddressRequest()
	un.AllocationId, un.InstanceId, un.InstanceType = alloc.AllocationId, describeEIPOrFail(t, e, alloc.AllocationId).InstanceId, "NetworkInterface"
	try(e.vpc().UnassociateEipAddress(un)).must(t)
	if got, _ := describeEIP(t, e.vpc(), alloc.AllocationId); got.Status != "Unassociating" {
		t.Fatalf("right after unassociate: %s", got.Status)
	}
	if got := lastEIPs(); got != "eips []" {
		t.Fatalf("while unassociating: %q, want no EIP forwarding", got)
	}
}

func describeEIPOrFail(t *testing.T, e *env, id string) vpc.EipAddress {
	t.Helper()
	got, ok := describeEIP(t, e.vpc(), id)
	if !ok {
		t.Fatalf("no EIP %s", id)
	}
	return got
}

// An address with an EIP cannot be unassigned, nor its ENI deleted, until
// the EIP is unassociated (fakecloud/README.md: the references are silent;
// refused with InvalidOperation).
func TestEipBlocksUnassignAndDelete(t *testing.T) {
	e := newEnv(t)
	ec, c := e.ecs(), e.vpc()
	eniID, secondary, alloc := eniWithEIP(t, e)
	if _, err := unassignIPs(ec, eniID, secondary); code(t, err) != fakecloud.CodeInvalidOperation || !strings.Contains(err.Error(), alloc.AllocationId) {
		t.Fatalf("unassign an address with an EIP: %v", err)
	}
	det := ecs.CreateDetachNetworkInterfaceRequest()
	det.NetworkInterfaceId, det.InstanceId = eniID, node1
	try(ec.DetachNetworkInterface(det)).must(t)
	waitStatus(t, ec, eniID, "Available")
	del := ecs.CreateDeleteNetworkInterfaceRequest()
	del.NetworkInterfaceId = eniID
	if _, err := ec.DeleteNetworkInterface(del); code(t, err) != fakecloud.CodeInvalidOperation {
		t.Fatalf("delete an ENI with an EIP: %v", err)
	}
	un := vpc.CreateUnassociateEipAddressRequest()
	un.AllocationId, un.InstanceId, un.InstanceType = alloc.AllocationId, eniID, "NetworkInterface"
	try(c.UnassociateEipAddress(un)).must(t)
	waitEIP(t, c, alloc.AllocationId, "Available")
	try(unassignIPs(ec, eniID, secondary)).must(t)
	try(ec.DeleteNetworkInterface(del)).must(t)
}

// Internet Shared Bandwidth: an EIP joins and leaves; a wrong package,
// another line, a second package, leaving one it is not in and releasing
// one still in it are refused.
func TestEipCommonBandwidthPackage(t *testing.T) {
	e := newEnv(t)
	c := e.vpc()
	alloc := allocateEIP(t, c)
	add := func(pkg, id string) error {
		r := vpc.CreateAddCommonBandwidthPackageIpRequest()
		r.BandwidthPackageId, r.IpInstanceId = pkg, id
		_, err := c.AddCommonBandwidthPackageIp(r)
		return err
	}
	remove := func(pkg, id string) error {
		r := vpc.CreateRemoveCommonBandwidthPackageIpRequest()
		r.BandwidthPackageId, r.IpInstanceId = pkg, id
		_, err := c.RemoveCommonBandwidthPackageIp(r)
		return err
	}
	pkg := fakecloud.DefaultBandwidthPackageID
	if err := add("cbwp-nosuch", alloc.AllocationId); code(t, err) != fakecloud.CodeBandwidthPackageNotFound || status(t, err) != 404 {
		t.Fatalf("unknown package: %v", err)
	}
	if err := add(pkg, "eip-nosuch"); code(t, err) != fakecloud.CodeAllocationNotFound {
		t.Fatalf("unknown EIP: %v", err)
	}
	if err := remove(pkg, alloc.AllocationId); code(t, err) != fakecloud.CodeIPNotInCbwp {
		t.Fatalf("remove an EIP not in it: %v", err)
	}
	if err := add(pkg, alloc.AllocationId); err != nil {
		t.Fatalf("add: %v", err)
	}
	if err := add(pkg, alloc.AllocationId); err != nil {
		t.Fatalf("add again: %v", err)
	}
	got := describeEIPOrFail(t, e, alloc.AllocationId)
	if got.BandwidthPackageId != pkg || got.BandwidthPackageType != "CommonBandwidthPackage" {
		t.Fatalf("in the package: %+v", got)
	}
	rel := vpc.CreateReleaseEipAddressRequest()
	rel.AllocationId = alloc.AllocationId
	if _, err := c.ReleaseEipAddress(rel); code(t, err) != fakecloud.CodeInvalidOperation {
		t.Fatalf("release while in a package: %v", err)
	}
	if err := remove(pkg, alloc.AllocationId); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if got := describeEIPOrFail(t, e, alloc.AllocationId); got.BandwidthPackageId != "" {
		t.Fatalf("after remove: %+v", got)
	}
	try(c.ReleaseEipAddress(rel)).must(t)

	other := vpc.CreateAllocateEipAddressRequest()
	other.ISP = "BGP_PRO"
	o := try(c.AllocateEipAddress(other)).must(t)
	if err := add(pkg, o.AllocationId); code(t, err) != fakecloud.CodeInvalidOperation {
		t.Fatalf("an EIP of another line: %v", err)
	}
}

// EIPs are tagged through VPC's TagResources and found by tag; ECS's
// TagResources does not know them.
func TestEipTags(t *testing.T) {
	e := newEnv(t)
	c := e.vpc()
	a, b := allocateEIP(t, c), allocateEIP(t, c)
	tag := vpc.CreateTagResourcesRequest()
	tag.ResourceType, tag.ResourceId = "EIP", &[]string{a.AllocationId}
	tag.Tag = &[]vpc.TagResourcesTag{{Key: "creator", Value: "terway"}, {Key: "node", Value: "node-1"}}
	try(c.TagResources(tag)).must(t)
	et := ecs.CreateTagResourcesRequest()
	et.ResourceType, et.ResourceId = "eip", &[]string{b.AllocationId}
	et.Tag = &[]ecs.TagResourcesTag{{Key: "creator", Value: "terway"}}
	if _, err := e.ecs().TagResources(et); code(t, err) != fakecloud.CodeResourceTypeNotFound {
		t.Fatalf("ECS TagResources of an EIP: %v", err)
	}
	req := vpc.CreateDescribeEipAddressesRequest()
	req.Tag = &[]vpc.DescribeEipAddressesTag{{Key: "creator", Value: "terway"}}
	resp := try(c.DescribeEipAddresses(req)).must(t)
	var ids []string
	for _, x := range resp.EipAddresses.EipAddress {
		ids = append(ids, x.AllocationId)
		var kv []string
		for _, tg := range x.Tags.Tag {
			kv = append(kv, tg.Key+"="+tg.Value)
		}
		if !slices.Contains(kv, "node=node-1") {
			t.Errorf("tags of %s: %v", x.AllocationId, kv)
		}
	}
	if !slices.Equal(ids, []string{a.AllocationId}) {
		t.Fatalf("by tag: %v, want only %s", ids, a.AllocationId)
	}
}
