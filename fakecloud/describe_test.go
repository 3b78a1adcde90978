package fakecloud_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/terway-sim/terway/fakecloud"
)

func TestDescribeNetworkInterfacesFiltersAndPaging(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	tagged := createENI(t, c, vsw1, func(r *ecs.CreateNetworkInterfaceRequest) {
		r.Tag = &[]ecs.CreateNetworkInterfaceTag{{Key: "creator", Value: "terway"}, {Key: "node", Value: node1}}
		r.SecondaryPrivateIpAddressCount = requests.NewInteger(1)
	})
	for i := 0; i < 11; i++ {
		createENI(t, c, vsw2, nil)
	}
	attached := attachedENI(t, c, vsw1, node1)
	q := func(mod func(*ecs.DescribeNetworkInterfacesRequest)) *ecs.DescribeNetworkInterfacesResponse {
		r := ecs.CreateDescribeNetworkInterfacesRequest()
		r.PageSize = requests.NewInteger(100)
		mod(r)
		return try(c.DescribeNetworkInterfaces(r)).must(t)
	}
	ids := func(resp *ecs.DescribeNetworkInterfacesResponse) []string {
		var out []string
		for _, s := range resp.NetworkInterfaceSets.NetworkInterfaceSet {
			out = append(out, s.NetworkInterfaceId)
		}
		return out
	}
	cases := []struct {
		name string
		mod  func(*ecs.DescribeNetworkInterfacesRequest)
		want int
	}{
		{"all", func(*ecs.DescribeNetworkInterfacesRequest) {}, 3 + 1 + 11 + 1},
		{"vpc", func(r *ecs.DescribeNetworkInterfacesRequest) { r.VpcId = fakecloud.DefaultVPCID }, 16},
		{"vswitch", func(r *ecs.DescribeNetworkInterfacesRequest) { r.VSwitchId = vsw2 }, 12},
		{"instance", func(r *ecs.DescribeNetworkInterfacesRequest) { r.InstanceId = node1 }, 2},
		{"type primary", func(r *ecs.DescribeNetworkInterfacesRequest) { r.Type = "Primary" }, 3},
		{"instance and type", func(r *ecs.DescribeNetworkInterfacesRequest) { r.InstanceId, r.Type = node1, "Secondary" }, 1},
		{"status", func(r *ecs.DescribeNetworkInterfacesRequest) { r.Status = "Available" }, 12},
		{"tag key+value", func(r *ecs.DescribeNetworkInterfacesRequest) {
			r.Tag = &[]ecs.DescribeNetworkInterfacesTag{{Key: "creator", Value: "terway"}}
		}, 1},
		{"two tags", func(r *ecs.DescribeNetworkInterfacesRequest) {
			r.Tag = &[]ecs.DescribeNetworkInterfacesTag{{Key: "creator", Value: "terway"}, {Key: "node", Value: "other"}}
		}, 0},
		{"ids", func(r *ecs.DescribeNetworkInterfacesRequest) {
			r.NetworkInterfaceId = &[]string{tagged.NetworkInterfaceId, attached}
		}, 2},
		{"private ip", func(r *ecs.DescribeNetworkInterfacesRequest) {
			r.PrivateIpAddress = &[]string{tagged.PrivateIpSets.PrivateIpSet[1].PrivateIpAddress}
		}, 1},
		{"security group", func(r *ecs.DescribeNetworkInterfacesRequest) { r.SecurityGroupId = sg }, 16},
	}
	for _, tc := range cases {
		if got := q(tc.mod); len(got.NetworkInterfaceSets.NetworkInterfaceSet) != tc.want || got.TotalCount != tc.want {
			t.Errorf("%s: %d results (TotalCount %d), want %d", tc.name, len(got.NetworkInterfaceSets.NetworkInterfaceSet), got.TotalCount, tc.want)
		}
	}
	// Page numbers: 16 ENIs in pages of 5.
	seen := map[string]bool{}
	for p := 1; p <= 4; p++ {
		resp := q(func(r *ecs.DescribeNetworkInterfacesRequest) {
			r.PageSize, r.PageNumber = requests.NewInteger(5), requests.NewInteger(p)
		})
		if resp.TotalCount != 16 || resp.PageNumber != p || resp.PageSize != 5 {
			t.Fatalf("page %d header: total %d number %d size %d", p, resp.TotalCount, resp.PageNumber, resp.PageSize)
		}
		for _, id := range ids(resp) {
			if seen[id] {
				t.Fatalf("%s on two pages", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 16 {
		t.Fatalf("pages covered %d ENIs", len(seen))
	}
	// Tokens: 16 ENIs with MaxResults 7.
	seen = map[string]bool{}
	token, pages := "", 0
	for {
		r := ecs.CreateDescribeNetworkInterfacesRequest()
		r.MaxResults = requests.NewInteger(7)
		r.NextToken = token
		resp := try(c.DescribeNetworkInterfaces(r)).must(t)
		for _, id := range ids(resp) {
			if seen[id] {
				t.Fatalf("%s twice", id)
			}
			seen[id] = true
		}
		pages++
		if token = resp.NextToken; token == "" {
			break
		}
	}
	if len(seen) != 16 || pages != 3 {
		t.Fatalf("token paging: %d ENIs in %d pages", len(seen), pages)
	}
	r := ecs.CreateDescribeNetworkInterfacesRequest()
	r.NextToken = "!!not-a-token!!"
	if _, err := c.DescribeNetworkInterfaces(r); code(t, err) != "IllegalParam.NextToken" {
		t.Fatalf("bad token: %v", err)
	}
	r = ecs.CreateDescribeNetworkInterfacesRequest()
	r.PageSize = requests.NewInteger(1001)
	if _, err := c.DescribeNetworkInterfaces(r); code(t, err) != "InvalidParameter" {
		t.Fatalf("page size 1001: %v", err)
	}
}

func TestDescribeInstanceTypes(t *testing.T) {
	e := newEnv(t, withSpec(func(s *fakecloud.Spec) {
		s.InstanceTypes = []fakecloud.InstanceType{{InstanceTypeID: "ecs.test.custom", InstanceTypeFamily: "ecs.test",
			EniQuantity: 5, EniPrivateIPAddressQuantity: 7, EniTotalQuantity: 5}}
	}))
	c := e.ecs()
	r := ecs.CreateDescribeInstanceTypesRequest()
	r.InstanceTypes = &[]string{"ecs.g7.xlarge", "ecs.test.custom"}
	resp := try(c.DescribeInstanceTypes(r)).must(t)
	if len(resp.InstanceTypes.InstanceType) != 2 {
		t.Fatalf("got %d types", len(resp.InstanceTypes.InstanceType))
	}
	g7 := resp.InstanceTypes.InstanceType[0]
	if g7.InstanceTypeId != "ecs.g7.xlarge" || g7.EniQuantity != 4 || g7.EniPrivateIpAddressQuantity != 15 ||
		g7.EniIpv6AddressQuantity != 15 || g7.EniTotalQuantity != 20 || !g7.EniTrunkSupported || g7.InstanceTypeFamily != "ecs.g7" ||
		g7.CpuCoreCount != 4 || g7.MemorySize != 16 {
		t.Fatalf("g7.xlarge: %+v", g7)
	}
	if cu := resp.InstanceTypes.InstanceType[1]; cu.EniQuantity != 5 || cu.EniPrivateIpAddressQuantity != 7 {
		t.Fatalf("custom type: %+v", cu)
	}
	// Without a filter the answer pages with NextToken.
	all := ecs.CreateDescribeInstanceTypesRequest()
	all.MaxResults = requests.NewInteger(5)
	n := 0
	for {
		resp := try(c.DescribeInstanceTypes(all)).must(t)
		n += len(resp.InstanceTypes.InstanceType)
		if resp.NextToken == "" {
			break
		}
		all.NextToken = resp.NextToken
	}
	if want := len(fakecloud.DefaultInstanceTypes()) + 1; n != want {
		t.Fatalf("paged %d types, want %d", n, want)
	}
}

func TestDescribeInstancesAndAttribute(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	attachedENI(t, c, vsw1, node1)
	r := ecs.CreateDescribeInstancesRequest()
	r.InstanceIds = `["` + node1 + `","` + node2 + `"]`
	resp := try(c.DescribeInstances(r)).must(t)
	if resp.TotalCount != 2 || len(resp.Instances.Instance) != 2 {
		t.Fatalf("got %d instances", len(resp.Instances.Instance))
	}
	in := resp.Instances.Instance[0]
	if in.InstanceId != node1 || in.InstanceType != "ecs.g7.xlarge" || in.Status != "Running" || in.ZoneId != "cn-hangzhou-h" ||
		in.VpcAttributes.VpcId != fakecloud.DefaultVPCID || in.VpcAttributes.VSwitchId != vsw1 ||
		len(in.VpcAttributes.PrivateIpAddress.IpAddress) != 1 || len(in.SecurityGroupIds.SecurityGroupId) != 1 ||
		len(in.NetworkInterfaces.NetworkInterface) != 2 || in.NetworkInterfaces.NetworkInterface[0].Type != "Primary" {
		t.Fatalf("instance: %+v", in)
	}
	r = ecs.CreateDescribeInstancesRequest()
	r.VSwitchId = vsw2
	if got := try(c.DescribeInstances(r)).must(t).Instances.Instance; len(got) != 1 || got[0].InstanceId != node2 {
		t.Fatalf("by vswitch: %+v", got)
	}
	r = ecs.CreateDescribeInstancesRequest()
	r.InstanceIds = "not json"
	if _, err := c.DescribeInstances(r); code(t, err) != "InvalidParameter" {
		t.Fatalf("bad InstanceIds: %v", err)
	}
	a := ecs.CreateDescribeInstanceAttributeRequest()
	a.InstanceId = node2
	attr := try(c.DescribeInstanceAttribute(a)).must(t)
	if attr.InstanceId != node2 || attr.InstanceType != "ecs.g6.2xlarge" || attr.VpcAttributes.VSwitchId != vsw2 ||
		len(attr.SecurityGroupIds.SecurityGroupId) != 1 || attr.Status != "Running" || attr.Cpu != 8 {
		t.Fatalf("attribute: %+v", attr)
	}
}

func TestModifyAndTag(t *testing.T) {
	e := newEnv(t)
	c := e.ecs()
	id := createENI(t, c, vsw1, nil).NetworkInterfaceId
	m := ecs.CreateModifyNetworkInterfaceAttributeRequest()
	m.NetworkInterfaceId = id
	m.NetworkInterfaceName = "eni-cni-abc123"
	m.Description = "changed"
	m.DeleteOnRelease = requests.NewBoolean(true)
	try(c.ModifyNetworkInterfaceAttribute(m)).must(t)
	ar := ecs.CreateDescribeNetworkInterfaceAttributeRequest()
	ar.NetworkInterfaceId = id
	got := try(c.DescribeNetworkInterfaceAttribute(ar)).must(t)
	if got.NetworkInterfaceName != "eni-cni-abc123" || got.Description != "changed" || !got.DeleteOnRelease {
		t.Fatalf("after modify: %+v", got)
	}
	m = ecs.CreateModifyNetworkInterfaceAttributeRequest()
	m.NetworkInterfaceId = id
	m.SecurityGroupId = &[]string{"sg-bp1nothere"}
	if _, err := c.ModifyNetworkInterfaceAttribute(m); code(t, err) != "InvalidSecurityGroupId.NotFound" {
		t.Fatalf("unknown security group: %v", err)
	}
	tr := ecs.CreateTagResourcesRequest()
	tr.ResourceType = "eni"
	tr.ResourceId = &[]string{id}
	tr.Tag = &[]ecs.TagResourcesTag{{Key: "k8s.aliyun.com/node", Value: node1}}
	try(c.TagResources(tr)).must(t)
	if tags := try(c.DescribeNetworkInterfaceAttribute(ar)).must(t).Tags.Tag; len(tags) != 1 || tags[0].TagValue != node1 {
		t.Fatalf("tags: %+v", tags)
	}
	tr.ResourceId = &[]string{"eni-bp1nothere"}
	if _, err := c.TagResources(tr); code(t, err) != "InvalidResourceId.NotFound" {
		t.Fatalf("unknown resource: %v", err)
	}
	tr.ResourceId = &[]string{id}
	tr.Tag = &[]ecs.TagResourcesTag{{Key: "aliyun:reserved", Value: "x"}}
	if _, err := c.TagResources(tr); code(t, err) != "InvalidTagKey.Malformed" {
		t.Fatalf("reserved key: %v", err)
	}
	many := make([]ecs.TagResourcesTag, 20)
	for i := range many {
		many[i] = ecs.TagResourcesTag{Key: "k" + string(rune('a'+i)), Value: "v"}
	}
	tr.Tag = &many
	if _, err := c.TagResources(tr); code(t, err) != "OperationDenied.QuotaExceed" {
		t.Fatalf("21 tags on a resource: %v", err)
	}
}

// TestAdminAPIOverHTTP drives the admin API as other tooling does, and
// checks that no answer carries a secret.
func TestAdminAPIOverHTTP(t *testing.T) {
	e := newEnv(t)
	call := func(method, path, token, body string) (int, string) {
		req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/fakecloud/world", "/fakecloud/calls", "/fakecloud/settings", "/fakecloud/faults", "/fakecloud/instance-types"} {
		if st, _ := call("GET", p, "", ""); st != 401 {
			t.Errorf("%s without token: %d", p, st)
		}
	}
	// Get STS credentials issued so that the world holds secrets.
	m := e.imdsFor(node1)
	stsJSON := m.must("ram/security-credentials/" + fakecloud.DefaultRAMRole)
	var cred struct{ AccessKeySecret, SecurityToken string }
	_ = json.Unmarshal([]byte(stsJSON), &cred)
	c := e.ecs()
	id := createENI(t, c, vsw1, nil).NetworkInterfaceId

	st, world := call("GET", "/fakecloud/world", adminToken, "")
	if st != 200 || !strings.Contains(world, id) || !strings.Contains(world, testAK) {
		t.Fatalf("world: %d %s", st, world)
	}
	for _, secret := range []string{testSecret, cred.AccessKeySecret, cred.SecurityToken} {
		for _, p := range []string{"/fakecloud/world", "/fakecloud/calls", "/fakecloud/calls?service=metadata", "/fakecloud/settings", "/fakecloud/faults"} {
			if _, body := call("GET", p, adminToken, ""); strings.Contains(body, secret) {
				t.Fatalf("%s leaks a secret", p)
			}
		}
	}
	if st, body := call("PUT", "/fakecloud/settings", adminToken, `{"metadataLag":"3s","bogus":1}`); st != 400 {
		t.Fatalf("unknown settings key: %d %s", st, body)
	}
	if st, body := call("PUT", "/fakecloud/settings", adminToken, `{"metadataLag":"3s"}`); st != 200 || !strings.Contains(body, `"metadataLag":"3s"`) {
		t.Fatalf("settings: %d %s", st, body)
	}
	if e.cloud.Settings().MetadataLag.D() != 3*time.Second {
		t.Fatal("settings not applied")
	}
	st, body := call("POST", "/fakecloud/faults", adminToken, `{"name":"f1","kind":"error","action":"DescribeInstances","code":"InternalError"}`)
	if st != 200 || !strings.Contains(body, "f1") {
		t.Fatalf("add fault: %d %s", st, body)
	}
	if _, err := c.DescribeInstances(ecs.CreateDescribeInstancesRequest()); code(t, err) != "InternalError" {
		t.Fatalf("fault not active: %v", err)
	}
	if st, _ := call("DELETE", "/fakecloud/faults/f1", adminToken, ""); st != 204 {
		t.Fatalf("remove fault: %d", st)
	}
	try(c.DescribeInstances(ecs.CreateDescribeInstancesRequest())).must(t)
	if st, _ := call("POST", "/fakecloud/faults", adminToken, `{"kind":"explode"}`); st != 400 {
		t.Fatalf("bad fault kind: %d", st)
	}
	st, body = call("GET", "/fakecloud/calls", adminToken, "")
	if st != 200 || !strings.Contains(body, `"action":"DescribeInstances"`) || !strings.Contains(body, `"outcome":"InternalError"`) {
		t.Fatalf("calls: %d %s", st, body)
	}
	if st, _ := call("POST", "/fakecloud/instances/"+node2+"/stop", adminToken, ""); st != 204 {
		t.Fatalf("stop: %d", st)
	}
	if in, _ := e.cloud.Instance(node2); in.Status != "Stopped" {
		t.Fatalf("status after admin stop: %s", in.Status)
	}
	if st, _ := call("POST", "/fakecloud/instances/i-nothere/stop", adminToken, ""); st != 404 {
		t.Fatalf("stop unknown: %d", st)
	}
	spec := `{"id":"i-bp1added00000000001","instanceType":"ecs.g7.large","vswitchId":"` + vsw1 + `","securityGroupIds":["` + sg + `"]}`
	if st, body := call("POST", "/fakecloud/instances", adminToken, spec); st != 200 || !strings.Contains(body, "i-bp1added00000000001") {
		t.Fatalf("add instance: %d %s", st, body)
	}
	if st, _ := call("POST", "/fakecloud/instances/i-bp1added00000000001/release", adminToken, ""); st != 204 {
		t.Fatalf("release: %d", st)
	}
	_ = url.Values{}
}
