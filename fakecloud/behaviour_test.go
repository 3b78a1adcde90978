package fakecloud_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

func TestThrottlingWindows(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.Clock = clk }), withSettings(func(s *fakecloud.Settings) {
		s.Throttle = map[string]int{"*": 0, "DescribeNetworkInterfaces": 3}
		s.ThrottleWindow = fakecloud.Duration(time.Minute)
	}))
	c := e.ecs()
	describe := func() error {
		_, err := c.DescribeNetworkInterfaces(ecs.CreateDescribeNetworkInterfacesRequest())
		return err
	}
	// Align to the start of a window so that the three calls share one.
	now := clk.Now()
	clk.SetTime(now.Truncate(time.Minute).Add(time.Minute + time.Second))
	for i := 0; i < 3; i++ {
		if err := describe(); err != nil {
			t.Fatalf("call %d within budget: %v", i, err)
		}
	}
	start := time.Now()
	err := describe()
	if code(t, err) != "Throttling.User" || status(t, err) != 400 {
		t.Fatalf("4th call: %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("a throttled call must fail at once, took %v", time.Since(start))
	}
	// Other actions have their own budget (0 = unlimited here).
	try(c.DescribeInstances(ecs.CreateDescribeInstancesRequest())).must(t)
	// Still throttled within the window, allowed in the next one.
	clk.Step(30 * time.Second)
	if code(t, describe()) != "Throttling.User" {
		t.Fatal("throttle lifted within the same window")
	}
	clk.Step(31 * time.Second)
	if err := describe(); err != nil {
		t.Fatalf("next window: %v", err)
	}
	if n := e.cloud.CallCount(fakecloud.CallFilter{Action: "DescribeNetworkInterfaces", Outcome: "Throttling.User"}); n != 2 {
		t.Fatalf("throttled calls counted %d, want 2", n)
	}
	if n := e.cloud.CallCount(fakecloud.CallFilter{Action: "DescribeNetworkInterfaces", Outcome: fakecloud.OutcomeSuccess}); n != 4 {
		t.Fatalf("successful calls counted %d, want 4", n)
	}
}

func TestClientTokenIdempotency(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	mk := func(token string, n int) (*ecs.CreateNetworkInterfaceResponse, error) {
		r := ecs.CreateCreateNetworkInterfaceRequest()
		r.VSwitchId, r.SecurityGroupId, r.ClientToken = vsw1, sg, token
		r.SecondaryPrivateIpAddressCount = requests.NewInteger(n)
		return c.CreateNetworkInterface(r)
	}
	first := try(mk("create-1", 2)).must(t)
	again := try(mk("create-1", 2)).must(t)
	if again.NetworkInterfaceId != first.NetworkInterfaceId || again.MacAddress != first.MacAddress ||
		again.RequestId == first.RequestId {
		t.Fatalf("retry got %s/%s (request %s), first %s/%s (request %s)", again.NetworkInterfaceId, again.MacAddress,
			again.RequestId, first.NetworkInterfaceId, first.MacAddress, first.RequestId)
	}
	if _, err := mk("create-1", 3); code(t, err) != "IdempotentFailed" || status(t, err) != 400 {
		t.Fatalf("same token, different request: %v", err)
	}
	enis := 0
	for _, v := range e.cloud.ENIs() {
		if v.Type == fakecloud.ENITypeSecondary {
			enis++
		}
	}
	if enis != 1 {
		t.Fatalf("%d ENIs exist, want 1", enis)
	}
	// Assign is idempotent too: the retry returns the same addresses and
	// assigns nothing more.
	ar := ecs.CreateAssignPrivateIpAddressesRequest()
	ar.NetworkInterfaceId, ar.ClientToken = first.NetworkInterfaceId, "assign-1"
	ar.SecondaryPrivateIpAddressCount = requests.NewInteger(2)
	a1 := try(c.AssignPrivateIpAddresses(ar)).must(t)
	a2 := try(c.AssignPrivateIpAddresses(ar)).must(t)
	if fmt.Sprint(a1.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress) != fmt.Sprint(a2.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress) {
		t.Fatalf("assign retry: %v vs %v", a1.AssignedPrivateIpAddressesSet, a2.AssignedPrivateIpAddressesSet)
	}
	if n := len(describeENI(t, c, first.NetworkInterfaceId).PrivateIpSets.PrivateIpSet); n != 5 {
		t.Fatalf("ENI has %d addresses, want 5", n)
	}
}

// TestFaultReplay runs the same seeded probabilistic faults twice with
// eight concurrent callers and checks that exactly the same calls fail,
// whatever the interleaving.
const replayCallers, replayCalls = 8, 25

// faultPattern runs replayCallers callers concurrently, each making
// replayCalls DescribeNetworkInterfaces calls, against a cloud of
// emulator seed seed with fault f, and returns which calls failed.
func faultPattern(t *testing.T, seed int64, f fakecloud.Fault) [replayCallers][]bool {
	var keys []fakecloud.AccessKeySpec
	for i := 0; i < replayCallers; i++ {
		keys = append(keys, fakecloud.AccessKeySpec{ID: fmt.Sprintf("LTAIcaller%02d", i), Secret: "s"})
	}
	e := newEnv(t, withSpec(func(s *fakecloud.Spec) { s.AccessKeys = append(s.AccessKeys, keys...) }),
		withOptions(func(o *fakecloud.Options) { o.Seed = seed }))
	try(e.cloud.AddFault(f)).must(t)
	var out [replayCallers][]bool
	var wg sync.WaitGroup
	for i := 0; i < replayCallers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.ecsWith(credentials.NewAccessKeyCredential(keys[i].ID, "s"))
			for j := 0; j < replayCalls; j++ {
				_, err := c.DescribeNetworkInterfaces(ecs.CreateDescribeNetworkInterfacesRequest())
				out[i] = append(out[i], err != nil)
			}
		}()
	}
	wg.Wait()
	return out
}

// TestFaultReplay checks that a probabilistic fault hits the same calls
// in two runs whatever the concurrency: with the same emulator seed, or
// on any emulator when the fault carries its own seed.
func TestFaultReplay(t *testing.T) {
	flaky := fakecloud.Fault{Name: "flaky", Kind: fakecloud.FaultError, Action: "DescribeNetworkInterfaces",
		Probability: 0.3, Code: "InternalError", Status: 500}
	seeded := flaky
	seeded.Seed = 7
	for _, tc := range []struct {
		name         string
		f            fakecloud.Fault
		seedA, seedB int64
		same         bool
	}{
		{"same emulator seed", flaky, 42, 42, true},
		{"own seed on another emulator", seeded, 42, 1042, true},
		{"another emulator seed", flaky, 42, 1042, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := faultPattern(t, tc.seedA, tc.f), faultPattern(t, tc.seedB, tc.f)
			failed, differ := 0, 0
			for i := range a {
				for j := range a[i] {
					if a[i][j] != b[i][j] {
						differ++
					}
					if a[i][j] {
						failed++
					}
				}
			}
			if tc.same != (differ == 0) {
				t.Fatalf("%d of %d calls fared differently in the two runs, want same=%v", differ, replayCallers*replayCalls, tc.same)
			}
			if failed < 20 || failed > 100 {
				t.Fatalf("%d of %d calls failed with p=0.3", failed, replayCallers*replayCalls)
			}
		})
	}
}

func TestFailNextN(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	try(e.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultError, Action: "CreateNetworkInterface", Count: 2,
		Code: "ServiceUnavailable", Status: 503})).must(t)
	r := ecs.CreateCreateNetworkInterfaceRequest()
	r.VSwitchId, r.SecurityGroupId = vsw1, sg
	for i := 0; i < 2; i++ {
		if _, err := c.CreateNetworkInterface(r); code(t, err) != "ServiceUnavailable" || status(t, err) != 503 {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	try(c.CreateNetworkInterface(r)).must(t)
	// A failed call changed nothing.
	if n := len(e.cloud.ENIs()); n != 4 {
		t.Fatalf("%d ENIs, want 3 primaries + 1", n)
	}
}

func TestLostResponse(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	try(e.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultLostResponse, Action: "CreateNetworkInterface", Count: 1})).must(t)
	r := ecs.CreateCreateNetworkInterfaceRequest()
	r.VSwitchId, r.SecurityGroupId, r.ClientToken = vsw1, sg, "lost-1"
	if _, err := c.CreateNetworkInterface(r); code(t, err) != "InternalError" || status(t, err) != 500 {
		t.Fatalf("lost response: %v", err)
	}
	// The ENI was created although the client saw an error; a retry with
	// the same token finds it instead of creating another.
	before := len(e.cloud.ENIs())
	got := try(c.CreateNetworkInterface(r)).must(t)
	if len(e.cloud.ENIs()) != before || before != 4 {
		t.Fatalf("ENIs before retry %d, after %d; want 4 both", before, len(e.cloud.ENIs()))
	}
	if _, ok := e.cloud.ENI(got.NetworkInterfaceId); !ok {
		t.Fatalf("retry answered an unknown ENI %s", got.NetworkInterfaceId)
	}

	// Timeout mode: the client times out, the change still happens.
	try(e.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultLostResponse, Action: "AssignPrivateIpAddresses", Count: 1, Lost: "timeout"})).must(t)
	c2 := e.ecs()
	c2.SetReadTimeout(300 * time.Millisecond)
	if _, err := assignIPs(c2, got.NetworkInterfaceId, 2); err == nil {
		t.Fatal("timeout mode answered")
	}
	if n := len(describeENI(t, c, got.NetworkInterfaceId).PrivateIpSets.PrivateIpSet); n != 3 {
		t.Fatalf("after the lost assign the ENI has %d addresses, want 3", n)
	}
}

// TestPauseAtStep holds an attach after its change is committed, lets the
// client give up, and checks the world then moves on as the cloud would.
func TestPauseAtStep(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	id := createENI(t, c, vsw1, nil).NetworkInterfaceId
	try(e.cloud.AddFault(fakecloud.Fault{Name: "hold-attach", Kind: fakecloud.FaultPause, Action: "AttachNetworkInterface",
		Step: fakecloud.StepBefore})).must(t)
	done := make(chan error, 1)
	go func() {
		cc := e.ecs()
		cc.SetReadTimeout(200 * time.Millisecond)
		r := ecs.CreateAttachNetworkInterfaceRequest()
		r.NetworkInterfaceId, r.InstanceId = id, node1
		_, err := cc.AttachNetworkInterface(r)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.cloud.WaitHeld(ctx, "hold-attach", 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the held call answered")
	}
	if s := describeENI(t, c, id).Status; s != "Available" {
		t.Fatalf("held before the change, status %s", s)
	}
	// While held the ENI counts as busy.
	r := ecs.CreateDeleteNetworkInterfaceRequest()
	r.NetworkInterfaceId = id
	if _, err := c.DeleteNetworkInterface(r); code(t, err) != "Operation.Conflict" {
		t.Fatalf("delete while an attach is in flight: %v", err)
	}
	if !e.cloud.RemoveFault("hold-attach") {
		t.Fatal("fault not found")
	}
	waitStatus(t, c, id, "InUse")
}

func TestStateMachineTiming(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.TimeScale, o.Clock = 0.5, clk }), withSettings(func(s *fakecloud.Settings) {
		s.AttachDelay = fakecloud.Duration(800 * time.Millisecond) // 400ms at scale 0.5
	}))
	c := e.ecs()
	id := createENI(t, c, vsw1, nil).NetworkInterfaceId
	r := ecs.CreateAttachNetworkInterfaceRequest()
	r.NetworkInterfaceId, r.InstanceId = id, node1
	try(c.AttachNetworkInterface(r)).must(t)
	// The attach completes on a timer of the cloud's clock; step that
	// clock only once the timer is armed, or the step would pass it by.
	testwait.Until(t, 5*time.Second, "attach timer armed", clk.HasWaiters)
	clk.Step(250 * time.Millisecond)
	if s := describeENI(t, c, id).Status; s != "Attaching" {
		t.Fatalf("after 250ms of a 400ms attach: %s", s)
	}
	clk.Step(149 * time.Millisecond)
	if s := describeENI(t, c, id).Status; s != "Attaching" {
		t.Fatalf("after 399ms of a 400ms attach: %s", s)
	}
	clk.Step(time.Millisecond)
	waitStatus(t, c, id, "InUse")
}

func TestAdminAPI(t *testing.T) {
	e := newEnv(t)
	get := func(path, token string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := get("/fakecloud/world", ""); r.StatusCode != 401 {
		t.Fatalf("no token: %d", r.StatusCode)
	}
	if r := get("/fakecloud/world", "wrong"); r.StatusCode != 401 {
		t.Fatalf("wrong token: %d", r.StatusCode)
	}
	if r := get("/fakecloud/healthz", ""); r.StatusCode != 200 {
		t.Fatalf("healthz: %d", r.StatusCode)
	}
	_ = e
}
