package fakecloud_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	openapi "github.com/alibabacloud-go/darabonba-openapi/v2/client"
	ecs "github.com/alibabacloud-go/ecs-20140526/v7/client"
	"github.com/alibabacloud-go/tea/tea"
	vpc "github.com/alibabacloud-go/vpc-20160428/v6/client"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

// Tests that drive fakecloud through the Tea (darabonba) SDKs, the ones
// Alibaba recommends for new code: ACS3-HMAC-SHA256 header signing by
// default, HMAC-SHA1 query signing with SignatureAlgorithm "v2", pointer
// models decoded case-sensitively, *tea.SDKError for API errors.
//
// Concurrency: a Tea client is not safe for concurrent use
// (aliyun-wire.md §5.6), and one client per goroutine is not enough either.
// Unless Config.HttpClient is set, tea v1.3.13 (dara/core.go DoRequest)
// sends through a process-wide *http.Client pooled by endpoint and runtime
// options, and rewrites its Timeout on every call while other calls read
// it: clients for the same endpoint race under -race. Goroutines therefore
// give their clients their own HTTP client (newTeaHTTPClient).

const (
	teaReadTimeoutMS = 10000 // http.Client.Timeout, milliseconds
	// teaConnectTimeout is in SECONDS: tea v1.3.13 dara/core.go
	// setDialContext multiplies ConnectTimeout by time.Second (only the
	// SOCKS5 path uses milliseconds), so the customary 5000 would be a
	// dial timeout of 83 minutes. The read timeout above bounds the whole
	// call anyway.
	teaConnectTimeout = 5
)

// TestTeaConnectTimeoutUnits pins the tea version whose ConnectTimeout
// unit teaConnectTimeout assumes: tea v1.5.x reads it as milliseconds (and
// adds it to the read timeout), so an upgrade must revisit the constant.
// (Test binaries carry no dependency build info, hence go.mod.)
func TestTeaConnectTimeoutUnits(t *testing.T) {
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatalf("read go.mod: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "require" {
			f = f[1:]
		}
		if len(f) < 2 || f[0] != "github.com/alibabacloud-go/tea" {
			continue
		}
		if f[1] != "v1.3.13" {
			t.Fatalf("tea is %s, not v1.3.13: check the unit of ConnectTimeout in dara/core.go setDialContext and adjust teaConnectTimeout", f[1])
		}
		return
	}
	t.Fatal("go.mod does not require github.com/alibabacloud-go/tea")
}

// teaConfig is an openapi config pointed at the emulator.
func (e *env) teaConfig(ak, secret string) *openapi.Config {
	return &openapi.Config{
		AccessKeyId:     tea.String(ak),
		AccessKeySecret: tea.String(secret),
		RegionId:        tea.String(fakecloud.DefaultRegion),
		Endpoint:        tea.String(e.host()),
		Protocol:        tea.String("http"),
		ReadTimeout:     tea.Int(teaReadTimeoutMS),
		ConnectTimeout:  tea.Int(teaConnectTimeout),
	}
}

func (e *env) teaECSWith(cfg *openapi.Config) *ecs.Client {
	e.t.Helper()
	c, err := ecs.NewClient(cfg)
	if err != nil {
		e.t.Fatalf("tea ecs client: %v", err)
	}
	return c
}

// teaECS returns a new Tea ECS client with the test key (default signing)
// using the SDK's pooled HTTP client; not for concurrent goroutines.
func (e *env) teaECS() *ecs.Client { return e.teaECSWith(e.teaConfig(testAK, testSecret)) }

// teaECSOwnHTTP returns a Tea ECS client with an HTTP client of its own,
// which one goroutine may use while others use theirs.
func (e *env) teaECSOwnHTTP() *ecs.Client {
	cfg := e.teaConfig(testAK, testSecret)
	cfg.HttpClient = newTeaHTTPClient(e.t)
	return e.teaECSWith(cfg)
}

// teaHTTPClient is a dara.HttpClient owned by one SDK client. It applies
// the same timeouts as teaConfig and ignores the per-call transport dara
// builds (a fresh one per call, which would defeat connection reuse).
type teaHTTPClient struct{ c *http.Client }

func newTeaHTTPClient(t *testing.T) *teaHTTPClient {
	tr := &http.Transport{
		DialContext: (&net.Dialer{Timeout: teaConnectTimeout * time.Second}).DialContext,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &teaHTTPClient{c: &http.Client{Transport: tr, Timeout: teaReadTimeoutMS * time.Millisecond}}
}

func (h *teaHTTPClient) Call(req *http.Request, _ *http.Transport) (*http.Response, error) {
	return h.c.Do(req)
}

func (e *env) teaVPC() *vpc.Client {
	e.t.Helper()
	c, err := vpc.NewClient(e.teaConfig(testAK, testSecret))
	if err != nil {
		e.t.Fatalf("tea vpc client: %v", err)
	}
	return c
}

// teaErr returns err as the SDK's error type, failing on anything else.
func teaErr(t *testing.T, err error) *tea.SDKError {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error, got success")
	}
	var se *tea.SDKError
	if !errors.As(err, &se) {
		t.Fatalf("not a *tea.SDKError: %T %v", err, err)
	}
	return se
}

func wantTeaErr(t *testing.T, err error, status int, code string) *tea.SDKError {
	t.Helper()
	se := teaErr(t, err)
	if tea.IntValue(se.StatusCode) != status || tea.StringValue(se.Code) != code {
		t.Fatalf("got HTTP %d %q (%s), want HTTP %d %q", tea.IntValue(se.StatusCode), tea.StringValue(se.Code),
			tea.StringValue(se.Message), status, code)
	}
	return se
}

func strs(p []*string) []string {
	out := make([]string, len(p))
	for i, s := range p {
		out[i] = tea.StringValue(s)
	}
	return out
}

// teaCreateENI creates an ENI on vsw1 with the default security group.
func teaCreateENI(t *testing.T, c *ecs.Client, secondaries int32, tags map[string]string) *ecs.CreateNetworkInterfaceResponseBody {
	t.Helper()
	return teaCreateENIWith(t, c, secondaries, tags, nil)
}

func teaCreateENIWith(t *testing.T, c *ecs.Client, secondaries int32, tags map[string]string, mod func(*ecs.CreateNetworkInterfaceRequest)) *ecs.CreateNetworkInterfaceResponseBody {
	t.Helper()
	req := &ecs.CreateNetworkInterfaceRequest{
		RegionId:         tea.String(fakecloud.DefaultRegion),
		VSwitchId:        tea.String(vsw1),
		SecurityGroupIds: tea.StringSlice([]string{sg}),
	}
	if secondaries > 0 {
		req.SecondaryPrivateIpAddressCount = tea.Int32(secondaries)
	}
	for k, v := range tags {
		req.Tag = append(req.Tag, &ecs.CreateNetworkInterfaceRequestTag{Key: tea.String(k), Value: tea.String(v)})
	}
	if mod != nil {
		mod(req)
	}
	resp, err := c.CreateNetworkInterface(req)
	if err != nil {
		t.Fatalf("CreateNetworkInterface: %v", err)
	}
	if tea.Int32Value(resp.StatusCode) != 200 || resp.Body == nil {
		t.Fatalf("CreateNetworkInterface: status %d body %v", tea.Int32Value(resp.StatusCode), resp.Body)
	}
	return resp.Body
}

func teaDescribeENI(t *testing.T, c *ecs.Client, id string) *ecs.DescribeNetworkInterfacesResponseBodyNetworkInterfaceSetsNetworkInterfaceSet {
	t.Helper()
	resp, err := c.DescribeNetworkInterfaces(&ecs.DescribeNetworkInterfacesRequest{
		RegionId:           tea.String(fakecloud.DefaultRegion),
		NetworkInterfaceId: tea.StringSlice([]string{id}),
	})
	if err != nil {
		t.Fatalf("DescribeNetworkInterfaces %s: %v", id, err)
	}
	b := resp.Body
	if b == nil || b.NetworkInterfaceSets == nil || len(b.NetworkInterfaceSets.NetworkInterfaceSet) != 1 {
		t.Fatalf("DescribeNetworkInterfaces %s: want exactly one result, got %v", id, b)
	}
	return b.NetworkInterfaceSets.NetworkInterfaceSet[0]
}

var vsw1CIDR = netip.MustParsePrefix("192.168.0.0/24")

// inVSW1 parses a and checks it is a usable address of vsw1.
func inVSW1(t *testing.T, a string) netip.Addr {
	t.Helper()
	ip, err := netip.ParseAddr(a)
	if err != nil || !vsw1CIDR.Contains(ip) {
		t.Fatalf("address %q is not in %s", a, vsw1CIDR)
	}
	return ip
}

// TestTeaENILifecycle: create, attach, assign and describe with the
// default (ACS3-HMAC-SHA256) signing, checking the fields Terway reads.
func TestTeaENILifecycle(t *testing.T) {
	e := newEnv(t)
	c := e.teaECS()
	tags := map[string]string{"creator": "terway", "k8s.io/cluster": "c1"}
	// Characters the ACS3 canonical query escapes specially (space, "*",
	// "~", "+", "/", non-ASCII) exercise fakecloud's canonicalisation.
	const desc = "interface create by terway: a*b~c+d/e 网卡"
	b := teaCreateENIWith(t, c, 2, tags, func(r *ecs.CreateNetworkInterfaceRequest) { r.Description = tea.String(desc) })
	if d := tea.StringValue(b.Description); d != desc {
		t.Errorf("Description %q, want %q", d, desc)
	}

	id := tea.StringValue(b.NetworkInterfaceId)
	if !strings.HasPrefix(id, "eni-") {
		t.Fatalf("NetworkInterfaceId %q", id)
	}
	if tea.StringValue(b.RequestId) == "" {
		t.Error("RequestId is empty")
	}
	if s := tea.StringValue(b.Status); s != "Available" {
		t.Errorf("Status %q, want Available", s)
	}
	if typ := tea.StringValue(b.Type); typ != "Secondary" {
		t.Errorf("Type %q, want Secondary", typ)
	}
	if mac, err := net.ParseMAC(tea.StringValue(b.MacAddress)); err != nil || len(mac) != 6 {
		t.Errorf("MacAddress %q: %v", tea.StringValue(b.MacAddress), err)
	}
	if v := tea.StringValue(b.VSwitchId); v != vsw1 {
		t.Errorf("VSwitchId %q, want %s", v, vsw1)
	}
	if z := tea.StringValue(b.ZoneId); z != "cn-hangzhou-h" {
		t.Errorf("ZoneId %q, want cn-hangzhou-h", z)
	}
	if v := tea.StringValue(b.VpcId); v != fakecloud.DefaultVPCID {
		t.Errorf("VpcId %q, want %s", v, fakecloud.DefaultVPCID)
	}
	primary := inVSW1(t, tea.StringValue(b.PrivateIpAddress))
	if b.PrivateIpSets == nil || len(b.PrivateIpSets.PrivateIpSet) != 3 {
		t.Fatalf("PrivateIpSets: want primary + 2 secondaries, got %v", b.PrivateIpSets)
	}
	addrs := map[netip.Addr]bool{}
	primaries := 0
	for _, s := range b.PrivateIpSets.PrivateIpSet {
		a := inVSW1(t, tea.StringValue(s.PrivateIpAddress))
		if addrs[a] {
			t.Fatalf("address %s listed twice", a)
		}
		addrs[a] = true
		if s.Primary == nil {
			t.Fatalf("PrivateIpSet %s has no Primary flag", a)
		}
		if *s.Primary {
			primaries++
			if a != primary {
				t.Errorf("primary entry %s differs from PrivateIpAddress %s", a, primary)
			}
		}
	}
	if primaries != 1 {
		t.Errorf("%d primary entries, want 1", primaries)
	}
	if b.SecurityGroupIds == nil || !slices.Equal(strs(b.SecurityGroupIds.SecurityGroupId), []string{sg}) {
		t.Errorf("SecurityGroupIds %v, want [%s]", b.SecurityGroupIds, sg)
	}
	gotTags := map[string]string{}
	if b.Tags != nil {
		for _, tg := range b.Tags.Tag {
			gotTags[tea.StringValue(tg.TagKey)] = tea.StringValue(tg.TagValue)
		}
	}
	if fmt.Sprint(gotTags) != fmt.Sprint(tags) {
		t.Errorf("Tags %v, want %v", gotTags, tags)
	}
	// The response describes the world: the cloud holds the same ENI.
	view, ok := e.cloud.ENI(id)
	if !ok || view.MAC != tea.StringValue(b.MacAddress) || view.PrimaryIP != primary || len(view.IPv4) != 2 {
		t.Fatalf("cloud view of %s: %+v (found %v)", id, view, ok)
	}

	attach, err := c.AttachNetworkInterface(&ecs.AttachNetworkInterfaceRequest{
		RegionId:           tea.String(fakecloud.DefaultRegion),
		NetworkInterfaceId: tea.String(id),
		InstanceId:         tea.String(node1),
	})
	if err != nil {
		t.Fatalf("AttachNetworkInterface: %v", err)
	}
	if tea.StringValue(attach.Body.RequestId) == "" {
		t.Error("attach: empty RequestId")
	}
	var got *ecs.DescribeNetworkInterfacesResponseBodyNetworkInterfaceSetsNetworkInterfaceSet
	testwait.Until(t, 10*time.Second, id+" InUse", func() bool {
		got = teaDescribeENI(t, c, id)
		switch s := tea.StringValue(got.Status); s {
		case "InUse":
			return true
		case "Attaching":
			return false
		default:
			t.Fatalf("status %q while attaching", s)
		}
		return false
	})
	if tea.StringValue(got.InstanceId) != node1 || got.Attachment == nil ||
		tea.StringValue(got.Attachment.InstanceId) != node1 || tea.Int32Value(got.Attachment.DeviceIndex) < 1 {
		t.Fatalf("attachment after InUse: instance %q attachment %+v", tea.StringValue(got.InstanceId), got.Attachment)
	}
	if tea.StringValue(got.MacAddress) != tea.StringValue(b.MacAddress) || got.PrivateIpSets == nil || len(got.PrivateIpSets.PrivateIpSet) != 3 {
		t.Fatalf("describe after attach disagrees with create: %+v", got)
	}

	assign, err := c.AssignPrivateIpAddresses(&ecs.AssignPrivateIpAddressesRequest{
		RegionId:                       tea.String(fakecloud.DefaultRegion),
		NetworkInterfaceId:             tea.String(id),
		SecondaryPrivateIpAddressCount: tea.Int32(3),
	})
	if err != nil {
		t.Fatalf("AssignPrivateIpAddresses: %v", err)
	}
	set := assign.Body.AssignedPrivateIpAddressesSet
	if set == nil || set.PrivateIpSet == nil || len(set.PrivateIpSet.PrivateIpAddress) != 3 {
		t.Fatalf("AssignedPrivateIpAddressesSet: want 3 addresses, got %+v", set)
	}
	if n := tea.StringValue(set.NetworkInterfaceId); n != id {
		t.Errorf("AssignedPrivateIpAddressesSet.NetworkInterfaceId %q, want %s", n, id)
	}
	var assigned []netip.Addr
	for _, s := range set.PrivateIpSet.PrivateIpAddress {
		a := inVSW1(t, tea.StringValue(s))
		if addrs[a] {
			t.Fatalf("assigned address %s was already on the ENI or assigned twice", a)
		}
		addrs[a] = true
		assigned = append(assigned, a)
	}

	attr, err := c.DescribeNetworkInterfaceAttribute(&ecs.DescribeNetworkInterfaceAttributeRequest{
		RegionId:           tea.String(fakecloud.DefaultRegion),
		NetworkInterfaceId: tea.String(id),
	})
	if err != nil {
		t.Fatalf("DescribeNetworkInterfaceAttribute: %v", err)
	}
	ab := attr.Body
	if tea.StringValue(ab.NetworkInterfaceId) != id || tea.StringValue(ab.Status) != "InUse" ||
		tea.StringValue(ab.InstanceId) != node1 || tea.StringValue(ab.PrivateIpAddress) != primary.String() {
		t.Fatalf("attribute: id %q status %q instance %q primary %q", tea.StringValue(ab.NetworkInterfaceId),
			tea.StringValue(ab.Status), tea.StringValue(ab.InstanceId), tea.StringValue(ab.PrivateIpAddress))
	}
	if ab.PrivateIpSets == nil || len(ab.PrivateIpSets.PrivateIpSet) != 6 {
		t.Fatalf("attribute PrivateIpSets: want 6 (1 primary + 2 + 3), got %+v", ab.PrivateIpSets)
	}
	listed := map[netip.Addr]bool{}
	for _, s := range ab.PrivateIpSets.PrivateIpSet {
		a := inVSW1(t, tea.StringValue(s.PrivateIpAddress))
		listed[a] = true
		if tea.BoolValue(s.Primary) != (a == primary) {
			t.Errorf("attribute: %s Primary=%v", a, tea.BoolValue(s.Primary))
		}
	}
	for a := range addrs {
		if !listed[a] {
			t.Errorf("attribute does not list %s", a)
		}
	}
	for _, a := range assigned {
		if !listed[a] {
			t.Errorf("assigned %s missing from DescribeNetworkInterfaceAttribute", a)
		}
	}
	if ab.Attachment == nil || tea.StringValue(ab.Attachment.InstanceId) != node1 {
		t.Errorf("attribute Attachment %+v", ab.Attachment)
	}
}

// TestTeaNextTokenPaging pages DescribeNetworkInterfaces by NextToken and
// MaxResults: every ENI exactly once, full pages until the last.
func TestTeaNextTokenPaging(t *testing.T) {
	e := newEnv(t)
	const workers, perWorker = 5, 5
	var (
		mu      sync.Mutex
		created []string
		wg      sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.teaECSOwnHTTP() // one client, and HTTP client, per goroutine
			for i := range perWorker {
				resp, err := c.CreateNetworkInterface(&ecs.CreateNetworkInterfaceRequest{
					RegionId:         tea.String(fakecloud.DefaultRegion),
					VSwitchId:        tea.String(vsw1),
					SecurityGroupIds: tea.StringSlice([]string{sg}),
					Tag: []*ecs.CreateNetworkInterfaceRequestTag{
						{Key: tea.String("worker"), Value: tea.String(fmt.Sprint(w, "-", i))},
					},
				})
				if err != nil {
					t.Errorf("worker %d create %d: %v", w, i, err)
					return
				}
				mu.Lock()
				created = append(created, tea.StringValue(resp.Body.NetworkInterfaceId))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if len(created) != workers*perWorker {
		t.Fatalf("created %d ENIs, want %d", len(created), workers*perWorker)
	}
	// Expected: every ENI of the account, i.e. the new ones plus the
	// instances' primary ENIs.
	want := map[string]bool{}
	for _, v := range e.cloud.ENIs() {
		want[v.ID] = true
	}
	for _, id := range created {
		if !want[id] {
			t.Fatalf("created ENI %s unknown to the cloud", id)
		}
	}
	if len(want) <= workers*perWorker {
		t.Fatalf("cloud has %d ENIs, expected the %d created plus primaries", len(want), workers*perWorker)
	}

	const pageSize = 10
	c := e.teaECS()
	seen := map[string]int{}
	token := ""
	pages := 0
	for {
		req := &ecs.DescribeNetworkInterfacesRequest{
			RegionId:   tea.String(fakecloud.DefaultRegion),
			MaxResults: tea.Int32(pageSize),
		}
		if token != "" {
			req.NextToken = tea.String(token)
		}
		resp, err := c.DescribeNetworkInterfaces(req)
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		pages++
		if pages > len(want) {
			t.Fatalf("paging does not terminate (%d pages)", pages)
		}
		b := resp.Body
		if tc := tea.Int32Value(b.TotalCount); int(tc) != len(want) {
			t.Errorf("page %d: TotalCount %d, want %d", pages, tc, len(want))
		}
		var items []*ecs.DescribeNetworkInterfacesResponseBodyNetworkInterfaceSetsNetworkInterfaceSet
		if b.NetworkInterfaceSets != nil {
			items = b.NetworkInterfaceSets.NetworkInterfaceSet
		}
		for _, it := range items {
			seen[tea.StringValue(it.NetworkInterfaceId)]++
		}
		token = tea.StringValue(b.NextToken)
		if token == "" {
			if len(items) == 0 || len(items) > pageSize {
				t.Errorf("last page %d has %d items", pages, len(items))
			}
			break
		}
		if len(items) != pageSize {
			t.Errorf("page %d has %d items and a NextToken; want a full page of %d", pages, len(items), pageSize)
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s seen %d times", id, n)
		}
		if !want[id] {
			t.Errorf("%s listed but not in the cloud", id)
		}
	}
	for id := range want {
		if seen[id] == 0 {
			t.Errorf("%s never listed", id)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %d distinct ENIs, want %d", len(seen), len(want))
	}
	if wantPages := (len(want) + pageSize - 1) / pageSize; pages != wantPages {
		t.Errorf("%d pages, want %d", pages, wantPages)
	}

	// A token that is not one fakecloud issued is refused.
	_, err := c.DescribeNetworkInterfaces(&ecs.DescribeNetworkInterfacesRequest{
		RegionId: tea.String(fakecloud.DefaultRegion), MaxResults: tea.Int32(pageSize), NextToken: tea.String("%%%"),
	})
	wantTeaErr(t, err, 400, fakecloud.CodeNextTokenInvalid)
}

// captured is what a recordingHTTP saw of one request.
type captured struct {
	query  url.Values
	header http.Header
}

// recordingHTTP is a dara.HttpClient that records requests before sending
// them, to check what the SDK put on the wire.
type recordingHTTP struct {
	*teaHTTPClient
	mu   sync.Mutex
	reqs []captured
}

func newRecordingHTTP(t *testing.T) *recordingHTTP {
	return &recordingHTTP{teaHTTPClient: newTeaHTTPClient(t)}
}

func (r *recordingHTTP) Call(req *http.Request, tr *http.Transport) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, captured{query: req.URL.Query(), header: req.Header.Clone()})
	r.mu.Unlock()
	return r.teaHTTPClient.Call(req, tr)
}

// header1 looks a header up by name in any case: dara stores most header
// names lower-case, bypassing http.Header's canonical form.
func (c captured) header1(name string) string {
	for k, v := range c.header {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

func (r *recordingHTTP) last(t *testing.T) captured {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("no request recorded")
	}
	return r.reqs[len(r.reqs)-1]
}

// TestTeaSignatureV2 uses SignatureAlgorithm "v2": HMAC-SHA1 over the
// query, as the old SDK signs, but with Format=json.
func TestTeaSignatureV2(t *testing.T) {
	e := newEnv(t)
	id := tea.StringValue(teaCreateENI(t, e.teaECS(), 1, nil).NetworkInterfaceId)

	rec := newRecordingHTTP(t)
	cfg := e.teaConfig(testAK, testSecret)
	cfg.SignatureAlgorithm = tea.String("v2")
	cfg.HttpClient = rec
	got := teaDescribeENI(t, e.teaECSWith(cfg), id)
	if tea.StringValue(got.NetworkInterfaceId) != id || tea.StringValue(got.Status) != "Available" ||
		got.PrivateIpSets == nil || len(got.PrivateIpSets.PrivateIpSet) != 2 {
		t.Fatalf("v2 describe: %+v", got)
	}
	w := rec.last(t)
	for k, v := range map[string]string{
		"Action": "DescribeNetworkInterfaces", "Version": fakecloud.ECSVersion, "Format": "json",
		"AccessKeyId": testAK, "SignatureMethod": "HMAC-SHA1", "SignatureVersion": "1.0",
	} {
		if w.query.Get(k) != v {
			t.Errorf("v2 query %s=%q, want %q", k, w.query.Get(k), v)
		}
	}
	if w.query.Get("Signature") == "" || w.query.Get("SignatureNonce") == "" || w.query.Get("Timestamp") == "" {
		t.Errorf("v2 query lacks Signature/SignatureNonce/Timestamp: %v", w.query)
	}
	if a := w.header1("Authorization"); a != "" {
		t.Errorf("v2 request carries Authorization %q", a)
	}

	// The query signature is really checked: a wrong secret fails.
	bad := e.teaConfig(testAK, "wrong-secret")
	bad.SignatureAlgorithm = tea.String("v2")
	_, err := e.teaECSWith(bad).DescribeNetworkInterfaces(&ecs.DescribeNetworkInterfacesRequest{
		RegionId: tea.String(fakecloud.DefaultRegion),
	})
	wantTeaErr(t, err, 400, fakecloud.CodeSignatureMismatch)

	// For contrast, the default scheme: ACS3 header, no query signature.
	rec3 := newRecordingHTTP(t)
	cfg3 := e.teaConfig(testAK, testSecret)
	cfg3.HttpClient = rec3
	teaDescribeENI(t, e.teaECSWith(cfg3), id)
	w3 := rec3.last(t)
	if a := w3.header1("Authorization"); !strings.HasPrefix(a, "ACS3-HMAC-SHA256 Credential="+testAK+",") {
		t.Errorf("v3 Authorization %q", a)
	}
	if w3.query.Has("Signature") || w3.query.Has("Action") || w3.query.Has("AccessKeyId") {
		t.Errorf("v3 query carries signing parameters: %v", w3.query)
	}
	if w3.header1("x-acs-action") != "DescribeNetworkInterfaces" || w3.header1("x-acs-version") != fakecloud.ECSVersion {
		t.Errorf("v3 action headers: %v", w3.header)
	}
}

// TestTeaErrors checks how API errors surface through the Tea SDK.
func TestTeaErrors(t *testing.T) {
	e := newEnv(t)
	c := e.teaECS()

	_, err := c.DeleteNetworkInterface(&ecs.DeleteNetworkInterfaceRequest{
		RegionId:           tea.String(fakecloud.DefaultRegion),
		NetworkInterfaceId: tea.String("eni-bp1doesnotexist0001"),
	})
	se := wantTeaErr(t, err, 404, fakecloud.CodeENINotFound)
	// Data is the JSON error body; Message names the request.
	var body map[string]any
	if err := json.Unmarshal([]byte(tea.StringValue(se.Data)), &body); err != nil {
		t.Fatalf("SDKError.Data %q: %v", tea.StringValue(se.Data), err)
	}
	reqID, _ := body["RequestId"].(string)
	if body["Code"] != fakecloud.CodeENINotFound || reqID == "" {
		t.Errorf("error body %v", body)
	}
	if msg := tea.StringValue(se.Message); !strings.Contains(msg, "code: 404") || !strings.Contains(msg, "request id: "+reqID) {
		t.Errorf("SDKError.Message %q", msg)
	}

	before := len(e.cloud.ENIs())
	createReq := func() *ecs.CreateNetworkInterfaceRequest {
		return &ecs.CreateNetworkInterfaceRequest{
			RegionId:         tea.String(fakecloud.DefaultRegion),
			VSwitchId:        tea.String(vsw1),
			SecurityGroupIds: tea.StringSlice([]string{sg}),
		}
	}
	_, err = e.teaECSWith(e.teaConfig(testAK, "wrong-secret")).CreateNetworkInterface(createReq())
	wantTeaErr(t, err, 400, fakecloud.CodeSignatureMismatch)

	_, err = e.teaECSWith(e.teaConfig("LTAIunknownKey9999", testSecret)).CreateNetworkInterface(createReq())
	wantTeaErr(t, err, 404, fakecloud.CodeAccessKeyNotFound)

	if after := len(e.cloud.ENIs()); after != before {
		t.Fatalf("refused calls changed the world: %d ENIs before, %d after", before, after)
	}
	// The same client still works with the right key.
	teaCreateENI(t, c, 0, nil)
	if after := len(e.cloud.ENIs()); after != before+1 {
		t.Fatalf("%d ENIs after a good create, want %d", after, before+1)
	}
}

// TestTeaVPC drives the VPC Tea client.
func TestTeaVPC(t *testing.T) {
	e := newEnv(t)
	v := e.teaVPC()

	describeVSW := func() *vpc.DescribeVSwitchesResponseBodyVSwitchesVSwitch {
		t.Helper()
		resp, err := v.DescribeVSwitches(&vpc.DescribeVSwitchesRequest{
			RegionId:  tea.String(fakecloud.DefaultRegion),
			VSwitchId: tea.String(vsw1),
		})
		if err != nil {
			t.Fatalf("DescribeVSwitches: %v", err)
		}
		b := resp.Body
		if b.VSwitches == nil || len(b.VSwitches.VSwitch) != 1 || tea.Int32Value(b.TotalCount) != 1 {
			t.Fatalf("DescribeVSwitches %s: want one result, got %+v", vsw1, b)
		}
		return b.VSwitches.VSwitch[0]
	}
	cloudAvailable := func() int64 {
		for _, s := range e.cloud.VSwitches() {
			if s.ID == vsw1 {
				return int64(s.Available)
			}
		}
		t.Fatalf("cloud has no %s", vsw1)
		return 0
	}

	s := describeVSW()
	if tea.StringValue(s.VSwitchId) != vsw1 || tea.StringValue(s.CidrBlock) != vsw1CIDR.String() ||
		tea.StringValue(s.VpcId) != fakecloud.DefaultVPCID || tea.StringValue(s.ZoneId) != "cn-hangzhou-h" {
		t.Fatalf("vswitch: id %q cidr %q vpc %q zone %q", tea.StringValue(s.VSwitchId), tea.StringValue(s.CidrBlock),
			tea.StringValue(s.VpcId), tea.StringValue(s.ZoneId))
	}
	avail := tea.Int64Value(s.AvailableIpAddressCount)
	if s.AvailableIpAddressCount == nil || avail <= 0 || avail != cloudAvailable() {
		t.Fatalf("AvailableIpAddressCount %v, cloud says %d", s.AvailableIpAddressCount, cloudAvailable())
	}

	// An ENI with two secondaries takes three addresses off the vSwitch.
	teaCreateENI(t, e.teaECS(), 2, nil)
	if after := tea.Int64Value(describeVSW().AvailableIpAddressCount); after != avail-3 {
		t.Fatalf("AvailableIpAddressCount after creating an ENI with 3 addresses: %d, want %d", after, avail-3)
	}

	resp, err := v.DescribeVpcs(&vpc.DescribeVpcsRequest{
		RegionId: tea.String(fakecloud.DefaultRegion),
		VpcId:    tea.String(fakecloud.DefaultVPCID),
	})
	if err != nil {
		t.Fatalf("DescribeVpcs: %v", err)
	}
	b := resp.Body
	if b.Vpcs == nil || len(b.Vpcs.Vpc) != 1 {
		t.Fatalf("DescribeVpcs: want one VPC, got %+v", b)
	}
	vp := b.Vpcs.Vpc[0]
	if tea.StringValue(vp.VpcId) != fakecloud.DefaultVPCID || tea.StringValue(vp.CidrBlock) != "192.168.0.0/16" {
		t.Errorf("vpc id %q cidr %q", tea.StringValue(vp.VpcId), tea.StringValue(vp.CidrBlock))
	}
	if r := tea.StringValue(vp.VRouterId); r != fakecloud.DefaultVRouterID {
		t.Errorf("VRouterId %q, want %s", r, fakecloud.DefaultVRouterID)
	}
	if vp.RouterTableIds == nil || !slices.Equal(strs(vp.RouterTableIds.RouterTableIds), []string{fakecloud.DefaultRouteTableID}) {
		t.Errorf("RouterTableIds %+v, want [%s]", vp.RouterTableIds, fakecloud.DefaultRouteTableID)
	}
	if vp.VSwitchIds == nil || !slices.Contains(strs(vp.VSwitchIds.VSwitchId), vsw1) {
		t.Errorf("VSwitchIds %+v lacks %s", vp.VSwitchIds, vsw1)
	}

	// VPC errors come back typed as well.
	_, err = v.DescribeVSwitchAttributes(&vpc.DescribeVSwitchAttributesRequest{
		RegionId:  tea.String(fakecloud.DefaultRegion),
		VSwitchId: tea.String("vsw-bp1doesnotexist0001"),
	})
	se := teaErr(t, err)
	if st := tea.IntValue(se.StatusCode); tea.StringValue(se.Code) != fakecloud.CodeVSwitchNotFound || st < 400 || st >= 500 {
		t.Errorf("DescribeVSwitchAttributes of a missing vSwitch: HTTP %d %q", st, tea.StringValue(se.Code))
	}
}
