package fakecloud_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/fakecloud/admin"
)

// admin returns an admin client of e over HTTP, as a lab tool in another
// process has.
func (e *env) admin() *admin.Client { return &admin.Client{URL: e.srv.URL, Token: adminToken} }

// TestSettingsChangeAppliesToLaterCalls cuts a throttle budget and slows
// attach through the admin client, as a chaos plan does, and checks that
// the calls made after each change feel it and that writing back the
// settings read before restores them exactly.
func TestSettingsChangeAppliesToLaterCalls(t *testing.T) {
	e := newEnv(t)
	a, ctx, c := e.admin(), context.Background(), e.ecs()
	before, err := a.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	describe := func() error {
		_, err := c.DescribeInstances(ecs.CreateDescribeInstancesRequest())
		return err
	}
	try(0, describe()).must(t)
	cut := map[string]int{"*": 0, "DescribeInstances": 1}
	got, err := a.UpdateSettings(ctx, map[string]any{"throttle": cut})
	if err != nil || !reflect.DeepEqual(got.Throttle, cut) {
		t.Fatalf("cut budget: %v, throttle %v (a key present must replace the whole map)", err, got.Throttle)
	}
	// The call before the cut counted in this window, so the next one is
	// over the new budget; if the minute turned meanwhile, the one after.
	throttled := code(t, describe()) == "Throttling.User"
	if !throttled {
		throttled = code(t, describe()) == "Throttling.User"
	}
	if !throttled {
		t.Fatal("no call throttled after the budget was cut to 1")
	}
	const slow = 400 * time.Millisecond
	if _, err := a.UpdateSettings(ctx, map[string]any{"throttle": before.Throttle, "attachDelay": admin.Duration(slow)}); err != nil {
		t.Fatal(err)
	}
	try(0, describe()).must(t)
	start := time.Now()
	attachedENI(t, c, vsw1, node1)
	if took := time.Since(start); took < slow {
		t.Fatalf("attach after attachDelay=%v took %v", slow, took)
	}
	after, err := a.UpdateSettings(ctx, map[string]any{"attachDelay": before.AttachDelay})
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("restored settings:\n%+v, %v\nwant %+v", after, err, before)
	}
	if _, err := a.UpdateSettings(ctx, map[string]any{"attachDelay": "-1s"}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("negative delay: %v, want a 400", err)
	}
}

// TestInstanceLifecycleThroughAdminClient stops, starts and releases an
// instance through the admin client.
func TestInstanceLifecycleThroughAdminClient(t *testing.T) {
	e := newEnv(t)
	a, ctx := e.admin(), context.Background()
	status := func() string {
		in, ok := e.cloud.Instance(node2)
		if !ok {
			return "released"
		}
		return in.Status
	}
	for _, step := range []struct {
		op   func(context.Context, string) error
		want string
	}{
		{a.StopInstance, fakecloud.StatusStopped},
		{a.StartInstance, fakecloud.StatusRunning},
		{a.ReleaseInstance, "released"},
	} {
		if err := step.op(ctx, node2); err != nil {
			t.Fatal(err)
		}
		if got := status(); got != step.want {
			t.Fatalf("instance %s, want %s", got, step.want)
		}
	}
	if err := a.StartInstance(ctx, node2); err == nil {
		t.Fatal("start of a released instance succeeded")
	}
}
