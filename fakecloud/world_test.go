package fakecloud_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

// recorder is a Hypervisor that records every event in order.
type recorder struct {
	mu         sync.Mutex
	events     []string
	failAttach error
}

func (r *recorder) add(s string) { r.mu.Lock(); r.events = append(r.events, s); r.mu.Unlock() }

func (r *recorder) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) InstanceStarted(_ context.Context, in fakecloud.InstanceInfo) error {
	r.add(fmt.Sprintf("started %s enis=%d", in.ID, len(in.ENIs)))
	return nil
}
func (r *recorder) InstanceStopped(_ context.Context, in fakecloud.InstanceInfo) error {
	r.add("stopped " + in.ID)
	return nil
}
func (r *recorder) InstanceReleased(_ context.Context, in fakecloud.InstanceInfo) error {
	r.add("released " + in.ID)
	return nil
}
func (r *recorder) ENIAttached(_ context.Context, inst string, e fakecloud.ENIInfo) error {
	r.mu.Lock()
	err := r.failAttach
	r.mu.Unlock()
	r.add(fmt.Sprintf("attached %s %s %s gw=%s", inst, e.ID, e.MAC, e.Gateway))
	return err
}
func (r *recorder) ENIDetached(_ context.Context, inst string, e fakecloud.ENIInfo) error {
	r.add(fmt.Sprintf("detached %s %s", inst, e.ID))
	return nil
}
func (r *recorder) AddressesChanged(_ context.Context, inst string, e fakecloud.ENIInfo) error {
	r.add(fmt.Sprintf("addresses %s %s n=%d", inst, e.ID, len(e.IPv4)))
	return nil
}
func (r *recorder) RoutesChanged(_ context.Context, t fakecloud.RouteTableInfo) error {
	r.add(fmt.Sprintf("routes %s n=%d", t.ID, len(t.Entries)))
	return nil
}
func (r *recorder) EIPsChanged(_ context.Context, eips []fakecloud.EIPInfo) error {
	var parts []string
	for _, e := range eips {
		parts = append(parts, e.Address.String()+"="+e.PrivateIP.String())
	}
	r.add("eips [" + strings.Join(parts, " ") + "]")
	return nil
}

func TestHypervisorEvents(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.Hypervisor = rec }))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cloud.WaitHypervisor(ctx); err != nil {
		t.Fatal(err)
	}
	// At start the hypervisor learns the running machines and the routes.
	initial := rec.log()
	wantInitial := []string{"started " + node1 + " enis=1", "started " + node2 + " enis=1",
		"started i-bp1lab0000000000003 enis=1", "routes " + fakecloud.DefaultRouteTableID + " n=0", "eips []"}
	if !slices.Equal(initial, wantInitial) {
		t.Fatalf("initial sync:\n got %q\nwant %q", initial, wantInitial)
	}
	c := e.ecs()
	id := attachedENI(t, c, vsw1, node1)
	try(assignIPs(c, id, 3)).must(t)
	r := ecs.CreateDetachNetworkInterfaceRequest()
	r.NetworkInterfaceId, r.InstanceId = id, node1
	try(c.DetachNetworkInterface(r)).must(t)
	waitStatus(t, c, id, "Available")
	if err := e.cloud.WaitHypervisor(ctx); err != nil {
		t.Fatal(err)
	}
	v, _ := e.cloud.ENI(id)
	want := []string{
		fmt.Sprintf("attached %s %s %s gw=192.168.0.253", node1, id, v.MAC),
		fmt.Sprintf("addresses %s %s n=3", node1, id),
		fmt.Sprintf("detached %s %s", node1, id),
	}
	if got := rec.log()[len(initial):]; !slices.Equal(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}

	// A hypervisor that cannot plug the device fails the attach: the ENI
	// goes back to Available, as a failed attach does in ECS.
	rec.mu.Lock()
	rec.failAttach = errors.New("no such device")
	rec.mu.Unlock()
	att := ecs.CreateAttachNetworkInterfaceRequest()
	att.NetworkInterfaceId, att.InstanceId = id, node1
	try(c.AttachNetworkInterface(att)).must(t)
	testwait.Until(t, 5*time.Second, "attach attempted", func() bool {
		return strings.HasPrefix(rec.log()[len(rec.log())-1], "attached")
	})
	got := waitStatus(t, c, id, "Available")
	if got.InstanceId != "" {
		t.Fatalf("failed attach left instance %q", got.InstanceId)
	}
}

func TestInstanceStopStartRelease(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.Hypervisor = rec }))
	c := e.ecs()
	keep := attachedENI(t, c, vsw1, node1)
	drop := createENI(t, c, vsw1, func(r *ecs.CreateNetworkInterfaceRequest) {
		r.DeleteOnRelease = requests.NewBoolean(true)
	}).NetworkInterfaceId
	att := ecs.CreateAttachNetworkInterfaceRequest()
	att.NetworkInterfaceId, att.InstanceId = drop, node1
	try(c.AttachNetworkInterface(att)).must(t)
	waitStatus(t, c, drop, "InUse")

	if err := e.cloud.StopInstance(node1); err != nil {
		t.Fatal(err)
	}
	if err := e.cloud.StopInstance(node1); fakecloud.ErrorCode(err) != "IncorrectInstanceStatus" {
		t.Fatalf("stop twice: %v", err)
	}
	di := ecs.CreateDescribeInstancesRequest()
	di.InstanceIds = `["` + node1 + `"]`
	if s := try(c.DescribeInstances(di)).must(t).Instances.Instance[0].Status; s != "Stopped" {
		t.Fatalf("status %s", s)
	}
	// ENIs stay attached to a stopped instance.
	if s := describeENI(t, c, keep).Status; s != "InUse" {
		t.Fatalf("ENI of a stopped instance: %s", s)
	}
	if err := e.cloud.StartInstance(node1); err != nil {
		t.Fatal(err)
	}
	primary := func() string { in, _ := e.cloud.Instance(node1); return in.ENIs[0].ID }()
	if err := e.cloud.ReleaseInstance(node1); err != nil {
		t.Fatal(err)
	}
	if got := describeENI(t, c, keep); got.Status != "Available" || got.InstanceId != "" {
		t.Fatalf("secondary ENI after release: %s on %q", got.Status, got.InstanceId)
	}
	for _, id := range []string{drop, primary} {
		req := ecs.CreateDescribeNetworkInterfacesRequest()
		req.NetworkInterfaceId = &[]string{id}
		if n := len(try(c.DescribeNetworkInterfaces(req)).must(t).NetworkInterfaceSets.NetworkInterfaceSet); n != 0 {
			t.Fatalf("%s survived the release", id)
		}
	}
	if n := len(try(c.DescribeInstances(di)).must(t).Instances.Instance); n != 0 {
		t.Fatal("released instance still listed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.cloud.WaitHypervisor(ctx)
	log := strings.Join(rec.log(), "\n")
	for _, want := range []string{"stopped " + node1, "started " + node1 + " enis=3", "released " + node1} {
		if !strings.Contains(log, want) {
			t.Fatalf("hypervisor log lacks %q:\n%s", want, log)
		}
	}
}

// TestPersistence restarts fakecloud on its state file, once cleanly and
// once as if killed (the first instance never closed), and checks nothing
// acknowledged is lost.
func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "world.json")
	open := func() *env {
		return newEnv(t, withOptions(func(o *fakecloud.Options) { o.StatePath = state }))
	}
	e1 := open()
	c := e1.ecs()
	id := attachedENI(t, c, vsw1, node1)
	ips := try(assignIPs(c, id, 3)).must(t).AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress
	pending := createENI(t, c, vsw1, func(r *ecs.CreateNetworkInterfaceRequest) { r.ClientToken = "tok-persist" }).NetworkInterfaceId
	att := ecs.CreateAttachNetworkInterfaceRequest()
	att.NetworkInterfaceId, att.InstanceId = pending, node1
	try(c.AttachNetworkInterface(att)).must(t) // still Attaching when "killed"
	for _, f := range []string{state, state + ".journal"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}

	// "Kill": open a second fakecloud on the same files without closing
	// the first; everything it acknowledged is in the journal.
	e2 := open()
	c2 := e2.ecs()
	d := describeENI(t, c2, id)
	if d.Status != "InUse" || d.InstanceId != node1 || len(d.PrivateIpSets.PrivateIpSet) != 4 {
		t.Fatalf("after restart: %s on %s with %d IPs", d.Status, d.InstanceId, len(d.PrivateIpSets.PrivateIpSet))
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(d.PrivateIpSets.PrivateIpSet, func(s ecs.PrivateIpSet) bool { return s.PrivateIpAddress == ip }) {
			t.Fatalf("address %s lost", ip)
		}
	}
	// The interrupted attach completes after the restart.
	waitStatus(t, c2, pending, "InUse")
	// Idempotency records survive too.
	again := createENI(t, c2, vsw1, func(r *ecs.CreateNetworkInterfaceRequest) { r.ClientToken = "tok-persist" })
	if again.NetworkInterfaceId != pending {
		t.Fatalf("ClientToken replay after restart created %s, want %s", again.NetworkInterfaceId, pending)
	}
	// No address is handed out twice after the restart.
	more := try(assignIPs(c2, id, 5)).must(t).AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress
	for _, ip := range more {
		if slices.Contains(ips, ip) || ip == d.PrivateIpAddress {
			t.Fatalf("address %s handed out twice", ip)
		}
	}
	free := e2.cloud.VSwitches()[0].Available
	if err := e2.cloud.Close(); err != nil {
		t.Fatal(err)
	}
	e3 := open()
	if got := e3.cloud.VSwitches()[0].Available; got != free {
		t.Fatalf("free addresses %d after a clean restart, %d before", got, free)
	}
	if v, ok := e3.cloud.ENI(pending); !ok || v.Status != "InUse" {
		t.Fatalf("pending ENI after clean restart: %+v", v)
	}
}

func TestStateFileRefusesGarbage(t *testing.T) {
	state := filepath.Join(t.TempDir(), "world.json")
	if err := os.WriteFile(state, []byte("{\"not\": \"a world\"}"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := fakecloud.New(fakecloud.Options{StatePath: state})
	if err == nil || !strings.Contains(err.Error(), "not a fakecloud snapshot") {
		t.Fatalf("garbage state file: %v", err)
	}
}

func TestWorldFileValidation(t *testing.T) {
	cases := map[string]string{
		"unknown key":     "regionId: cn-hangzhou\nvpcz: []\n",
		"vswitch outside": "vpcs: [{id: vpc-1, cidr: 10.0.0.0/16}]\nzones: [z]\nvswitches: [{id: vsw-1, vpcId: vpc-1, zoneId: z, cidr: 10.1.0.0/24}]\n",
		"unknown type":    "vpcs: [{id: vpc-1, cidr: 10.0.0.0/16}]\nzones: [z]\nsecurityGroups: [{id: sg-1, vpcId: vpc-1}]\nvswitches: [{id: vsw-1, vpcId: vpc-1, zoneId: z, cidr: 10.0.0.0/24}]\ninstances: [{id: i-1, instanceType: ecs.nope, vswitchId: vsw-1, securityGroupIds: [sg-1]}]\n",
		"bad duration":    "settings: {attachDelay: soon}\n",
		"bad exhaustion":  "settings: {exhaustionCode: Nope}\n",
	}
	for name, doc := range cases {
		if _, err := fakecloud.ParseSpec([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := fakecloud.ParseSpec([]byte("settings: {attachDelay: 5s, throttle: {CreateNetworkInterface: 7}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Settings.AttachDelay.D() != 5*time.Second || s.Settings.Throttle["CreateNetworkInterface"] != 7 ||
		s.Settings.Throttle["DescribeNetworkInterfaces"] != 3600 || s.Settings.DetachDelay.D() != 2*time.Second || len(s.Instances) != 3 {
		t.Fatalf("defaults not kept: %+v", s.Settings)
	}
}
