package fakecloud_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
)

// vswitchCounts returns the free and drained counts the admin API shows
// for vsw1.
func vswitchCounts(t *testing.T, e *env) (free, drained int) {
	t.Helper()
	w, err := e.admin().World(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range w.VSwitches {
		if v.ID == vsw1 {
			return v.Available, v.Drained
		}
	}
	t.Fatalf("no %s in the world", vsw1)
	return 0, 0
}

// TestVSwitchDrainAndRefill drains a vSwitch through the admin client,
// as a chaos plan exhausts one, and checks what the SDK sees.
func TestVSwitchDrainAndRefill(t *testing.T) {
	e := newEnv(t)
	a, ctx, c, vc := e.admin(), context.Background(), e.ecs(), e.vpc()
	free0, _ := vswitchCounts(t, e)
	if err := a.DrainVSwitch(ctx, vsw1, 2); err != nil {
		t.Fatal(err)
	}
	if free, drained := vswitchCounts(t, e); free != 2 || drained != free0-2 {
		t.Fatalf("after drain leaving 2: %d free, %d drained; want 2 and %d", free, drained, free0-2)
	}
	if n := describeVSwitch(t, vc, vsw1).AvailableIpAddressCount; n != 2 {
		t.Fatalf("DescribeVSwitches: %d available, want 2", n)
	}
	withSecondaries := func(n int) *ecs.CreateNetworkInterfaceRequest {
		r := ecs.CreateCreateNetworkInterfaceRequest()
		r.VSwitchId, r.SecurityGroupId = vsw1, sg
		r.SecondaryPrivateIpAddressCount = requests.NewInteger(n)
		return r
	}
	if _, err := c.CreateNetworkInterface(withSecondaries(2)); code(t, err) != "InvalidVSwitchId.IpNotEnough" {
		t.Fatalf("3 addresses from 2 free: %v", err)
	}
	eni := try(c.CreateNetworkInterface(withSecondaries(1))).must(t).NetworkInterfaceId
	if _, err := assignIPs(c, eni, 1); code(t, err) != "InvalidVSwitchId.IpNotEnough" {
		t.Fatalf("assign on a drained vSwitch: %v", err)
	}
	// An address an ENI gives back while drained is free as usual.
	secondary := describeENI(t, c, eni).PrivateIpSets.PrivateIpSet[1].PrivateIpAddress
	try(unassignIPs(c, eni, secondary)).must(t)
	if free, _ := vswitchCounts(t, e); free != 1 {
		t.Fatalf("%d free after an unassign on a dry vSwitch, want 1", free)
	}
	try(assignIPs(c, eni, 1)).must(t)
	// Every address not in use is held: naming one does not get it.
	explicit := withSecondaries(0)
	explicit.PrimaryIpAddress = "192.168.0.200"
	if _, err := c.CreateNetworkInterface(explicit); code(t, err) != "InvalidIp.IpAssigned" {
		t.Fatalf("a drained address named explicitly: %v", err)
	}
	// Draining again to a higher level gives addresses back.
	if err := a.DrainVSwitch(ctx, vsw1, 5); err != nil {
		t.Fatal(err)
	}
	if free, drained := vswitchCounts(t, e); free != 5 || drained != free0-2-5 {
		t.Fatalf("after drain leaving 5: %d free, %d drained", free, drained)
	}
	if err := a.RefillVSwitch(ctx, vsw1); err != nil {
		t.Fatal(err)
	}
	if free, drained := vswitchCounts(t, e); free != free0-2 || drained != 0 {
		t.Fatalf("after refill: %d free, %d drained; want %d and 0", free, drained, free0-2)
	}
	try(c.CreateNetworkInterface(explicit)).must(t)
	if err := a.RefillVSwitch(ctx, vsw1); err != nil {
		t.Fatalf("refill of a vSwitch with no drain: %v", err)
	}
}

func TestVSwitchDrainErrors(t *testing.T) {
	e := newEnv(t)
	a, ctx := e.admin(), context.Background()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unknown vSwitch", a.DrainVSwitch(ctx, "vsw-nosuch", 0), "404"},
		{"negative leave", a.DrainVSwitch(ctx, vsw1, -1), "400"},
		{"refill an unknown vSwitch", a.RefillVSwitch(ctx, "vsw-nosuch"), "404"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want a %s error", tc.name, tc.err, tc.want)
		}
	}
	// A drain without a body leaves nothing free.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/fakecloud/vswitches/"+vsw1+"/drain", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if free, _ := vswitchCounts(t, e); resp.StatusCode != 200 || free != 0 {
		t.Fatalf("drain without a body: %s, %d free", resp.Status, free)
	}
}

// TestVSwitchDrainPersists checks that a drain survives a restart, from
// the journal of a fakecloud that never shut down and from the snapshot
// of one that did.
func TestVSwitchDrainPersists(t *testing.T) {
	state := filepath.Join(t.TempDir(), "world.json")
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.StatePath = state }))
	if _, err := e.cloud.DrainVSwitch(vsw1, 3); err != nil {
		t.Fatal(err)
	}
	spec := fakecloud.DefaultSpec()
	for _, how := range []string{"journal", "snapshot"} {
		c, err := fakecloud.New(fakecloud.Options{Spec: &spec, StatePath: state})
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		v := c.VSwitches()[0]
		if v.ID != vsw1 || v.Available != 3 || v.Drained == 0 {
			t.Fatalf("restored from the %s: %+v", how, v)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
