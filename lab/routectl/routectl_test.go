package routectl_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/fakecloudtest"
	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/lab/routectl"
)

const (
	testAK     = "LTAIroutectl00001"
	testSecret = "routectl-secret-0001"
	table      = fakecloud.DefaultRouteTableID
)

// The default world's instances.
const (
	inst1 = "i-bp1lab0000000000001"
	inst2 = "i-bp1lab0000000000002"
	inst3 = "i-bp1lab0000000000003"
)

func TestMain(m *testing.M) { noproxy.Main(m) }

// env is a fakecloud (default world plus our AccessKey) behind an
// httptest server on 127.0.0.1.
type env struct {
	t     *testing.T
	cloud *fakecloud.Cloud
	url   string
	vpc   *vpc.Client
	mu    sync.Mutex // guards vpc: SDK clients are not safe to share
}

func newEnv(t *testing.T, routeDelay time.Duration) *env {
	t.Helper()
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSecret}}
	spec.Settings.RouteEntryDelay = fakecloud.Duration(routeDelay)
	c, err := fakecloud.New(fakecloud.Options{Spec: &spec, Seed: 7})
	if err != nil {
		t.Fatalf("fakecloud.New: %v", err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		srv.Close()
		if err := c.Close(); err != nil {
			t.Errorf("close fakecloud: %v", err)
		}
	})
	return &env{t: t, cloud: c, url: srv.URL, vpc: fakecloudtest.VPCClient(t, srv.URL, testAK, testSecret)}
}

// fastBackoff keeps every retry and poll in the tens of milliseconds.
func fastBackoff() *backoff.Set {
	return backoff.NewSet(nil, map[string]backoff.Policy{
		routectl.PolicyAPI:         {Duration: 5 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Steps: 4},
		backoff.ThrottledAPIRetry:  {Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 4, Cap: 100 * time.Millisecond},
		routectl.PolicyWait:        {Duration: 10 * time.Millisecond, Factor: 1.5, Steps: 10, Cap: 50 * time.Millisecond},
		backoff.KubernetesAPIRetry: {Duration: 5 * time.Millisecond, Factor: 2, Steps: 3},
	})
}

func (e *env) options(kube kubernetes.Interface) routectl.Options {
	return routectl.Options{
		Kube: kube, Endpoint: e.url, Region: fakecloud.DefaultRegion, VpcID: fakecloud.DefaultVPCID,
		AccessKeyID: testAK, AccessKeySecret: testSecret, Backoff: fastBackoff(),
		Logger:      slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Resync:      200 * time.Millisecond,
		WaitTimeout: 10 * time.Second,
	}
}

// testWriter sends logs to t.Log, so they show only for failures (-v).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func node(name, instance string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{ProviderID: fakecloud.DefaultRegion + "." + instance, PodCIDRs: cidrs}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	return n
}

// goRoutes reads the Available custom entries through fakecloud's Go API:
// destination → "NextHopType/NextHopId".
func (e *env) goRoutes() map[string]string {
	out := map[string]string{}
	for _, rt := range e.cloud.World().RouteTables {
		if rt.ID != table {
			continue
		}
		for _, r := range rt.Entries {
			out[r.Destination.String()] = r.NextHopType + "/" + r.NextHopID
		}
	}
	return out
}

// sdkEntries reads the table's custom entries through the SDK.
func (e *env) sdkEntries() []vpc.RouteEntry {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []vpc.RouteEntry
	token := ""
	for {
		req := vpc.CreateDescribeRouteEntryListRequest()
		req.RouteTableId = table
		req.RouteEntryType = "Custom"
		req.MaxResult = requests.NewInteger(100)
		req.NextToken = token
		resp, err := e.vpc.DescribeRouteEntryList(req)
		if err != nil {
			e.t.Fatalf("DescribeRouteEntryList: %v", err)
		}
		out = append(out, resp.RouteEntrys.RouteEntry...)
		if token = resp.NextToken; token == "" {
			return out
		}
	}
}

// sdkRoutes is sdkEntries as destination → "NextHopType/NextHopId Status".
func (e *env) sdkRoutes() map[string]string {
	out := map[string]string{}
	for _, r := range e.sdkEntries() {
		if _, dup := out[r.DestinationCidrBlock]; dup {
			e.t.Errorf("two entries for %s", r.DestinationCidrBlock)
		}
		out[r.DestinationCidrBlock] = r.NextHopType + "/" + r.InstanceId + " " + r.Status
	}
	return out
}

// addForeign creates an entry as someone else would and waits until it is
// Available.
func (e *env) addForeign(dst, hopType, hop string) {
	e.t.Helper()
	e.mu.Lock()
	req := vpc.CreateCreateRouteEntryRequest()
	req.RouteTableId, req.DestinationCidrBlock, req.NextHopType, req.NextHopId = table, dst, hopType, hop
	_, err := e.vpc.CreateRouteEntry(req)
	e.mu.Unlock()
	if err != nil {
		e.t.Fatalf("create foreign entry %s: %v", dst, err)
	}
	testwait.For(e.t, 20*time.Second, "foreign entry "+dst, func() error {
		if got := e.goRoutes()[dst]; got != hopType+"/"+hop {
			return fmt.Errorf("foreign entry %s is %q", dst, got)
		}
		return nil
	})
}

// controller is a controller for the env's cloud, with faults added first,
// and a context for its calls that ends with the test.
func (e *env) controller(faults ...fakecloud.Fault) (*routectl.Controller, context.Context) {
	e.t.Helper()
	for _, f := range faults {
		if _, err := e.cloud.AddFault(f); err != nil {
			e.t.Fatal(err)
		}
	}
	c, err := routectl.New(e.options(nil))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return c, ctx
}

// routesAre is a condition: the Go API's view equals want (custom
// entries, Available) and the SDK's view shows the same entries, all
// Available.
func (e *env) routesAre(want map[string]string) func() error {
	return func() error {
		if got := e.goRoutes(); !maps.Equal(got, want) {
			return fmt.Errorf("Go API routes %v, want %v", got, want)
		}
		sdkWant := map[string]string{}
		for k, v := range want {
			sdkWant[k] = v + " Available"
		}
		if got := e.sdkRoutes(); !maps.Equal(got, sdkWant) {
			return fmt.Errorf("SDK routes %v, want %v", got, sdkWant)
		}
		return nil
	}
}

func (e *env) primaryENI(instance string) string {
	e.t.Helper()
	in, ok := e.cloud.Instance(instance)
	if !ok || len(in.ENIs) == 0 {
		e.t.Fatalf("instance %s has no primary ENI", instance)
	}
	return in.ENIs[0].ID
}

// TestRunFollowsNodes drives Run with a fake clientset: entries appear for
// nodes with podCIDRs, follow a changed CIDR, disappear with their node,
// a stale owned entry is removed, and foreign entries stay.
func TestRunFollowsNodes(t *testing.T) {
	e := newEnv(t, 50*time.Millisecond)
	e.addForeign("10.10.0.0/16", "Instance", inst3)                          // outside the cluster CIDR
	e.addForeign("172.20.200.0/24", "NetworkInterface", e.primaryENI(inst3)) // not to an instance
	e.addForeign("172.20.99.0/24", "Instance", inst3)                        // owned, but no node: stale
	foreign := map[string]string{
		"10.10.0.0/16":    "Instance/" + inst3,
		"172.20.200.0/24": "NetworkInterface/" + e.primaryENI(inst3),
	}
	with := func(m map[string]string) map[string]string {
		out := maps.Clone(foreign)
		maps.Copy(out, m)
		return out
	}

	unroutable := node("n-pending", inst3) // no podCIDR yet
	unroutable.Spec.ProviderID = ""
	kube := fake.NewClientset(
		node("n1", inst1, "172.20.1.0/24"),
		node("n2", inst2, "172.20.2.0/24"),
		unroutable,
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- routectl.Run(ctx, e.options(kube)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})

	testwait.For(e.t, 20*time.Second, "route table", e.routesAre(with(map[string]string{
		"172.20.1.0/24": "Instance/" + inst1,
		"172.20.2.0/24": "Instance/" + inst2,
	})))

	if err := kube.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete node: %v", err)
	}
	testwait.For(e.t, 20*time.Second, "route table", e.routesAre(with(map[string]string{"172.20.1.0/24": "Instance/" + inst1})))

	// A CIDR change (the API server forbids it, but a recreated node with
	// the same name looks the same to us) moves the entry.
	n1 := node("n1", inst1, "172.20.11.0/24")
	if _, err := kube.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update node: %v", err)
	}
	testwait.For(e.t, 20*time.Second, "route table", e.routesAre(with(map[string]string{"172.20.11.0/24": "Instance/" + inst1})))

	// The previously unroutable node gets its CIDR and provider ID.
	ready := node("n-pending", inst3, "172.20.3.0/24")
	if _, err := kube.CoreV1().Nodes().Update(ctx, ready, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update node: %v", err)
	}
	testwait.For(e.t, 20*time.Second, "route table", e.routesAre(with(map[string]string{
		"172.20.11.0/24": "Instance/" + inst1,
		"172.20.3.0/24":  "Instance/" + inst3,
	})))

	// Drift on the cloud side (an entry deleted behind our back) is
	// repaired by the periodic resync.
	e.mu.Lock()
	del := vpc.CreateDeleteRouteEntryRequest()
	del.RouteTableId, del.DestinationCidrBlock, del.NextHopId = table, "172.20.3.0/24", inst3
	_, err := e.vpc.DeleteRouteEntry(del)
	e.mu.Unlock()
	if err != nil {
		t.Fatalf("delete entry behind the controller's back: %v", err)
	}
	testwait.For(e.t, 20*time.Second, "route table", e.routesAre(with(map[string]string{
		"172.20.11.0/24": "Instance/" + inst1,
		"172.20.3.0/24":  "Instance/" + inst3,
	})))
}

// TestSyncRetriesThrottledCreate: the first CreateRouteEntry calls are
// throttled; Sync retries them with backoff and converges without
// duplicates.
func TestSyncRetriesThrottledCreate(t *testing.T) {
	e := newEnv(t, 20*time.Millisecond)
	c, ctx := e.controller(fakecloud.Fault{Name: "throttle", Kind: fakecloud.FaultError,
		Action: "CreateRouteEntry", Count: 3, Code: "Throttling.User"})
	nodes := []*corev1.Node{node("n1", inst1, "172.20.1.0/24"), node("n2", inst2, "172.20.2.0/24")}
	if err := c.Sync(ctx, nodes); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	// Sync returns after the entries are Available: no polling needed.
	if err := e.routesAre(map[string]string{
		"172.20.1.0/24": "Instance/" + inst1,
		"172.20.2.0/24": "Instance/" + inst2,
	})(); err != nil {
		t.Fatal(err)
	}
	throttled := e.cloud.CallCount(fakecloud.CallFilter{Action: "CreateRouteEntry", Outcome: "Throttling.User"})
	ok := e.cloud.CallCount(fakecloud.CallFilter{Action: "CreateRouteEntry", Outcome: fakecloud.OutcomeSuccess})
	if throttled != 3 || ok != 2 {
		t.Errorf("CreateRouteEntry: %d throttled, %d succeeded; want 3 and 2", throttled, ok)
	}
	// A second sync changes nothing.
	e.cloud.ResetCalls()
	if err := c.Sync(ctx, nodes); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	if n := e.cloud.CallCount(fakecloud.CallFilter{Action: "CreateRouteEntry"}) +
		e.cloud.CallCount(fakecloud.CallFilter{Action: "DeleteRouteEntry"}); n != 0 {
		t.Errorf("second sync made %d mutating calls, want 0", n)
	}
}

// TestSyncLostCreateAnswer: CreateRouteEntry is applied but its answer
// lost, then the retry fails too; the retry's ClientToken keeps it from
// creating twice, and the result is one Available entry.
func TestSyncLostCreateAnswer(t *testing.T) {
	e := newEnv(t, 20*time.Millisecond)
	c, ctx := e.controller(fakecloud.Fault{Name: "lost", Kind: fakecloud.FaultLostResponse,
		Action: "CreateRouteEntry", Count: 1})
	if err := c.Sync(ctx, []*corev1.Node{node("n1", inst1, "172.20.1.0/24")}); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := e.routesAre(map[string]string{"172.20.1.0/24": "Instance/" + inst1})(); err != nil {
		t.Fatal(err)
	}
}

// TestSyncFailsThenConverges: with CreateRouteEntry failing more often
// than one sync retries, Sync reports the exhaustion; the next sync after
// the fault is spent converges.
func TestSyncFailsThenConverges(t *testing.T) {
	e := newEnv(t, 20*time.Millisecond)
	c, ctx := e.controller(fakecloud.Fault{Name: "broken", Kind: fakecloud.FaultError,
		Action: "CreateRouteEntry", Count: 6, Code: "InternalError"})
	nodes := []*corev1.Node{node("n1", inst1, "172.20.1.0/24")}
	// PolicyAPI allows 1 + 4 attempts: five failures exhaust it.
	err := c.Sync(ctx, nodes)
	if !errors.Is(err, backoff.ErrExhausted) || !strings.Contains(err.Error(), "InternalError") {
		t.Fatalf("Sync with a broken CreateRouteEntry = %v, want exhaustion with InternalError", err)
	}
	if got := e.goRoutes(); len(got) != 0 {
		t.Fatalf("routes after a failed sync: %v", got)
	}
	if err := c.Sync(ctx, nodes); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	if err := e.routesAre(map[string]string{"172.20.1.0/24": "Instance/" + inst1})(); err != nil {
		t.Fatal(err)
	}
}

// TestRunRequeuesFailedSync: Run keeps retrying a sync that failed
// (workqueue rate limiting) until the cloud answers again.
func TestRunRequeuesFailedSync(t *testing.T) {
	e := newEnv(t, 20*time.Millisecond)
	if _, err := e.cloud.AddFault(fakecloud.Fault{Name: "throttle-many", Kind: fakecloud.FaultError,
		Action: "CreateRouteEntry", Count: 12, Code: "Throttling.User"}); err != nil {
		t.Fatal(err)
	}
	o := e.options(fake.NewClientset(node("n1", inst1, "172.20.1.0/24")))
	o.Resync = time.Hour // only the failure requeue can bring the retry
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- routectl.Run(ctx, o) }()
	testwait.For(e.t, 20*time.Second, "route table", e.routesAre(map[string]string{"172.20.1.0/24": "Instance/" + inst1}))
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := e.cloud.CallCount(fakecloud.CallFilter{Action: "CreateRouteEntry", Outcome: "Throttling.User"}); n != 12 {
		t.Errorf("%d throttled creates, want 12", n)
	}
}

// TestSyncDeletesPendingEntry: a node whose CIDR changes while its entry
// is still Pending: the delete is refused (IncorrectRouteEntryStatus)
// until the entry is Available, then goes through.
func TestSyncDeletesPendingEntry(t *testing.T) {
	e := newEnv(t, 300*time.Millisecond)
	e.mu.Lock()
	req := vpc.CreateCreateRouteEntryRequest()
	req.RouteTableId, req.DestinationCidrBlock, req.NextHopType, req.NextHopId = table, "172.20.7.0/24", "Instance", inst2
	_, err := e.vpc.CreateRouteEntry(req)
	e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	o := e.options(nil)
	o.Backoff = backoff.NewSet(nil, map[string]backoff.Policy{
		routectl.PolicyAPI:  {Duration: 50 * time.Millisecond, Factor: 1.2, Steps: 20},
		routectl.PolicyWait: {Duration: 20 * time.Millisecond, Factor: 1.5, Steps: 10, Cap: 100 * time.Millisecond},
	})
	c, err := routectl.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Sync(ctx, []*corev1.Node{node("n2", inst2, "172.20.2.0/24")}); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := e.routesAre(map[string]string{"172.20.2.0/24": "Instance/" + inst2})(); err != nil {
		t.Fatal(err)
	}
	if n := e.cloud.CallCount(fakecloud.CallFilter{Action: "DeleteRouteEntry", Outcome: "IncorrectRouteEntryStatus"}); n == 0 {
		t.Error("the delete never met the Pending entry; the test did not exercise what it claims")
	}
}

// TestNewRejectsIncompleteOptions checks the required options.
func TestNewRejectsIncompleteOptions(t *testing.T) {
	base := routectl.Options{Region: "cn-hangzhou", VpcID: "vpc-1", AccessKeyID: "a", AccessKeySecret: "s"}
	for name, mut := range map[string]func(*routectl.Options){
		"region": func(o *routectl.Options) { o.Region = "" },
		"vpc":    func(o *routectl.Options) { o.VpcID = "" },
		"key":    func(o *routectl.Options) { o.AccessKeySecret = "" },
		"url":    func(o *routectl.Options) { o.Endpoint = "ftp://x" },
	} {
		o := base
		mut(&o)
		if _, err := routectl.New(o); err == nil {
			t.Errorf("%s: New accepted incomplete options", name)
		}
	}
	if err := routectl.Run(context.Background(), base); err == nil || !strings.Contains(err.Error(), "Kubernetes client") {
		t.Errorf("Run without Kube = %v", err)
	}
}
