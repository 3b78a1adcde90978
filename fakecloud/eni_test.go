package fakecloud_test

import (
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

const (
	node1 = "i-bp1lab0000000000001" // ecs.g7.xlarge, zone h
	node2 = "i-bp1lab0000000000002" // ecs.g6.2xlarge, zone i
	vsw1  = "vsw-bp1lab0000000000001"
	vsw2  = "vsw-bp1lab0000000000002"
	sg    = fakecloud.DefaultSecurityGroup
)

func createENI(t *testing.T, c *ecs.Client, vsw string, mod func(*ecs.CreateNetworkInterfaceRequest)) *ecs.CreateNetworkInterfaceResponse {
	t.Helper()
	req := ecs.CreateCreateNetworkInterfaceRequest()
	req.VSwitchId = vsw
	req.SecurityGroupIds = &[]string{sg}
	if mod != nil {
		mod(req)
	}
	return try(c.CreateNetworkInterface(req)).must(t)
}

func describeENI(t *testing.T, c *ecs.Client, id string) ecs.NetworkInterfaceSet {
	t.Helper()
	req := ecs.CreateDescribeNetworkInterfacesRequest()
	req.NetworkInterfaceId = &[]string{id}
	resp := try(c.DescribeNetworkInterfaces(req)).must(t)
	if n := len(resp.NetworkInterfaceSets.NetworkInterfaceSet); n != 1 {
		t.Fatalf("describe %s: %d results", id, n)
	}
	return resp.NetworkInterfaceSets.NetworkInterfaceSet[0]
}

func waitStatus(t *testing.T, c *ecs.Client, id, want string) ecs.NetworkInterfaceSet {
	t.Helper()
	var got ecs.NetworkInterfaceSet
	testwait.Until(t, 10*time.Second, id+" "+want, func() bool {
		got = describeENI(t, c, id)
		return got.Status == want
	})
	return got
}

func TestENILifecycle(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	created := createENI(t, c, vsw1, func(r *ecs.CreateNetworkInterfaceRequest) {
		r.SecondaryPrivateIpAddressCount = requests.NewInteger(2)
		r.Tag = &[]ecs.CreateNetworkInterfaceTag{{Key: "creator", Value: "terway"}, {Key: "k8s.io/cluster", Value: "c1"}}
		r.Description = "interface create by terway"
		r.ClientToken = "tok-1"
	})
	if created.NetworkInterfaceId == "" || created.Status != "Available" || created.MacAddress == "" ||
		created.VSwitchId != vsw1 || created.ZoneId != "cn-hangzhou-h" || created.VpcId != fakecloud.DefaultVPCID ||
		created.PrivateIpAddress == "" || created.Type != "Secondary" || created.RequestId == "" {
		t.Fatalf("create response missing fields: %+v", created)
	}
	if n := len(created.PrivateIpSets.PrivateIpSet); n != 3 {
		t.Fatalf("want 3 private IPs (primary + 2), got %d", n)
	}
	if !created.PrivateIpSets.PrivateIpSet[0].Primary || created.PrivateIpSets.PrivateIpSet[1].Primary {
		t.Fatalf("primary flags wrong: %+v", created.PrivateIpSets.PrivateIpSet)
	}
	if len(created.Tags.Tag) != 2 || created.Tags.Tag[0].TagKey != "creator" || created.Tags.Tag[0].TagValue != "terway" {
		t.Fatalf("tags: %+v", created.Tags.Tag)
	}
	if len(created.SecurityGroupIds.SecurityGroupId) != 1 {
		t.Fatalf("security groups: %+v", created.SecurityGroupIds)
	}
	id := created.NetworkInterfaceId

	att := ecs.CreateAttachNetworkInterfaceRequest()
	att.NetworkInterfaceId, att.InstanceId = id, node1
	try(c.AttachNetworkInterface(att)).must(t)
	if s := describeENI(t, c, id).Status; s != "Attaching" {
		t.Fatalf("right after attach: status %s, want Attaching", s)
	}
	// Attaching is not Available: a second attach is refused.
	if _, err := c.AttachNetworkInterface(att); code(t, err) != "InvalidOperation.InvalidEniState" {
		t.Fatalf("attach while attaching: %v", err)
	}
	got := waitStatus(t, c, id, "InUse")
	if got.InstanceId != node1 || got.Attachment.InstanceId != node1 || got.Attachment.DeviceIndex != 1 {
		t.Fatalf("attachment: instance %q attachment %+v", got.InstanceId, got.Attachment)
	}
	// Deleting an attached ENI is a state error.
	del := ecs.CreateDeleteNetworkInterfaceRequest()
	del.NetworkInterfaceId = id
	if _, err := c.DeleteNetworkInterface(del); code(t, err) != "InvalidOperation.InvalidEniState" || status(t, err) != 400 {
		t.Fatalf("delete InUse: %v", err)
	}
	det := ecs.CreateDetachNetworkInterfaceRequest()
	det.NetworkInterfaceId, det.InstanceId = id, node1
	try(c.DetachNetworkInterface(det)).must(t)
	if s := describeENI(t, c, id).Status; s != "Detaching" {
		t.Fatalf("right after detach: %s", s)
	}
	waitStatus(t, c, id, "Available")
	try(c.DeleteNetworkInterface(del)).must(t)
	testwait.Until(t, 10*time.Second, "ENI gone", func() bool {
		req := ecs.CreateDescribeNetworkInterfacesRequest()
		req.NetworkInterfaceId = &[]string{id}
		return len(try(c.DescribeNetworkInterfaces(req)).must(t).NetworkInterfaceSets.NetworkInterfaceSet) == 0
	})
	if _, err := c.DeleteNetworkInterface(del); code(t, err) != "InvalidEniId.NotFound" || status(t, err) != 404 {
		t.Fatalf("delete again: %v", err)
	}
	// All three addresses went back to the vSwitch.
	for _, v := range e.cloud.VSwitches() {
		if v.ID == vsw1 && v.Available != 256-4-1 {
			t.Fatalf("vswitch available %d, want %d", v.Available, 256-4-1)
		}
	}
}
