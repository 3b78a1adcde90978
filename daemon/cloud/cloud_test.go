package cloud

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/fakecloudtest"
	"github.com/terway-sim/terway/internal/noproxy"
)

const (
	testAK     = "LTAIdaemonTest"
	testSecret = "daemon-test-secret"
	node1      = "i-bp1lab0000000000001"
	vsw1       = "vsw-bp1lab0000000000001"
	vsw2       = "vsw-bp1lab0000000000002"
	sg         = fakecloud.DefaultSecurityGroup
)

func TestMain(m *testing.M) { noproxy.Main(m) }

// fastBackoff makes every policy short so tests wait milliseconds.
func fastBackoff() *backoff.Set {
	o := map[string]backoff.Policy{}
	for k, b := range backoff.Defaults() {
		o[k] = backoff.Policy{Duration: 5 * time.Millisecond, Factor: 1.2, Jitter: 0.1, Steps: max(b.Steps, 3)}
	}
	return backoff.NewSet(nil, o)
}

// world is a fakecloud plus a node's view of it.
type world struct {
	t     *testing.T
	cloud *fakecloud.Cloud
	api   *Client
	node  *Node
	mdURL string
}

type worldOpt func(*fakecloud.Spec, *fakecloud.Options, *Options)

func newWorld(t *testing.T, opts ...worldOpt) *world {
	t.Helper()
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSecret}}
	fo := fakecloud.Options{Seed: 7, TimeScale: 0.01} // default delays and lag, 100× faster
	co := Options{RegionID: fakecloud.DefaultRegion, Backoff: fastBackoff(),
		Credentials: credentials.NewStaticAKCredentialsProvider(testAK, testSecret)}
	for _, o := range opts {
		o(&spec, &fo, &co)
	}
	fo.Spec = &spec
	fc := fakecloudtest.Start(t, fo, node1)
	md := fc.Metadata
	co.ECSEndpoint, co.VPCEndpoint = fc.API.URL, fc.API.URL
	cl, err := New(co)
	if err != nil {
		t.Fatal(err)
	}
	meta := NewMetadata(md.URL, md.Client(), nil, fastBackoff(), nil)
	inst, err := meta.Instance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, cloud: fc.Cloud, api: cl, node: &Node{API: cl, Metadata: meta, Instance: inst, MetadataTimeout: 5 * time.Second}, mdURL: md.URL}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func secondaries(c *fakecloud.Cloud) []fakecloud.ENIView {
	var out []fakecloud.ENIView
	for _, e := range c.ENIs() {
		if e.Type != fakecloud.ENITypePrimary {
			out = append(out, e)
		}
	}
	return out
}

func TestMetadataIdentity(t *testing.T) {
	w := newWorld(t)
	in := w.node.Instance
	if in.ID != node1 || in.RegionID != "cn-hangzhou" || in.ZoneID != "cn-hangzhou-h" || in.VSwitchID != vsw1 ||
		in.InstanceType != "ecs.g7.xlarge" || in.VPCID != fakecloud.DefaultVPCID || in.PrimaryMAC == "" {
		t.Fatalf("instance: %+v", in)
	}
	macs, err := w.node.Metadata.MACs(ctx(t))
	if err != nil || len(macs) != 1 || macs[0] != in.PrimaryMAC {
		t.Fatalf("macs %v %v", macs, err)
	}
	e, err := w.node.Metadata.ENI(ctx(t), in.PrimaryMAC)
	if err != nil || e.Gateway.String() != "192.168.0.253" || e.CIDR.String() != "192.168.0.0/24" || len(e.IPv4) != 1 ||
		e.CIDR6.String() != "fd00:192:168::/64" {
		t.Fatalf("eni meta %+v %v", e, err)
	}
	if _, err := w.node.Metadata.Get(ctx(t), "no/such/path"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing path: %v", err)
	}
}

func TestMetadataTokenModes(t *testing.T) {
	// Required tokens: the client must use the token flow.
	w := newWorld(t, func(s *fakecloud.Spec, _ *fakecloud.Options, _ *Options) { s.Instances[0].MetadataTokens = "required" })
	if _, err := w.node.Metadata.Instance(ctx(t)); err != nil {
		t.Fatalf("required-token metadata: %v", err)
	}
	// A service without the token flow: the client falls back.
	var gets int
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			http.NotFound(rw, r)
			return
		}
		gets++
		if r.Header.Get(metadataTokenHeader) != "" {
			t.Errorf("token sent to a tokenless service")
		}
		_, _ = rw.Write([]byte("i-legacy"))
	}))
	defer srv.Close()
	m := NewMetadata(srv.URL, srv.Client(), nil, fastBackoff(), nil)
	if v, err := m.value(ctx(t), "instance-id"); err != nil || v != "i-legacy" {
		t.Fatalf("tokenless: %q %v", v, err)
	}
	// 500s are retried, then reported.
	var calls int
	bad := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			_, _ = rw.Write([]byte("tok"))
			return
		}
		calls++
		http.Error(rw, "boom", 500)
	}))
	defer bad.Close()
	m = NewMetadata(bad.URL, bad.Client(), nil, fastBackoff(), nil)
	if _, err := m.Get(ctx(t), "instance-id"); err == nil || calls < 2 {
		t.Fatalf("500s: %d calls, err %v", calls, err)
	}
}

func TestRAMRoleCredentials(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	w := newWorld(t, func(s *fakecloud.Spec, o *fakecloud.Options, _ *Options) {
		s.AccessKeys = nil
		s.Settings.STSLifetime = fakecloud.Duration(time.Hour)
		o.Clock = clk
	})
	md := NewMetadata(w.mdURL, nil, clk, fastBackoff(), nil)
	prov, name, err := NewCredentials(CredentialSource{}, md, clk)
	if err != nil || name != "instance RAM role" {
		t.Fatalf("provider %q: %v", name, err)
	}
	api, err := New(Options{RegionID: "cn-hangzhou", Credentials: prov, ECSEndpoint: "http://" + hostOf(t, w), VPCEndpoint: "http://" + hostOf(t, w), Backoff: fastBackoff()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.DescribeENIs(ctx(t), ENIFilter{InstanceID: node1}); err != nil {
		t.Fatalf("call with RAM-role credentials: %v", err)
	}
	first, _ := prov.GetCredentials()
	// 50 minutes later the credentials are within 15 minutes of expiry:
	// the provider renews them before the cloud would refuse them.
	clk.Step(50 * time.Minute)
	second, err := prov.GetCredentials()
	if err != nil || second.AccessKeyId == first.AccessKeyId {
		t.Fatalf("not renewed before expiry: %v", err)
	}
	if n := w.cloud.CallCount(fakecloud.CallFilter{InstanceID: node1}); n != 1 {
		t.Fatalf("calls attributed to the instance: %d", n)
	}
}

func hostOf(t *testing.T, w *world) string {
	t.Helper()
	return w.api.ecsEP.host
}

func TestCredentialFile(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.json")
	if err := os.WriteFile(plain, []byte(`{"access.key.id":"ak","access.key.secret":"sk","security.token":"tok","expiration":"2099-01-01T00:00:00Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	prov, _, err := NewCredentials(CredentialSource{CredentialPath: plain}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := prov.GetCredentials()
	if err != nil || c.AccessKeyId != "ak" || c.SecurityToken != "tok" {
		t.Fatalf("plain file: %+v %v", c, err)
	}
	// Terway's encrypted form.
	key := "0123456789abcdef"
	enc := func(s string) string {
		block, _ := aes.NewCipher([]byte(key))
		pad := aes.BlockSize - len(s)%aes.BlockSize
		b := append([]byte(s), make([]byte, pad)...)
		for i := len(s); i < len(b); i++ {
			b[i] = byte(pad)
		}
		iv := []byte("fedcba9876543210")
		out := make([]byte, len(b))
		cipher.NewCBCEncrypter(block, iv).CryptBlocks(out, b)
		return base64.StdEncoding.EncodeToString(append(iv, out...))
	}
	sealed := filepath.Join(dir, "sealed.json")
	body := `{"access.key.id":"` + enc("akE") + `","access.key.secret":"` + enc("skE") + `","security.token":"` + enc("tokE") + `","keyring":"` + key + `"}`
	if err := os.WriteFile(sealed, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	prov, _, _ = NewCredentials(CredentialSource{CredentialPath: sealed}, nil, nil)
	if c, err := prov.GetCredentials(); err != nil || c.AccessKeyId != "akE" || c.AccessKeySecret != "skE" || c.SecurityToken != "tokE" {
		t.Fatalf("encrypted file: %+v %v", c, err)
	}
	if _, _, err := NewCredentials(CredentialSource{AccessKeyID: "only-id"}, nil, nil); err == nil {
		t.Fatal("half an access key accepted")
	}
}

func TestAllocateAndReleaseENI(t *testing.T) {
	w := newWorld(t)
	tags := map[string]string{"creator": "terway", "terway.alibabacloud.com/instance-id": node1}
	r, err := w.node.AllocateENI(ctx(t), CreateENIRequest{IntentKey: "t1", VSwitchID: vsw1, SecurityGroups: []string{sg},
		SecondaryIPv4: 3, IPv6: 2, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusInUse || r.InstanceID != node1 || len(r.IPv4) != 3 || len(r.IPv6) != 2 || r.Tags["creator"] != "terway" {
		t.Fatalf("allocated: %+v", r.ENI)
	}
	if r.Meta.ID != r.ID || len(r.Meta.IPv4) != 4 || len(r.Meta.IPv6) != 2 || r.Meta.Gateway.String() != "192.168.0.253" {
		t.Fatalf("metadata view: %+v", r.Meta)
	}
	more, err := w.node.AssignIPv4(ctx(t), "t2", r.Meta, 2)
	if err != nil || len(more) != 2 {
		t.Fatalf("assign: %v %v", more, err)
	}
	if err := w.api.UnassignIPv4(ctx(t), r.ID, more); err != nil {
		t.Fatal(err)
	}
	if err := w.node.WaitAddressesGone(ctx(t), r.MAC, more); err != nil {
		t.Fatal(err)
	}
	if err := w.api.UnassignIPv4(ctx(t), r.ID, more); err != nil {
		t.Fatalf("unassign twice must succeed: %v", err)
	}
	if err := w.node.ReleaseENI(ctx(t), r.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(secondaries(w.cloud)); n != 0 {
		t.Fatalf("%d ENIs left", n)
	}
	if err := w.node.ReleaseENI(ctx(t), r.ID); err != nil {
		t.Fatalf("release twice must succeed: %v", err)
	}
}

func TestAllocateRollsBack(t *testing.T) {
	w := newWorld(t)
	if _, err := w.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultError, Action: "AttachNetworkInterface",
		Code: "InvalidOperation.InvalidEcsState", Status: 400}); err != nil {
		t.Fatal(err)
	}
	_, err := w.node.AllocateENI(ctx(t), CreateENIRequest{IntentKey: "rb", VSwitchID: vsw1, SecurityGroups: []string{sg}})
	if err == nil || ErrorCode(err) != "InvalidOperation.InvalidEcsState" {
		t.Fatalf("attach failure: %v", err)
	}
	if n := len(secondaries(w.cloud)); n != 0 {
		t.Fatalf("rollback left %d ENIs", n)
	}
}

// An attach that metadata never confirms (metadata stuck on an older view)
// is asked about through the API, reported as such and rolled back.
func TestAllocateMetadataNeverShowsTheENI(t *testing.T) {
	w := newWorld(t)
	w.node.MetadataTimeout = 500 * time.Millisecond
	if _, err := w.cloud.AddFault(fakecloud.Fault{Service: fakecloud.ServiceMetadata, Kind: fakecloud.FaultStale,
		Caller: node1, Action: "meta-data/network/"}); err != nil {
		t.Fatal(err)
	}
	_, err := w.node.AllocateENI(ctx(t), CreateENIRequest{IntentKey: "stale", VSwitchID: vsw1, SecurityGroups: []string{sg}})
	if err == nil || !strings.Contains(err.Error(), "InUse but metadata does not show it") || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("attach metadata never shows: %v", err)
	}
	if n := w.cloud.CallCount(fakecloud.CallFilter{Action: "DescribeNetworkInterfaceAttribute"}); n == 0 {
		t.Error("no Describe: the API was not asked why metadata does not show the ENI")
	}
	if n := len(secondaries(w.cloud)); n != 0 {
		t.Fatalf("rollback left %d ENIs", n)
	}
}

// TestCreateRetryReusesToken loses the answer to a Create: the retry with
// the same ClientToken gets the same ENI instead of a second one.
func TestCreateRetryReusesToken(t *testing.T) {
	w := newWorld(t)
	if _, err := w.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultLostResponse, Action: "CreateNetworkInterface", Count: 1}); err != nil {
		t.Fatal(err)
	}
	e, err := w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: "lost", VSwitchID: vsw1, SecurityGroups: []string{sg}, SecondaryIPv4: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := secondaries(w.cloud); len(got) != 1 || got[0].ID != e.ID {
		t.Fatalf("ENIs after a lost answer and a retry: %+v (answer %s)", got, e.ID)
	}
	if n := w.cloud.CallCount(fakecloud.CallFilter{Action: "CreateNetworkInterface"}); n != 2 {
		t.Fatalf("%d create calls, want 2", n)
	}
	if _, ok, _ := w.api.journal.Intent("lost"); ok {
		t.Fatal("intent kept after success")
	}
}

func TestRetriesOnlyRetryable(t *testing.T) {
	w := newWorld(t)
	e, err := w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: "r", VSwitchID: vsw1, SecurityGroups: []string{sg}})
	if err != nil {
		t.Fatal(err)
	}
	// Two InternalErrors are retried through.
	_, _ = w.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultError, Action: "AssignPrivateIpAddresses", Count: 2})
	if ips, err := w.api.AssignIPv4(ctx(t), "a1", e.ID, 2); err != nil || len(ips) != 2 {
		t.Fatalf("after transient errors: %v %v", ips, err)
	}
	w.cloud.ClearFaults()
	// An answer that will not change is not retried.
	before := w.cloud.CallCount(fakecloud.CallFilter{Action: "AssignPrivateIpAddresses"})
	if _, err := w.api.AssignIPv4(ctx(t), "a2", "eni-bp1nothere", 1); !IsNotFound(err) {
		t.Fatalf("unknown ENI: %v", err)
	}
	if n := w.cloud.CallCount(fakecloud.CallFilter{Action: "AssignPrivateIpAddresses"}) - before; n != 1 {
		t.Fatalf("a final answer was retried: %d calls", n)
	}
}

func TestDegradation(t *testing.T) {
	w := newWorld(t)
	w.api.SetDegradation(DegradationNoMutation)
	_, err := w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: "d", VSwitchID: vsw1, SecurityGroups: []string{sg}})
	if !errors.Is(err, ErrDegraded) {
		t.Fatalf("create while degraded: %v", err)
	}
	if _, err := w.api.DescribeENIs(ctx(t), ENIFilter{InstanceID: node1}); err != nil {
		t.Fatalf("reads continue while degraded: %v", err)
	}
	w.api.SetDegradation(DegradationNoRelease)
	e, err := w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: "d2", VSwitchID: vsw1, SecurityGroups: []string{sg}})
	if err != nil {
		t.Fatalf("allocation under no_release: %v", err)
	}
	if err := w.api.DeleteENI(ctx(t), e.ID); !errors.Is(err, ErrDegraded) {
		t.Fatalf("delete under no_release: %v", err)
	}
	if n := w.cloud.CallCount(fakecloud.CallFilter{Action: "DeleteNetworkInterface"}); n != 0 {
		t.Fatalf("degraded calls reached the cloud: %d", n)
	}
}

// TestThrottlingSlowsDown gives the account a tiny budget: calls are
// retried after Throttling, the client's limiter slows down, and every
// call still completes.
func TestThrottlingSlowsDown(t *testing.T) {
	w := newWorld(t, func(s *fakecloud.Spec, _ *fakecloud.Options, o *Options) {
		s.Settings.Throttle = map[string]int{"*": 0, "DescribeNetworkInterfaces": 5}
		s.Settings.ThrottleWindow = fakecloud.Duration(200 * time.Millisecond)
		o.ThrottleWindow = 200 * time.Millisecond
		o.Backoff = backoff.NewSet(nil, map[string]backoff.Policy{"": {Duration: 50 * time.Millisecond, Factor: 1.5, Steps: 10}})
	})
	lim := w.api.limits.get("DescribeNetworkInterfaces")
	base := lim.lim.Limit()
	for i := 0; i < 12; i++ {
		if _, err := w.api.DescribeENIs(ctx(t), ENIFilter{InstanceID: node1}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := w.cloud.CallCount(fakecloud.CallFilter{Action: "DescribeNetworkInterfaces", Outcome: "Throttling.User"}); n == 0 {
		t.Fatal("the budget never throttled")
	}
	if lim.lim.Limit() >= base {
		t.Fatalf("limiter did not slow down: %v (base %v)", lim.lim.Limit(), base)
	}
}

func TestConcurrentCallsShareNothing(t *testing.T) {
	w := newWorld(t)
	e, err := w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: "c", VSwitchID: vsw1, SecurityGroups: []string{sg}})
	if err != nil {
		t.Fatal(err)
	}
	// A new ENI is missing from Describe for the consistency window.
	if _, err := w.api.WaitENIStatus(ctx(t), e.ID, StatusAvailable); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				_, err := w.api.DescribeENIs(ctx(t), ENIFilter{IDs: []string{e.ID}})
				if err != nil {
					t.Error(err)
				}
				return
			}
			if _, err := w.api.DescribeENI(ctx(t), e.ID); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func TestVSwitchPoolExhaustionAndRecovery(t *testing.T) {
	w := newWorld(t, func(s *fakecloud.Spec, _ *fakecloud.Options, _ *Options) {
		s.VSwitches[0].CIDR = "192.168.0.0/29" // 4 usable, eth0 takes one
	})
	// The block's expiry is the subject: the pool runs on a fake clock.
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	p, err := NewVSwitchPool(w.api, clk, SelectMostFree, []string{vsw1}, time.Hour, 50*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.Pick(ctx(t))
	if err != nil || v.ID != vsw1 || v.Available != 3 {
		t.Fatalf("pick: %+v %v", v, err)
	}
	e, err := w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: "x", VSwitchID: vsw1, SecurityGroups: []string{sg}, SecondaryIPv4: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.api.AssignIPv4(ctx(t), "y", e.ID, 1)
	if !IsExhausted(err) {
		t.Fatalf("dry vSwitch: %v", err)
	}
	p.Block(vsw1)
	if _, err := p.Pick(ctx(t)); !errors.Is(err, ErrNoVSwitch) {
		t.Fatalf("blocked pick: %v", err)
	}
	// The block expires by itself and a fresh Describe is consulted.
	if err := w.api.UnassignIPv4(ctx(t), e.ID, e.IPv4[:1]); err != nil {
		t.Fatal(err)
	}
	clk.Step(50*time.Millisecond - time.Nanosecond)
	if _, err := p.Pick(ctx(t)); !errors.Is(err, ErrNoVSwitch) {
		t.Fatalf("pick 1ns before the block expires: %v", err)
	}
	clk.Step(time.Nanosecond)
	if v, err := p.Pick(ctx(t)); err != nil || v.Available != 1 {
		t.Fatalf("after the block expired: %+v %v", v, err)
	}
	// Released() unblocks at once.
	p.Block(vsw1)
	p.Released(vsw1)
	if _, err := p.Pick(ctx(t)); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// TestVSwitchPoolDryAnswerRechecked: a Describe that shows a vSwitch dry
// is trusted for DryRecheck only, not the cache's whole TTL: addresses
// that come back (here an ENI released elsewhere) are seen soon.
func TestVSwitchPoolDryAnswerRechecked(t *testing.T) {
	w := newWorld(t, func(s *fakecloud.Spec, _ *fakecloud.Options, _ *Options) {
		s.VSwitches[0].CIDR = "192.168.0.0/29" // 4 usable, eth0 takes one
	})
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	p, err := NewVSwitchPool(w.api, clk, SelectMostFree, []string{vsw1}, time.Hour, time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	e, err := w.api.CreateENI(ctx(t), CreateENIRequest{IntentKey: "x", VSwitchID: vsw1, SecurityGroups: []string{sg}, SecondaryIPv4: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pick(ctx(t)); !errors.Is(err, ErrNoVSwitch) {
		t.Fatalf("pick on a dry vSwitch: %v", err)
	}
	if err := w.api.DeleteENI(ctx(t), e.ID); err != nil {
		t.Fatal(err)
	}
	clk.Step(DryRecheck - time.Nanosecond)
	if _, err := p.Pick(ctx(t)); !errors.Is(err, ErrNoVSwitch) {
		t.Fatalf("pick 1ns before the dry answer is rechecked: %v", err)
	}
	clk.Step(time.Nanosecond)
	if v, err := p.Pick(ctx(t)); err != nil || v.Available != 3 {
		t.Fatalf("pick once the dry answer is rechecked: %+v %v (the cache's TTL is an hour)", v, err)
	}
}

func TestInstanceLimitsCached(t *testing.T) {
	w := newWorld(t)
	var info []byte
	for i := 0; i < 3; i++ {
		l, in, err := w.api.InstanceTypeLimits(ctx(t), "ecs.g7.xlarge")
		if err != nil || l.Adapters != 4 || l.IPv4PerAdapter != 15 || l.MaxPodsENIMultiIP() != 45 || !l.SupportIPv6() {
			t.Fatalf("limits %+v %v", l, err)
		}
		info = in
	}
	if n := w.cloud.CallCount(fakecloud.CallFilter{Action: "DescribeInstanceTypes"}); n != 1 {
		t.Fatalf("%d DescribeInstanceTypes calls, want 1", n)
	}
	// What the store and the node annotation keep reads back the same,
	// for this type only.
	want, _, _ := w.api.InstanceTypeLimits(ctx(t), "ecs.g7.xlarge")
	if got, err := LimitsFromInfo(info, "ecs.g7.xlarge"); err != nil || got != want {
		t.Fatalf("limits read back from %s: %+v %v, want %+v", info, got, err, want)
	}
	for _, bad := range []struct{ info, typ string }{
		{string(info), "ecs.g7.2xlarge"}, // the instance was resized
		{`{"InstanceTypeId":"ecs.g7.xlarge","EniQuantity":0,"EniPrivateIpAddressQuantity":15}`, "ecs.g7.xlarge"},
		{`{"InstanceTypeId":`, "ecs.g7.xlarge"},
	} {
		if l, err := LimitsFromInfo([]byte(bad.info), bad.typ); err == nil {
			t.Errorf("LimitsFromInfo(%s, %s) = %+v, want an error", bad.info, bad.typ, l)
		}
	}
	sgs, err := w.api.SecurityGroupsOfInstance(ctx(t), node1)
	if err != nil || len(sgs) != 1 || sgs[0] != sg {
		t.Fatalf("security groups %v %v", sgs, err)
	}
}

// Picks that miss the cache together share one DescribeVSwitches (a node
// creating two ENIs at once asked twice); a Describe the cloud throttles
// leaves the vSwitch usable, the Create being what says whether it has
// addresses.
func TestVSwitchPoolOneDescribeAndThrottled(t *testing.T) {
	w := newWorld(t)
	hold, err := w.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultPause, Action: "DescribeVSwitches"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewVSwitchPool(w.api, clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)), SelectMostFree, []string{vsw1}, time.Hour, time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() { _, err := p.Pick(ctx(t)); errs <- err }()
	}
	t.Cleanup(func() { w.cloud.RemoveFault(hold) })
	if err := w.cloud.WaitHeld(ctx(t), hold, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the other picks reach the pool
	w.cloud.RemoveFault(hold)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := w.cloud.CallCount(fakecloud.CallFilter{Action: "DescribeVSwitches"}); n != 1 {
		t.Fatalf("%d DescribeVSwitches for 4 picks at once, want 1", n)
	}

	w2 := newWorld(t)
	if _, err := w2.cloud.AddFault(fakecloud.Fault{Kind: fakecloud.FaultError, Action: "DescribeVSwitches",
		Code: "Throttling.User", Status: 400}); err != nil {
		t.Fatal(err)
	}
	p2, err := NewVSwitchPool(w2.api, nil, SelectMostFree, []string{vsw1}, time.Hour, time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := p2.Pick(ctx(t)); err != nil || v.ID != vsw1 {
		t.Fatalf("pick while Describe is throttled: %+v %v, want %s", v, err, vsw1)
	}
}

// throttledWorld allows one DescribeNetworkInterfaces per window of the
// given length, a window the client knows, and retries within
// milliseconds otherwise.
func throttledWorld(t *testing.T, window time.Duration) *world {
	t.Helper()
	return newWorld(t, func(s *fakecloud.Spec, _ *fakecloud.Options, o *Options) {
		s.Settings.Throttle = map[string]int{"*": 0, "DescribeNetworkInterfaces": 1}
		s.Settings.ThrottleWindow = fakecloud.Duration(window)
		o.ThrottleWindow = window
		o.Backoff = backoff.NewSet(nil, map[string]backoff.Policy{"": {Duration: time.Millisecond, Steps: 3}})
	})
}

// A throttled answer says when the next window opens, on the cloud's
// window boundaries; the client's own retry waits for it instead of
// retrying into refusals, and the wait is jittered over the window's
// first sixtieth. The answer is still the SDK's error underneath.
func TestThrottledCallWaitsForTheNextWindow(t *testing.T) {
	const window = 600 * time.Millisecond
	w := throttledWorld(t, window)
	throttledCalls := func() int64 {
		return w.cloud.CallCount(fakecloud.CallFilter{Action: "DescribeNetworkInterfaces", Outcome: "Throttling.User"})
	}
	for i := 0; i < 3; i++ { // the first call of a window passes, the second waits for the next
		start := time.Now()
		if _, err := w.api.DescribeENIs(ctx(t), ENIFilter{InstanceID: node1}); err != nil {
			t.Fatal(err)
		}
		if n := throttledCalls(); n > 0 {
			next := time.Unix(0, (start.UnixNano()/int64(window)+1)*int64(window))
			if took := time.Since(start); n != 1 || took < next.Sub(start) {
				t.Fatalf("a throttled call: %d refusals, took %v; want one refusal and a wait until the window at +%v", n, took, next.Sub(start))
			}
			break
		}
	}
	if throttledCalls() == 0 {
		t.Fatal("the budget never throttled")
	}

	now := time.Date(2026, 12, 6, 12, 0, 30, 500e6, time.UTC)
	se := sdkerrors.NewServerError(400, `{"Code":"Throttling.User"}`, "")
	err := error(throttled(se, now, time.Minute))
	var te *ThrottledError
	if !errors.As(err, &te) || !IsThrottling(err) || ErrorCode(err) != "Throttling.User" || err.Error() != se.Error() {
		t.Fatalf("wrapped answer %v: not a throttle of the SDK's error", err)
	}
	if want := time.Date(2026, 12, 6, 12, 1, 0, 0, time.UTC); !te.Until.Equal(want) {
		t.Errorf("next window %v, want %v", te.Until, want)
	}
	for range 20 {
		if d, ok := ThrottleWait(err, now); !ok || d < 29500*time.Millisecond || d >= 30500*time.Millisecond {
			t.Fatalf("ThrottleWait %v, %v: want [29.5s, 30.5s)", d, ok)
		}
	}
	if _, ok := ThrottleWait(se, now); ok {
		t.Error("ThrottleWait knows a window for an answer the client did not wrap")
	}
}

// A throttled call whose caller's deadline comes before the next window
// does not wait for it: the caller keeps its time for what follows (a
// rollback), and gets the throttle at once.
func TestThrottledCallGivesUpBeforeTheDeadline(t *testing.T) {
	const window = 2 * time.Second
	w := throttledWorld(t, window)
	// Start early in a window, so that the next one is well past the deadline.
	time.Sleep(time.Until(time.Unix(0, (time.Now().UnixNano()/int64(window)+1)*int64(window))))
	if _, err := w.api.DescribeENIs(ctx(t), ENIFilter{InstanceID: node1}); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := w.api.DescribeENIs(c, ENIFilter{InstanceID: node1})
	var te *ThrottledError
	if !errors.As(err, &te) {
		t.Fatalf("second call in the window: %v, want the throttle", err)
	}
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Errorf("took %v: waited for a window past the deadline", took)
	}
}
