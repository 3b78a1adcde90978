package fakecloud_test

import (
	"net/netip"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
)

func assignIPs(c *ecs.Client, eni string, n int) (*ecs.AssignPrivateIpAddressesResponse, error) {
	req := ecs.CreateAssignPrivateIpAddressesRequest()
	req.NetworkInterfaceId = eni
	req.SecondaryPrivateIpAddressCount = requests.NewInteger(n)
	return c.AssignPrivateIpAddresses(req)
}

func unassignIPs(c *ecs.Client, eni string, ips ...string) (*ecs.UnassignPrivateIpAddressesResponse, error) {
	req := ecs.CreateUnassignPrivateIpAddressesRequest()
	req.NetworkInterfaceId = eni
	req.PrivateIpAddress = &ips
	return c.UnassignPrivateIpAddresses(req)
}

// attachedENI creates an ENI on vsw and attaches it to inst.
func attachedENI(t *testing.T, c *ecs.Client, vsw, inst string) string {
	t.Helper()
	id := createENI(t, c, vsw, nil).NetworkInterfaceId
	att := ecs.CreateAttachNetworkInterfaceRequest()
	att.NetworkInterfaceId, att.InstanceId = id, inst
	try(c.AttachNetworkInterface(att)).must(t)
	waitStatus(t, c, id, "InUse")
	return id
}

func TestAssignUnassignIPv4(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	id := attachedENI(t, c, vsw1, node1) // g7.xlarge: 15 addresses per ENI
	var all []string
	for i := 0; i < 4; i++ {
		n := 4
		if i == 3 {
			n = 2
		}
		resp := try(assignIPs(c, id, n)).must(t)
		got := resp.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress
		if len(got) != n || resp.AssignedPrivateIpAddressesSet.NetworkInterfaceId != id {
			t.Fatalf("assign %d: got %v for %s", n, got, resp.AssignedPrivateIpAddressesSet.NetworkInterfaceId)
		}
		for _, s := range got {
			a := netip.MustParseAddr(s)
			if !netip.MustParsePrefix("192.168.0.0/24").Contains(a) || a.As4()[3] == 0 || a.As4()[3] >= 253 {
				t.Fatalf("address %s outside the vSwitch or reserved", a)
			}
		}
		all = append(all, got...)
	}
	// 1 primary + 14 secondaries = 15, the type's limit: one more fails.
	if _, err := assignIPs(c, id, 1); code(t, err) != "InvalidOperation.Ipv4CountExceeded" || status(t, err) != 403 {
		t.Fatalf("16th address: %v", err)
	}
	if _, err := assignIPs(c, id, 11); code(t, err) != "InvalidParameter" {
		t.Fatalf("11 in one call: %v", err)
	}
	d := describeENI(t, c, id)
	if n := len(d.PrivateIpSets.PrivateIpSet); n != 15 {
		t.Fatalf("describe lists %d addresses, want 15", n)
	}
	try(unassignIPs(c, id, all[0], all[1])).must(t)
	if n := len(describeENI(t, c, id).PrivateIpSets.PrivateIpSet); n != 13 {
		t.Fatalf("after unassign: %d addresses, want 13", n)
	}
	if _, err := unassignIPs(c, id, all[0]); code(t, err) != "InvalidIp.IpUnassigned" || status(t, err) != 403 {
		t.Fatalf("unassign twice: %v", err)
	}
	if _, err := unassignIPs(c, id, d.PrivateIpAddress); code(t, err) != "InvalidIp.IpUnassigned" {
		t.Fatalf("unassign the primary: %v", err)
	}
	// Explicit addresses: a free one works, a taken one and one outside
	// the vSwitch do not, duplicates are refused.
	req := ecs.CreateAssignPrivateIpAddressesRequest()
	req.NetworkInterfaceId = id
	req.PrivateIpAddress = &[]string{all[0]}
	if got := try(c.AssignPrivateIpAddresses(req)).must(t).AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress; len(got) != 1 || got[0] != all[0] {
		t.Fatalf("explicit assign: %v", got)
	}
	req.PrivateIpAddress = &[]string{all[2]}
	if _, err := c.AssignPrivateIpAddresses(req); code(t, err) != "InvalidIp.IpAssigned" {
		t.Fatalf("taken address: %v", err)
	}
	req.PrivateIpAddress = &[]string{"10.9.9.9"}
	if _, err := c.AssignPrivateIpAddresses(req); code(t, err) != "InvalidVSwitchId.IpInvalid" {
		t.Fatalf("foreign address: %v", err)
	}
	req.PrivateIpAddress = &[]string{"192.168.0.253"}
	if _, err := c.AssignPrivateIpAddresses(req); code(t, err) != "InvalidVSwitchId.IpInvalid" {
		t.Fatalf("gateway address: %v", err)
	}
	req.PrivateIpAddress = &[]string{all[1], all[1]}
	if _, err := c.AssignPrivateIpAddresses(req); code(t, err) != "InvalidPrivateIpAddress.Duplicated" {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestAvailableENIHoldsTenSecondaries(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	id := createENI(t, c, vsw1, nil).NetworkInterfaceId
	try(assignIPs(c, id, 10)).must(t)
	if _, err := assignIPs(c, id, 1); code(t, err) != "InvalidOperation.Ipv4CountExceeded" {
		t.Fatalf("11th secondary on an Available ENI: %v", err)
	}
}

func TestIPv6(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	id := attachedENI(t, c, vsw1, node1)
	req := ecs.CreateAssignIpv6AddressesRequest()
	req.NetworkInterfaceId = id
	req.Ipv6AddressCount = requests.NewInteger(3)
	resp := try(c.AssignIpv6Addresses(req)).must(t)
	if len(resp.Ipv6Sets.Ipv6Address) != 3 || resp.NetworkInterfaceId != id {
		t.Fatalf("assign v6: %+v", resp)
	}
	for _, s := range resp.Ipv6Sets.Ipv6Address {
		if !netip.MustParsePrefix("fd00:192:168::/64").Contains(netip.MustParseAddr(s)) {
			t.Fatalf("%s outside the vSwitch /64", s)
		}
	}
	if n := len(describeENI(t, c, id).Ipv6Sets.Ipv6Set); n != 3 {
		t.Fatalf("describe shows %d IPv6", n)
	}
	un := ecs.CreateUnassignIpv6AddressesRequest()
	un.NetworkInterfaceId = id
	un.Ipv6Address = &[]string{resp.Ipv6Sets.Ipv6Address[0]}
	try(c.UnassignIpv6Addresses(un)).must(t)
	if _, err := c.UnassignIpv6Addresses(un); code(t, err) != "InvalidIp.IpUnassigned" {
		t.Fatalf("unassign v6 twice: %v", err)
	}
	req.Ipv6AddressCount = requests.NewInteger(10)
	try(c.AssignIpv6Addresses(req)).must(t) // 12 of 15
	req.Ipv6AddressCount = requests.NewInteger(4)
	if _, err := c.AssignIpv6Addresses(req); code(t, err) != "InvalidOperation.Ipv6CountExceeded" {
		t.Fatalf("16th IPv6: %v", err)
	}
}
