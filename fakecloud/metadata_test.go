package fakecloud_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

// imds is a metadata client for tests.
type imds struct {
	t      *testing.T
	base   string
	client *http.Client
	token  string
}

func (m *imds) get(path string) (int, string) {
	m.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, m.base+"/latest/meta-data/"+path, nil)
	if m.token != "" {
		req.Header.Set("X-aliyun-ecs-metadata-token", m.token)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func (m *imds) must(path string) string {
	m.t.Helper()
	st, body := m.get(path)
	if st != 200 {
		m.t.Fatalf("GET %s: %d %s", path, st, body)
	}
	return body
}

func (m *imds) fetchToken(ttl string) (int, string) {
	m.t.Helper()
	req, _ := http.NewRequest(http.MethodPut, m.base+"/latest/api/token", nil)
	req.Header.Set("X-aliyun-ecs-metadata-token-ttl-seconds", ttl)
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) imdsFor(inst string) *imds {
	srv := httptest.NewServer(e.cloud.MetadataHandler(inst))
	e.t.Cleanup(srv.Close)
	return &imds{t: e.t, base: srv.URL, client: srv.Client()}
}

func TestMetadataTree(t *testing.T) {
	e := newEnv(t)
	m := e.imdsFor(node1)
	in, _ := e.cloud.Instance(node1)
	prim := in.ENIs[0]
	for path, want := range map[string]string{
		"instance-id": node1, "region-id": "cn-hangzhou", "zone-id": "cn-hangzhou-h", "vpc-id": fakecloud.DefaultVPCID,
		"vpc-cidr-block": "192.168.0.0/16", "vswitch-id": vsw1, "vswitch-cidr-block": "192.168.0.0/24",
		"instance/instance-type": "ecs.g7.xlarge", "mac": prim.MAC, "private-ipv4": prim.PrimaryIP.String(),
		"network/interfaces/macs/" + prim.MAC + "/network-interface-id":    prim.ID,
		"network/interfaces/macs/" + prim.MAC + "/primary-ip-address":      prim.PrimaryIP.String(),
		"network/interfaces/macs/" + prim.MAC + "/gateway":                 "192.168.0.253",
		"network/interfaces/macs/" + prim.MAC + "/netmask":                 "255.255.255.0",
		"network/interfaces/macs/" + prim.MAC + "/vswitch-cidr-block":      "192.168.0.0/24",
		"network/interfaces/macs/" + prim.MAC + "/vswitch-id":              vsw1,
		"network/interfaces/macs/" + prim.MAC + "/private-ipv4s":           `["` + prim.PrimaryIP.String() + `"]`,
		"network/interfaces/macs/" + prim.MAC + "/ipv6-gateway":            "fd00:192:168::fffd",
		"network/interfaces/macs/" + prim.MAC + "/vswitch-ipv6-cidr-block": "fd00:192:168::/64",
		"network/interfaces/macs/":                                         prim.MAC + "/",
		"ram/security-credentials/":                                        fakecloud.DefaultRAMRole,
	} {
		if got := m.must(path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if st, _ := m.get("network/interfaces/macs/" + prim.MAC + "/ipv6s"); st != 404 {
		t.Errorf("ipv6s without IPv6: %d, want 404", st)
	}
	if st, _ := m.get("network/interfaces/macs/00:16:3e:00:00:00/network-interface-id"); st != 404 {
		t.Errorf("unknown MAC: %d", st)
	}
	if st, _ := m.get("no/such/path"); st != 404 {
		t.Errorf("unknown path: %d", st)
	}
}

// TestMetadataLag checks that attach and assign reach metadata only after
// the lag, and that unassigned addresses linger for the lag.
func TestMetadataLag(t *testing.T) {
	const lag = 400 * time.Millisecond
	e := newEnv(t, withSettings(func(s *fakecloud.Settings) { s.MetadataLag = fakecloud.Duration(lag) }))
	c := e.ecs()
	m := e.imdsFor(node1)
	id := attachedENI(t, c, vsw1, node1)
	inUse := time.Now()
	v, _ := e.cloud.ENI(id)
	macs := func() string { return m.must("network/interfaces/macs/") }
	if strings.Contains(macs(), v.MAC) {
		t.Fatal("metadata shows the ENI before the lag")
	}
	testwait.Until(t, 5*time.Second, "MAC in metadata", func() bool { return strings.Contains(macs(), v.MAC) })
	if d := time.Since(inUse); d < lag-50*time.Millisecond {
		t.Fatalf("MAC appeared after %v, lag is %v", d, lag)
	}
	ips := try(assignIPs(c, id, 2)).must(t).AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress
	path := "network/interfaces/macs/" + v.MAC + "/private-ipv4s"
	var list []string
	if err := json.Unmarshal([]byte(m.must(path)), &list); err != nil || len(list) != 1 {
		t.Fatalf("right after assign metadata lists %v (%v)", list, err)
	}
	testwait.Until(t, 5*time.Second, "assigned IPs in metadata", func() bool {
		_ = json.Unmarshal([]byte(m.must(path)), &list)
		return len(list) == 3 && list[0] == v.PrimaryIP.String()
	})
	try(unassignIPs(c, id, ips[0])).must(t)
	_ = json.Unmarshal([]byte(m.must(path)), &list)
	if len(list) != 3 {
		t.Fatalf("right after unassign metadata lists %v", list)
	}
	testwait.Until(t, 5*time.Second, "unassigned IP gone from metadata", func() bool {
		_ = json.Unmarshal([]byte(m.must(path)), &list)
		return len(list) == 2
	})
	// IPv6 uses the bracketed, unquoted list.
	req := ecs.CreateAssignIpv6AddressesRequest()
	req.NetworkInterfaceId = id
	req.Ipv6AddressCount = requests.NewInteger(2)
	v6 := try(c.AssignIpv6Addresses(req)).must(t).Ipv6Sets.Ipv6Address
	testwait.Until(t, 5*time.Second, "IPv6 in metadata", func() bool {
		st, body := m.get("network/interfaces/macs/" + v.MAC + "/ipv6s")
		return st == 200 && body == "["+v6[0]+","+v6[1]+"]"
	})
}

func TestConsistencyWindow(t *testing.T) {
	e := newEnv(t, withSettings(func(s *fakecloud.Settings) { s.ConsistencyWindow = fakecloud.Duration(300 * time.Millisecond) }))
	c := e.ecs()
	id := createENI(t, c, vsw1, nil).NetworkInterfaceId
	req := ecs.CreateDescribeNetworkInterfacesRequest()
	req.NetworkInterfaceId = &[]string{id}
	if n := len(try(c.DescribeNetworkInterfaces(req)).must(t).NetworkInterfaceSets.NetworkInterfaceSet); n != 0 {
		t.Fatal("a new ENI is visible at once")
	}
	ar := ecs.CreateDescribeNetworkInterfaceAttributeRequest()
	ar.NetworkInterfaceId = id
	if _, err := c.DescribeNetworkInterfaceAttribute(ar); code(t, err) != "InvalidEniId.NotFound" {
		t.Fatalf("attribute of a new ENI: %v", err)
	}
	testwait.Until(t, 5*time.Second, "ENI visible", func() bool {
		return len(try(c.DescribeNetworkInterfaces(req)).must(t).NetworkInterfaceSets.NetworkInterfaceSet) == 1
	})
	try(c.DescribeNetworkInterfaceAttribute(ar)).must(t)
}

func TestMetadataTokens(t *testing.T) {
	e := newEnv(t, withSpec(func(s *fakecloud.Spec) { s.Instances[1].MetadataTokens = "required" }))
	opt := e.imdsFor(node1)
	req := e.imdsFor(node2)
	if st, _ := req.get("instance-id"); st != 403 {
		t.Fatalf("required mode without token: %d", st)
	}
	if st, _ := req.fetchToken("0"); st != 400 {
		t.Fatalf("ttl 0: %d", st)
	}
	if st, _ := req.fetchToken("21601"); st != 400 {
		t.Fatalf("ttl 21601: %d", st)
	}
	st, tok := req.fetchToken("60")
	if st != 200 || tok == "" {
		t.Fatalf("token: %d %q", st, tok)
	}
	req.token = tok
	if got := req.must("instance-id"); got != node2 {
		t.Fatalf("with token: %s", got)
	}
	// A token is bound to its instance.
	opt.token = tok
	if st, _ := opt.get("instance-id"); st != 401 {
		t.Fatalf("another instance's token: %d", st)
	}
	opt.token = "bogus"
	if st, _ := opt.get("instance-id"); st != 401 {
		t.Fatalf("bogus token: %d", st)
	}
	opt.token = ""
	if got := opt.must("instance-id"); got != node1 {
		t.Fatalf("optional mode without token: %s", got)
	}
}

func TestMetadataBySourceAddress(t *testing.T) {
	// A world whose instance lives on a loopback address, so that the
	// source address can be chosen without touching any namespace.
	e := newEnv(t, withSpec(func(s *fakecloud.Spec) {
		s.VPCs[0].CIDR = "127.0.0.0/16"
		s.VPCs[0].IPv6CIDR = ""
		s.VSwitches = s.VSwitches[:1]
		s.VSwitches[0].CIDR, s.VSwitches[0].IPv6CIDR = "127.0.0.0/24", ""
		s.Instances = s.Instances[:1]
		s.Instances[0].PrimaryIP = "127.0.0.2"
	}))
	from := func(src string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	m := &imds{t: t, base: e.srv.URL, client: from("127.0.0.2")}
	if got := m.must("instance-id"); got != node1 {
		t.Fatalf("by source: %s", got)
	}
	other := &imds{t: t, base: e.srv.URL, client: from("127.0.0.3")}
	if st, _ := other.get("instance-id"); st != 403 {
		t.Fatalf("unknown source: %d", st)
	}
}

func TestRAMRoleCredentials(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEnv(t, withOptions(func(o *fakecloud.Options) { o.Clock = clk }), withSettings(func(s *fakecloud.Settings) {
		s.STSLifetime = fakecloud.Duration(time.Hour)
		s.TimestampWindow = fakecloud.Duration(24 * time.Hour)
	}))
	m := e.imdsFor(node1)
	var cred struct{ AccessKeyId, AccessKeySecret, SecurityToken, Expiration, LastUpdated, Code string }
	if err := json.Unmarshal([]byte(m.must("ram/security-credentials/"+fakecloud.DefaultRAMRole)), &cred); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cred.AccessKeyId, "STS.") || cred.AccessKeySecret == "" || cred.SecurityToken == "" || cred.Code != "Success" {
		t.Fatalf("credential: %+v", cred)
	}
	exp, err := time.Parse("2006-01-02T15:04:05Z", cred.Expiration)
	if err != nil || exp.Sub(clk.Now()) > time.Hour || exp.Sub(clk.Now()) < 59*time.Minute {
		t.Fatalf("expiration %q (%v)", cred.Expiration, err)
	}
	if st, _ := m.get("ram/security-credentials/OtherRole"); st != 404 {
		t.Fatalf("foreign role: %d", st)
	}
	c := e.ecsWith(credentials.NewStsTokenCredential(cred.AccessKeyId, cred.AccessKeySecret, cred.SecurityToken))
	try(c.DescribeNetworkInterfaces(ecs.CreateDescribeNetworkInterfacesRequest())).must(t)
	if n := e.cloud.CallCount(fakecloud.CallFilter{InstanceID: node1, Action: "DescribeNetworkInterfaces"}); n != 1 {
		t.Fatalf("calls attributed to %s: %d", node1, n)
	}
	bad := e.ecsWith(credentials.NewStsTokenCredential(cred.AccessKeyId, cred.AccessKeySecret, "CAISforged"))
	if _, err := bad.DescribeNetworkInterfaces(ecs.CreateDescribeNetworkInterfacesRequest()); code(t, err) != "InvalidSecurityToken.MismatchWithAccessKey" {
		t.Fatalf("forged token: %v", err)
	}
	// Within half the lifetime the same credential is handed out again.
	clk.Step(20 * time.Minute)
	var again struct{ AccessKeyId string }
	_ = json.Unmarshal([]byte(m.must("ram/security-credentials/"+fakecloud.DefaultRAMRole)), &again)
	if again.AccessKeyId != cred.AccessKeyId {
		t.Fatal("credential rotated too early")
	}
	clk.Step(41 * time.Minute)
	if _, err := c.DescribeNetworkInterfaces(ecs.CreateDescribeNetworkInterfacesRequest()); code(t, err) != "InvalidSecurityToken.Expired" || status(t, err) != 400 {
		t.Fatalf("expired credential: %v", err)
	}
	_ = json.Unmarshal([]byte(m.must("ram/security-credentials/"+fakecloud.DefaultRAMRole)), &again)
	if again.AccessKeyId == cred.AccessKeyId {
		t.Fatal("no new credential after expiry")
	}
}
