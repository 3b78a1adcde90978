package cloud

import (
	"fmt"
	"testing"
	"time"

	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/fakecloud"
)

// Issue 10, finding 5. fakecloud's default world no longer hides a new
// ENI from Describe (CreateNetworkInterface is documented synchronous),
// and throttling can answer Throttling, Throttling.User or Throttling.Api.
// The daemon must still cope with a world that opts in to eventual
// consistency, and must treat every throttling code alike.

// TestAllocateENIWithConsistencyWindow turns eventual consistency on (a
// consistency fault on CreateNetworkInterface): the ENI the daemon
// creates is missing from Describe while the daemon attaches it (metadata
// confirms the attach, no Describe is needed) and when it is released at
// once; both succeed.
func TestAllocateENIWithConsistencyWindow(t *testing.T) {
	w := newWorld(t, func(_ *fakecloud.Spec, _ *fakecloud.Options, o *Options) {
		// Polls every 250 ms, no jitter: with a 600 ms window (60 s of
		// world time at scale 0.01) at most three polls can answer not
		// found, which WaitENIStatus waits out (notFoundGrace).
		o.Backoff = backoff.NewSet(nil, map[string]backoff.Policy{
			"":                    {Duration: 5 * time.Millisecond, Factor: 1.2, Steps: 5},
			backoff.WaitENIStatus: {Duration: 250 * time.Millisecond, Factor: 1, Steps: 40},
		})
	})
	if _, err := w.cloud.AddFault(fakecloud.Fault{Name: "eventual", Kind: fakecloud.FaultConsistency,
		Latency: fakecloud.Duration(60 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	r, err := w.node.AllocateENI(ctx(t), CreateENIRequest{IntentKey: "ec1", VSwitchID: vsw1, SecurityGroups: []string{sg}, SecondaryIPv4: 2})
	if err != nil {
		t.Fatalf("allocate with the window on: %v", err)
	}
	if r.Status != StatusInUse || r.InstanceID != node1 || len(r.Meta.IPv4) != 3 {
		t.Fatalf("allocated %+v", r.ENI)
	}
	// The attach is confirmed by metadata, not by Describe: the window
	// cannot mislead it.
	notFound := fakecloud.CallFilter{Action: "DescribeNetworkInterfaceAttribute", Outcome: CodeENINotFound}
	if n := w.cloud.CallCount(fakecloud.CallFilter{Action: "DescribeNetworkInterfaceAttribute"}); n != 0 {
		t.Fatalf("%d Describes to confirm the attach, want none (metadata confirms it)", n)
	}
	if err := w.node.ReleaseENI(ctx(t), r.ID); err != nil {
		t.Fatalf("release: %v", err)
	}
	// Created and released at once, inside the window: the release must
	// not mistake "not found" for "gone" before it deleted the ENI.
	before := w.cloud.CallCount(notFound)
	e, err := w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: "ec2", VSwitchID: vsw1, SecurityGroups: []string{sg}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.api.DescribeENI(ctx(t), e.ID); !IsNotFound(err) {
		t.Fatalf("a new ENI inside the window: %v, want not found", err)
	}
	if err := w.node.ReleaseENI(ctx(t), e.ID); err != nil {
		t.Fatalf("release inside the window: %v", err)
	}
	if n := len(secondaries(w.cloud)); n != 0 {
		t.Fatalf("%d ENIs left", n)
	}
	if w.cloud.CallCount(notFound) == before {
		t.Fatal("the second ENI was never hidden")
	}
}

// TestThrottlingCodes: whichever of the three codes the cloud answers,
// the daemon classifies it as throttling (retryable), slows the action's
// limiter down, and completes both reads and mutating calls.
func TestThrottlingCodes(t *testing.T) {
	for _, code := range []string{"Throttling", "Throttling.User", "Throttling.Api"} {
		t.Run(code, func(t *testing.T) {
			se := sdkerrors.NewServerError(400, fmt.Sprintf(`{"Code":%q,"Message":"Request was denied due to user flow control."}`, code), "")
			if !IsThrottling(se) || !IsRetryable(se) {
				t.Fatalf("%s: throttling %v, retryable %v", code, IsThrottling(se), IsRetryable(se))
			}
			w := newWorld(t, func(s *fakecloud.Spec, _ *fakecloud.Options, o *Options) {
				s.Settings.Throttle = map[string]int{"*": 0, "DescribeNetworkInterfaces": 5, "CreateNetworkInterface": 1}
				s.Settings.ThrottleCodes = map[string]string{"*": code}
				s.Settings.ThrottleWindow = fakecloud.Duration(200 * time.Millisecond)
				o.ThrottleWindow = 200 * time.Millisecond
				// Every policy (ENI creation's too) retries within
				// milliseconds, often enough to outlast a window.
				policies := map[string]backoff.Policy{}
				for k := range backoff.Defaults() {
					policies[k] = backoff.Policy{Duration: 50 * time.Millisecond, Factor: 1.5, Steps: 10}
				}
				o.Backoff = backoff.NewSet(nil, policies)
				// A high client budget keeps the slowed-down limiter (a
				// sixteenth at worst) from dominating the test's time.
				o.RateLimits = map[string]int{"*": 60000}
			})
			for _, action := range []string{"DescribeNetworkInterfaces", "CreateNetworkInterface"} {
				lim := w.api.limits.get(action)
				base := lim.lim.Limit()
				for i := 0; i < 4; i++ {
					var err error
					if action == "CreateNetworkInterface" {
						_, err = w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: fmt.Sprintf("th%d", i), VSwitchID: vsw1, SecurityGroups: []string{sg}})
					} else {
						for j := 0; j < 3 && err == nil; j++ {
							_, err = w.api.DescribeENIs(ctx(t), ENIFilter{InstanceID: node1})
						}
					}
					if err != nil {
						t.Fatalf("%s call %d: %v", action, i, err)
					}
				}
				if n := w.cloud.CallCount(fakecloud.CallFilter{Action: action, Outcome: code}); n == 0 {
					t.Fatalf("%s was never throttled with %s", action, code)
				}
				if lim.lim.Limit() >= base {
					t.Fatalf("%s: limiter did not slow down on %s: %v (base %v)", action, code, lim.lim.Limit(), base)
				}
			}
			if n := len(secondaries(w.cloud)); n != 4 {
				t.Fatalf("%d ENIs created, want 4 (each once, ClientToken retries)", n)
			}
		})
	}
}
