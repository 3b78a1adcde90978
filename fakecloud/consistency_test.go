package fakecloud_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/fakecloud"
)

// Issue 10, finding 5: CreateNetworkInterface is documented synchronous,
// so eventual consistency after Create is opt-in (a fault, or the
// consistencyWindow setting); throttling answers the code a world
// chooses per action.

// TestDefaultsCreateIsSynchronous checks the defaults a world starts
// from: no consistency window, throttling answered with Throttling.User.
func TestDefaultsCreateIsSynchronous(t *testing.T) {
	s := fakecloud.DefaultSettings()
	if s.ConsistencyWindow != 0 || fakecloud.DefaultSpec().Settings.ConsistencyWindow != 0 {
		t.Fatalf("default consistency window %v, want 0", s.ConsistencyWindow)
	}
	if s.ThrottleCodes["*"] != fakecloud.CodeThrottling || fakecloud.CodeThrottling != "Throttling.User" {
		t.Fatalf("default throttling codes %v", s.ThrottleCodes)
	}
	// A world file that says nothing keeps both defaults.
	w, err := fakecloud.ParseSpec([]byte("settings:\n  attachDelay: 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Settings.ConsistencyWindow != 0 || w.Settings.ThrottleCodes["*"] != "Throttling.User" {
		t.Fatalf("parsed defaults: %v %v", w.Settings.ConsistencyWindow, w.Settings.ThrottleCodes)
	}
	// The default world as the library serves it (no window, real delays).
	e := newEnv(t, withSpec(func(s *fakecloud.Spec) { s.Settings = fakecloud.DefaultSettings() }))
	c := e.ecs()
	id := createENI(t, c, vsw1, nil).NetworkInterfaceId
	ar := ecs.CreateDescribeNetworkInterfaceAttributeRequest()
	ar.NetworkInterfaceId = id
	if a := try(c.DescribeNetworkInterfaceAttribute(ar)).must(t); a.Status != "Available" {
		t.Fatalf("new ENI is %s", a.Status)
	}
}

// TestConsistencyFault opts in per call: the ENI of a matching Create is
// missing from both Describe calls for the fault's window, the next one
// (count 1) is visible at once.
func TestConsistencyFault(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.Clock = clk }))
	if _, err := e.cloud.AddFault(fakecloud.Fault{Name: "ec", Kind: fakecloud.FaultConsistency, Count: 1,
		Latency: fakecloud.Duration(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if f := e.cloud.Faults(); len(f) != 1 || f[0].Action != "CreateNetworkInterface" {
		t.Fatalf("installed %+v, want action CreateNetworkInterface by default", f)
	}
	c := e.ecs()
	hidden := createENI(t, c, vsw1, nil).NetworkInterfaceId
	shown := createENI(t, c, vsw1, nil).NetworkInterfaceId
	visible := func(id string) (attr, list bool) {
		ar := ecs.CreateDescribeNetworkInterfaceAttributeRequest()
		ar.NetworkInterfaceId = id
		_, err := c.DescribeNetworkInterfaceAttribute(ar)
		if err != nil && code(t, err) != "InvalidEniId.NotFound" {
			t.Fatalf("attribute: %v", err)
		}
		lr := ecs.CreateDescribeNetworkInterfacesRequest()
		lr.NetworkInterfaceId = &[]string{id}
		n := len(try(c.DescribeNetworkInterfaces(lr)).must(t).NetworkInterfaceSets.NetworkInterfaceSet)
		return err == nil, n == 1
	}
	if a, l := visible(hidden); a || l {
		t.Fatalf("ENI under the fault visible at once: attribute %v, list %v", a, l)
	}
	if a, l := visible(shown); !a || !l {
		t.Fatalf("ENI after the fault's count hidden: attribute %v, list %v", a, l)
	}
	clk.Step(1900 * time.Millisecond)
	if a, l := visible(hidden); a || l {
		t.Fatal("visible before the window ended")
	}
	clk.Step(200 * time.Millisecond)
	if a, l := visible(hidden); !a || !l {
		t.Fatalf("still hidden after the window: attribute %v, list %v", a, l)
	}
}

func TestConsistencyFaultValidation(t *testing.T) {
	e := newEnv(t)
	for name, f := range map[string]fakecloud.Fault{
		"no window":    {Kind: fakecloud.FaultConsistency},
		"other action": {Kind: fakecloud.FaultConsistency, Action: "AssignPrivateIpAddresses", Latency: fakecloud.Duration(time.Second)},
	} {
		if _, err := e.cloud.AddFault(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := e.cloud.AddFault(fakecloud.Fault{Kind: "eventual"}); err == nil || !strings.Contains(err.Error(), "consistency") {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := e.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultConsistency, Jitter: fakecloud.Duration(time.Second)}); err != nil {
		t.Errorf("jitter alone: %v", err)
	}
}

// TestThrottleCodes: each action answers the code its world chose, with
// 400, and the call accounting records it.
func TestThrottleCodes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Minute).Add(time.Minute + time.Second))
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.Clock = clk }), withSettings(func(s *fakecloud.Settings) {
		s.Throttle = map[string]int{"*": 1}
		s.ThrottleWindow = fakecloud.Duration(time.Minute)
		s.ThrottleCodes = map[string]string{"*": "Throttling.User",
			"DescribeNetworkInterfaces": "Throttling", "DescribeInstances": "Throttling.Api"}
	}))
	c := e.ecs()
	calls := map[string]func() error{
		"DescribeNetworkInterfaces": func() error {
			_, err := c.DescribeNetworkInterfaces(ecs.CreateDescribeNetworkInterfacesRequest())
			return err
		},
		"DescribeInstances": func() error {
			_, err := c.DescribeInstances(ecs.CreateDescribeInstancesRequest())
			return err
		},
		"DescribeInstanceTypes": func() error {
			_, err := c.DescribeInstanceTypes(ecs.CreateDescribeInstanceTypesRequest())
			return err
		},
	}
	want := map[string]string{"DescribeNetworkInterfaces": "Throttling", "DescribeInstances": "Throttling.Api",
		"DescribeInstanceTypes": "Throttling.User"}
	for action, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s within budget: %v", action, err)
		}
		err := call()
		if code(t, err) != want[action] || status(t, err) != 400 {
			t.Errorf("%s over budget: %v, want 400 %s", action, err, want[action])
		}
		if n := e.cloud.CallCount(fakecloud.CallFilter{Action: action, Outcome: want[action]}); n != 1 {
			t.Errorf("%s: %d calls counted as %s", action, n, want[action])
		}
	}
	// Settings can change the code at run time; a code that is not a
	// throttling code is refused.
	s := e.cloud.Settings()
	s.ThrottleCodes["DescribeInstanceTypes"] = "Throttling.Api"
	if err := e.cloud.UpdateSettings(s); err != nil {
		t.Fatal(err)
	}
	if err := calls["DescribeInstanceTypes"](); code(t, err) != "Throttling.Api" {
		t.Errorf("after the update: %v", err)
	}
	s.ThrottleCodes["DescribeInstanceTypes"] = "Throttling.Users"
	if err := e.cloud.UpdateSettings(s); err == nil || !strings.Contains(err.Error(), "throttleCodes") {
		t.Errorf("bad code accepted: %v", err)
	}
	if _, err := fakecloud.ParseSpec([]byte("settings:\n  throttleCodes:\n    CreateNetworkInterface: Busy\n")); err == nil {
		t.Error("a world file with a bad throttling code was accepted")
	}
	w, err := fakecloud.ParseSpec([]byte("settings:\n  throttleCodes:\n    CreateNetworkInterface: Throttling\n"))
	if err != nil || w.Settings.ThrottleCodes["*"] != "Throttling.User" || w.Settings.ThrottleCodes["CreateNetworkInterface"] != "Throttling" {
		t.Errorf("a world file's codes merge onto the default: %v %v", w.Settings.ThrottleCodes, err)
	}
}
