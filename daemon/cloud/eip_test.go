package cloud

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/terway-sim/terway/fakecloud"
)

// An EIP's whole life through the client: allocate with a ClientToken
// that survives a lost answer, tag, join a bandwidth package, bind to a
// pod's address, unbind, leave, release; every step repeated is done.
func TestEIPLifecycle(t *testing.T) {
	w := newWorld(t)
	r, err := w.node.AllocateENI(ctx(t), CreateENIRequest{IntentKey: "e", VSwitchID: vsw1, SecurityGroups: []string{sg}, SecondaryIPv4: 1})
	if err != nil {
		t.Fatal(err)
	}
	pod := r.IPv4[0]
	if _, err := w.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultLostResponse, Action: "AllocateEipAddress", Count: 1}); err != nil {
		t.Fatal(err)
	}
	e, err := w.api.AllocateEIP(ctx(t), AllocateEIPRequest{IntentKey: "eip-pod", Bandwidth: 7, Name: "terway-pod", Description: "pod default/a"})
	if err != nil {
		t.Fatal(err)
	}
	if all, _ := w.api.DescribeEIPs(ctx(t), EIPFilter{}); len(all) != 1 || all[0].ID != e.ID || all[0].Bandwidth != 7 || all[0].Name != "terway-pod" {
		t.Fatalf("EIPs after a lost answer and a retry: %+v (answer %+v)", all, e)
	}
	if err := w.api.TagEIP(ctx(t), e.ID, map[string]string{"creator": "terway", "node": node1}); err != nil {
		t.Fatal(err)
	}
	if l, err := w.api.DescribeEIPs(ctx(t), EIPFilter{Tags: map[string]string{"creator": "terway"}}); err != nil || len(l) != 1 || l[0].Tags["node"] != node1 {
		t.Fatalf("by tag: %+v %v", l, err)
	}
	pkg := fakecloud.DefaultBandwidthPackageID
	for range 2 {
		if err := w.api.AddEIPToBandwidthPackage(ctx(t), pkg, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := w.api.AssociateEIP(ctx(t), e.ID, r.ID, pod); err != nil {
			t.Fatal(err)
		}
	}
	got, err := w.api.WaitEIPStatus(ctx(t), e.ID, EIPInUse)
	if err != nil || got.InstanceID != r.ID || got.PrivateIP != pod || got.BandwidthPackageID != pkg {
		t.Fatalf("bound: %+v %v", got, err)
	}
	if l, _ := w.api.DescribeEIPs(ctx(t), EIPFilter{ENIID: r.ID}); len(l) != 1 {
		t.Fatalf("by ENI: %+v", l)
	}
	for range 2 {
		if err := w.api.UnassociateEIP(ctx(t), e.ID, r.ID, pod); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.api.WaitEIPStatus(ctx(t), e.ID, EIPAvailable); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := w.api.RemoveEIPFromBandwidthPackage(ctx(t), pkg, e.ID); err != nil {
			t.Fatal(err)
		}
		if err := w.api.ReleaseEIP(ctx(t), e.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.api.DescribeEIP(ctx(t), e.ID); !errors.Is(err, ErrEIPNotFound) {
		t.Fatalf("after release: %v", err)
	}
	if err := w.api.UnassociateEIP(ctx(t), e.ID, r.ID, pod); err != nil {
		t.Fatalf("unassociate a released EIP: %v", err)
	}
}

// An EIP bound elsewhere is not taken by AssociateEIP (that is robbing,
// which the caller decides on), and UnassociateEIP of the old binding
// leaves the new one alone.
func TestEIPBoundElsewhere(t *testing.T) {
	w := newWorld(t)
	r, err := w.node.AllocateENI(ctx(t), CreateENIRequest{IntentKey: "e", VSwitchID: vsw1, SecurityGroups: []string{sg}, SecondaryIPv4: 2})
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.IPv4[0], r.IPv4[1]
	e, err := w.api.AllocateEIP(ctx(t), AllocateEIPRequest{IntentKey: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.api.AssociateEIP(ctx(t), e.ID, r.ID, a); err != nil {
		t.Fatal(err)
	}
	if _, err := w.api.WaitEIPStatus(ctx(t), e.ID, EIPInUse); err != nil {
		t.Fatal(err)
	}
	if err := w.api.AssociateEIP(ctx(t), e.ID, r.ID, b); ErrorCode(err) != CodeIncorrectEIPStatus {
		t.Fatalf("associate an EIP bound to another address: %v", err)
	}
	if err := w.api.UnassociateEIP(ctx(t), e.ID, "eni-bp1other", netip.Addr{}); err != nil {
		t.Fatalf("unassociate from an ENI it is not bound to: %v", err)
	}
	if got, _ := w.api.DescribeEIP(ctx(t), e.ID); got.Status != EIPInUse || got.PrivateIP != a {
		t.Fatalf("the binding to %s was touched: %+v", a, got)
	}
}

// An address or ENI that a stale EIP binds (its pod's record lost) is
// unassigned and deleted all the same: the EIP is unbound first and kept.
func TestStaleEIPDoesNotBlockRelease(t *testing.T) {
	w := newWorld(t)
	r, err := w.node.AllocateENI(ctx(t), CreateENIRequest{IntentKey: "e", VSwitchID: vsw1, SecurityGroups: []string{sg}, SecondaryIPv4: 2})
	if err != nil {
		t.Fatal(err)
	}
	bind := func(key string, ip netip.Addr) EIP {
		e, err := w.api.AllocateEIP(ctx(t), AllocateEIPRequest{IntentKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.api.AssociateEIP(ctx(t), e.ID, r.ID, ip); err != nil {
			t.Fatal(err)
		}
		if _, err := w.api.WaitEIPStatus(ctx(t), e.ID, EIPInUse); err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := bind("a", r.IPv4[0])
	b := bind("b", r.IPv4[1])
	if err := w.api.UnassignIPv4(ctx(t), r.ID, r.IPv4[:1]); err != nil {
		t.Fatalf("unassign an address a stale EIP binds: %v", err)
	}
	if got, _ := w.api.DescribeEIP(ctx(t), a.ID); got.InstanceID != "" {
		t.Fatalf("EIP %s after the unassign: %+v", a.ID, got)
	}
	if got, _ := w.api.DescribeEIP(ctx(t), b.ID); got.Status != EIPInUse {
		t.Fatalf("the other address's EIP was touched: %+v", got)
	}
	if err := w.node.ReleaseENI(ctx(t), r.ID); err != nil {
		t.Fatalf("release an ENI a stale EIP binds: %v", err)
	}
	if l, _ := w.api.DescribeEIPs(ctx(t), EIPFilter{}); len(l) != 2 {
		t.Fatalf("EIPs after the ENI went: %+v, want both kept", l)
	}
}

// UnassociateEIP of one address of an ENI leaves the EIP alone when it
// binds another address of that ENI now (a pod on the node took it).
func TestEIPUnassociateChecksTheAddress(t *testing.T) {
	w := newWorld(t)
	r, err := w.node.AllocateENI(ctx(t), CreateENIRequest{IntentKey: "e", VSwitchID: vsw1, SecurityGroups: []string{sg}, SecondaryIPv4: 2})
	if err != nil {
		t.Fatal(err)
	}
	e, err := w.api.AllocateEIP(ctx(t), AllocateEIPRequest{IntentKey: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.api.AssociateEIP(ctx(t), e.ID, r.ID, r.IPv4[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.api.WaitEIPStatus(ctx(t), e.ID, EIPInUse); err != nil {
		t.Fatal(err)
	}
	if err := w.api.UnassociateEIP(ctx(t), e.ID, r.ID, r.IPv4[0]); err != nil {
		t.Fatalf("unassociate from the other address: %v", err)
	}
	if got, _ := w.api.DescribeEIP(ctx(t), e.ID); got.Status != EIPInUse || got.PrivateIP != r.IPv4[1] {
		t.Fatalf("the binding to %s was touched: %+v", r.IPv4[1], got)
	}
}
