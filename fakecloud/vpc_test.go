package fakecloud_test

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testwait"
)

const vsw3 = "vsw-bp1lab0000000000003"

// emptyAvail is what a /24 vSwitch offers before anything is placed in it:
// ECS keeps the network address and the last three addresses.
const emptyAvail = 256 - 4

// mustPrefix parses a CIDR that a test states literally.
func mustPrefix(t *testing.T, s string) netip.Prefix {
	t.Helper()
	p, err := netip.ParsePrefix(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return p
}

// samePrefix compares CIDRs by value, so that fd00:192:168:0::/64 and its
// canonical spelling fd00:192:168::/64 are equal.
func samePrefix(t *testing.T, got, want string) bool {
	t.Helper()
	g, err := netip.ParsePrefix(got)
	if err != nil {
		return false
	}
	return g == mustPrefix(t, want)
}

func describeVSwitch(t *testing.T, c *vpc.Client, id string) vpc.VSwitch {
	t.Helper()
	req := vpc.CreateDescribeVSwitchesRequest()
	req.VSwitchId = id
	resp := try(c.DescribeVSwitches(req)).must(t)
	if resp.TotalCount != 1 || len(resp.VSwitches.VSwitch) != 1 {
		t.Fatalf("describe vswitch %s: total %d, %d results", id, resp.TotalCount, len(resp.VSwitches.VSwitch))
	}
	return resp.VSwitches.VSwitch[0]
}

func TestDescribeVSwitches(t *testing.T) {
	e := newEnv(t)
	c := e.vpc()
	want := []struct {
		id, zone, cidr, cidr6 string
	}{
		{vsw1, "cn-hangzhou-h", "192.168.0.0/24", "fd00:192:168:0::/64"},
		{vsw2, "cn-hangzhou-i", "192.168.1.0/24", "fd00:192:168:1::/64"},
		{vsw3, "cn-hangzhou-j", "192.168.2.0/24", "fd00:192:168:2::/64"},
	}
	for _, w := range want {
		v := describeVSwitch(t, c, w.id)
		// Each default vSwitch holds one instance's primary address.
		if v.VSwitchId != w.id || v.VpcId != fakecloud.DefaultVPCID || v.ZoneId != w.zone ||
			v.CidrBlock != w.cidr || !samePrefix(t, v.Ipv6CidrBlock, w.cidr6) || !v.EnabledIpv6 ||
			v.AvailableIpAddressCount != emptyAvail-1 || v.Status != "Available" ||
			v.RouteTable.RouteTableId != fakecloud.DefaultRouteTableID {
			t.Errorf("vswitch %s: %+v", w.id, v)
		}
	}

	// Filter by VPC, two per page.
	var seen []string
	for page := 1; page <= 3; page++ {
		req := vpc.CreateDescribeVSwitchesRequest()
		req.VpcId = fakecloud.DefaultVPCID
		req.PageSize = requests.NewInteger(2)
		req.PageNumber = requests.NewInteger(page)
		resp := try(c.DescribeVSwitches(req)).must(t)
		if resp.TotalCount != 3 || resp.PageSize != 2 || resp.PageNumber != page {
			t.Fatalf("page %d: total %d size %d number %d", page, resp.TotalCount, resp.PageSize, resp.PageNumber)
		}
		wantLen := []int{2, 1, 0}[page-1]
		if len(resp.VSwitches.VSwitch) != wantLen {
			t.Fatalf("page %d: %d vswitches, want %d", page, len(resp.VSwitches.VSwitch), wantLen)
		}
		for _, v := range resp.VSwitches.VSwitch {
			seen = append(seen, v.VSwitchId)
		}
	}
	if !slices.Equal(seen, []string{vsw1, vsw2, vsw3}) {
		t.Fatalf("paged vswitches: %v", seen)
	}

	// Other VPC, other zone: nothing or one.
	req := vpc.CreateDescribeVSwitchesRequest()
	req.VpcId = "vpc-doesnotexist00000000"
	if resp := try(c.DescribeVSwitches(req)).must(t); resp.TotalCount != 0 || len(resp.VSwitches.VSwitch) != 0 {
		t.Fatalf("unknown vpc: %+v", resp.VSwitches)
	}
	req = vpc.CreateDescribeVSwitchesRequest()
	req.ZoneId = "cn-hangzhou-i"
	if resp := try(c.DescribeVSwitches(req)).must(t); resp.TotalCount != 1 || resp.VSwitches.VSwitch[0].VSwitchId != vsw2 {
		t.Fatalf("zone filter: %+v", resp.VSwitches)
	}
}

func TestVSwitchAvailableIPCountTracksENIs(t *testing.T) {
	e := newEnv(t)
	c, ec := e.vpc(), e.ecs()
	before := describeVSwitch(t, c, vsw2).AvailableIpAddressCount
	if before != emptyAvail-1 {
		t.Fatalf("before: %d available, want %d", before, emptyAvail-1)
	}
	// One primary + 3 secondaries = 4 addresses.
	eni := createENI(t, ec, vsw2, func(r *ecs.CreateNetworkInterfaceRequest) {
		r.SecondaryPrivateIpAddressCount = requests.NewInteger(3)
	})
	if n := len(eni.PrivateIpSets.PrivateIpSet); n != 4 {
		t.Fatalf("ENI has %d addresses, want 4", n)
	}
	if got := describeVSwitch(t, c, vsw2).AvailableIpAddressCount; got != before-4 {
		t.Fatalf("after 4-address ENI: %d available, want %d", got, before-4)
	}
	attr := vpc.CreateDescribeVSwitchAttributesRequest()
	attr.VSwitchId = vsw2
	if got := try(c.DescribeVSwitchAttributes(attr)).must(t).AvailableIpAddressCount; got != before-4 {
		t.Fatalf("attributes after ENI: %d available, want %d", got, before-4)
	}
	// A single-address ENI takes exactly one more.
	createENI(t, ec, vsw2, nil)
	if got := describeVSwitch(t, c, vsw2).AvailableIpAddressCount; got != before-5 {
		t.Fatalf("after 1-address ENI: %d available, want %d", got, before-5)
	}
	// Other vSwitches are untouched.
	if got := describeVSwitch(t, c, vsw1).AvailableIpAddressCount; got != emptyAvail-1 {
		t.Fatalf("vsw1: %d available, want %d", got, emptyAvail-1)
	}
	// Deleting the ENI gives its addresses back.
	del := ecs.CreateDeleteNetworkInterfaceRequest()
	del.NetworkInterfaceId = eni.NetworkInterfaceId
	try(ec.DeleteNetworkInterface(del)).must(t)
	testwait.Until(t, 10*time.Second, "addresses released", func() bool {
		return describeVSwitch(t, c, vsw2).AvailableIpAddressCount == before-1
	})
}

func TestDescribeVSwitchAttributes(t *testing.T) {
	e := newEnv(t)
	c := e.vpc()
	req := vpc.CreateDescribeVSwitchAttributesRequest()
	req.VSwitchId = vsw3
	resp := try(c.DescribeVSwitchAttributes(req)).must(t)
	if resp.VSwitchId != vsw3 || resp.VpcId != fakecloud.DefaultVPCID || resp.ZoneId != "cn-hangzhou-j" ||
		resp.CidrBlock != "192.168.2.0/24" || !samePrefix(t, resp.Ipv6CidrBlock, "fd00:192:168:2::/64") ||
		resp.AvailableIpAddressCount != emptyAvail-1 || resp.Status != "Available" || resp.RequestId == "" ||
		resp.RouteTable.RouteTableId != fakecloud.DefaultRouteTableID {
		t.Fatalf("attributes: %+v", resp)
	}
	req.VSwitchId = "vsw-doesnotexist00000000"
	_, err := c.DescribeVSwitchAttributes(req)
	if code(t, err) != fakecloud.CodeVSwitchNotFound || status(t, err) != 400 {
		t.Fatalf("unknown vswitch: %v", err)
	}
}

func TestDescribeVpcs(t *testing.T) {
	e := newEnv(t)
	c := e.vpc()
	check := func(what string, resp *vpc.DescribeVpcsResponse) {
		t.Helper()
		if resp.TotalCount != 1 || len(resp.Vpcs.Vpc) != 1 {
			t.Fatalf("%s: total %d, %d vpcs", what, resp.TotalCount, len(resp.Vpcs.Vpc))
		}
		v := resp.Vpcs.Vpc[0]
		if v.VpcId != fakecloud.DefaultVPCID || v.VRouterId != fakecloud.DefaultVRouterID ||
			v.CidrBlock != "192.168.0.0/16" || !samePrefix(t, v.Ipv6CidrBlock, "fd00:192:168::/56") ||
			!v.EnabledIpv6 || v.Status != "Available" || v.RegionId != fakecloud.DefaultRegion {
			t.Fatalf("%s: %+v", what, v)
		}
		if !slices.Equal(v.RouterTableIds.RouterTableIds, []string{fakecloud.DefaultRouteTableID}) {
			t.Fatalf("%s: router tables %v", what, v.RouterTableIds.RouterTableIds)
		}
		if !slices.Equal(v.VSwitchIds.VSwitchId, []string{vsw1, vsw2, vsw3}) {
			t.Fatalf("%s: vswitches %v", what, v.VSwitchIds.VSwitchId)
		}
	}
	check("all", try(c.DescribeVpcs(vpc.CreateDescribeVpcsRequest())).must(t))
	req := vpc.CreateDescribeVpcsRequest()
	req.VpcId = fakecloud.DefaultVPCID
	check("by id", try(c.DescribeVpcs(req)).must(t))
	// VpcId takes a comma-separated list of up to 20 IDs.
	req.VpcId = "vpc-doesnotexist00000000," + fakecloud.DefaultVPCID
	check("by id list", try(c.DescribeVpcs(req)).must(t))
	req.VpcId = "vpc-doesnotexist00000000"
	if resp := try(c.DescribeVpcs(req)).must(t); resp.TotalCount != 0 || len(resp.Vpcs.Vpc) != 0 {
		t.Fatalf("unknown vpc: %+v", resp.Vpcs)
	}
}

func TestDescribeRouteTableList(t *testing.T) {
	e := newEnv(t)
	c := e.vpc()
	check := func(what string, resp *vpc.DescribeRouteTableListResponse) {
		t.Helper()
		if !resp.Success || resp.TotalCount != 1 || len(resp.RouterTableList.RouterTableListType) != 1 {
			t.Fatalf("%s: %+v", what, resp)
		}
		rt := resp.RouterTableList.RouterTableListType[0]
		if rt.RouteTableId != fakecloud.DefaultRouteTableID || rt.VpcId != fakecloud.DefaultVPCID ||
			rt.RouterId != fakecloud.DefaultVRouterID || rt.RouteTableType != "System" || rt.RouterType != "VRouter" {
			t.Fatalf("%s: %+v", what, rt)
		}
		if !slices.Equal(rt.VSwitchIds.VSwitchId, []string{vsw1, vsw2, vsw3}) {
			t.Fatalf("%s: vswitches %v", what, rt.VSwitchIds.VSwitchId)
		}
	}
	req := vpc.CreateDescribeRouteTableListRequest()
	req.VpcId = fakecloud.DefaultVPCID
	check("by vpc", try(c.DescribeRouteTableList(req)).must(t))
	req = vpc.CreateDescribeRouteTableListRequest()
	req.RouteTableId = fakecloud.DefaultRouteTableID
	check("by table", try(c.DescribeRouteTableList(req)).must(t))
	req.RouteTableId = "vtb-doesnotexist00000000"
	if resp := try(c.DescribeRouteTableList(req)).must(t); resp.TotalCount != 0 || len(resp.RouterTableList.RouterTableListType) != 0 {
		t.Fatalf("unknown table: %+v", resp.RouterTableList)
	}
}

// routeRecorder is a Hypervisor that keeps every RoutesChanged it gets.
type routeRecorder struct {
	fakecloud.NopHypervisor
	mu     sync.Mutex
	tables []fakecloud.RouteTableInfo
}

func (r *routeRecorder) RoutesChanged(_ context.Context, t fakecloud.RouteTableInfo) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tables = append(r.tables, t)
	return nil
}

// last returns the latest table pushed and how many pushes there were.
func (r *routeRecorder) last() (fakecloud.RouteTableInfo, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.tables) == 0 {
		return fakecloud.RouteTableInfo{}, 0
	}
	return r.tables[len(r.tables)-1], len(r.tables)
}

func waitHypervisor(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.cloud.WaitHypervisor(ctx); err != nil {
		t.Fatalf("wait hypervisor: %v", err)
	}
}

func createRoute(t *testing.T, c *vpc.Client, cidr, hop string, mod func(*vpc.CreateRouteEntryRequest)) (*vpc.CreateRouteEntryResponse, error) {
	t.Helper()
	req := vpc.CreateCreateRouteEntryRequest()
	req.RouteTableId = fakecloud.DefaultRouteTableID
	req.DestinationCidrBlock = cidr
	req.NextHopId = hop
	req.NextHopType = "Instance"
	if mod != nil {
		mod(req)
	}
	return c.CreateRouteEntry(req)
}

func listRoutes(t *testing.T, c *vpc.Client, mod func(*vpc.DescribeRouteEntryListRequest)) []vpc.RouteEntry {
	t.Helper()
	req := vpc.CreateDescribeRouteEntryListRequest()
	req.RouteTableId = fakecloud.DefaultRouteTableID
	if mod != nil {
		mod(req)
	}
	return try(c.DescribeRouteEntryList(req)).must(t).RouteEntrys.RouteEntry
}

func routeByID(t *testing.T, c *vpc.Client, id string) vpc.RouteEntry {
	t.Helper()
	got := listRoutes(t, c, func(r *vpc.DescribeRouteEntryListRequest) { r.RouteEntryId = id })
	if len(got) != 1 {
		t.Fatalf("route %s: %d results", id, len(got))
	}
	return got[0]
}

func waitRouteAvailable(t *testing.T, c *vpc.Client, id string) vpc.RouteEntry {
	t.Helper()
	var got vpc.RouteEntry
	testwait.Until(t, 10*time.Second, id+" Available", func() bool {
		got = routeByID(t, c, id)
		return got.Status == "Available"
	})
	return got
}

func primaryIP(t *testing.T, e *env, inst string) netip.Addr {
	t.Helper()
	in, ok := e.cloud.Instance(inst)
	if !ok || len(in.ENIs) == 0 {
		t.Fatalf("instance %s: %+v", inst, in)
	}
	return in.ENIs[0].PrimaryIP
}

func hasDestination(tbl fakecloud.RouteTableInfo, dst netip.Prefix) (fakecloud.RouteInfo, bool) {
	for _, r := range tbl.Entries {
		if r.Destination == dst {
			return r, true
		}
	}
	return fakecloud.RouteInfo{}, false
}

// slowRoutes keeps a route Pending long enough to be seen as such.
func slowRoutes(s *fakecloud.Settings) {
	s.RouteEntryDelay = fakecloud.Duration(300 * time.Millisecond)
}

func TestRouteEntryLifecycle(t *testing.T) {
	rec := &routeRecorder{}
	e := newEnv(t, withSettings(slowRoutes), withOptions(func(o *fakecloud.Options) { o.Hypervisor = rec }))
	c := e.vpc()
	dst := mustPrefix(t, "172.20.1.0/24")
	nodeIP := primaryIP(t, e, node1)

	created, err := createRoute(t, c, dst.String(), node1, func(r *vpc.CreateRouteEntryRequest) {
		r.RouteEntryName = "pod-cidr-node1"
		r.Description = "terway"
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	id := created.RouteEntryId
	if id == "" || created.RequestId == "" {
		t.Fatalf("create response: %+v", created)
	}
	got := routeByID(t, c, id)
	if got.Status != "Pending" {
		t.Fatalf("right after create: status %s, want Pending", got.Status)
	}
	if got.RouteTableId != fakecloud.DefaultRouteTableID || got.DestinationCidrBlock != dst.String() ||
		got.Type != "Custom" || got.NextHopType != "Instance" || got.InstanceId != node1 ||
		got.RouteEntryName != "pod-cidr-node1" || got.Description != "terway" || got.IpVersion != "ipv4" {
		t.Fatalf("entry: %+v", got)
	}
	if len(got.NextHops.NextHop) != 1 || got.NextHops.NextHop[0].NextHopId != node1 || got.NextHops.NextHop[0].NextHopType != "Instance" {
		t.Fatalf("next hops: %+v", got.NextHops)
	}
	// A Pending entry is not programmed yet and cannot be deleted.
	waitHypervisor(t, e)
	if tbl, _ := rec.last(); tbl.ID != "" {
		if _, ok := hasDestination(tbl, dst); ok {
			t.Fatalf("pending route pushed to the hypervisor: %+v", tbl)
		}
	}
	del := vpc.CreateDeleteRouteEntryRequest()
	del.RouteEntryId = id
	if _, err := c.DeleteRouteEntry(del); code(t, err) != fakecloud.CodeRouteEntryStatus || status(t, err) != 400 {
		t.Fatalf("delete pending: %v", err)
	}

	waitRouteAvailable(t, c, id)
	waitHypervisor(t, e)
	tbl, n := rec.last()
	if n == 0 || tbl.ID != fakecloud.DefaultRouteTableID || tbl.VPCID != fakecloud.DefaultVPCID {
		t.Fatalf("RoutesChanged: %d calls, last %+v", n, tbl)
	}
	ri, ok := hasDestination(tbl, dst)
	if !ok || ri.NextHopID != node1 || ri.NextHopType != "Instance" || ri.NextHopIP != nodeIP {
		t.Fatalf("RoutesChanged entry for %s: %+v (in %+v), want next hop %s %s", dst, ri, tbl, node1, nodeIP)
	}
	for _, r := range tbl.Entries {
		if r.NextHopType == "local" {
			t.Fatalf("system entry pushed to the hypervisor: %+v", r)
		}
	}

	// Same destination again is refused, whatever the next hop.
	if _, err := createRoute(t, c, dst.String(), node2, nil); code(t, err) != fakecloud.CodeCIDRDuplicate || status(t, err) != 400 {
		t.Fatalf("duplicate: %v", err)
	}
	// Unknown table, unknown next hop, malformed CIDRs.
	if _, err := createRoute(t, c, "172.20.7.0/24", node1, func(r *vpc.CreateRouteEntryRequest) {
		r.RouteTableId = "vtb-doesnotexist00000000"
	}); code(t, err) != fakecloud.CodeRouteTableNotFound || status(t, err) != 404 {
		t.Fatalf("unknown table: %v", err)
	}
	if _, err := createRoute(t, c, "172.20.7.0/24", "i-doesnotexist00000000", nil); code(t, err) != fakecloud.CodeNextHopNotFound || status(t, err) != 404 {
		t.Fatalf("unknown next hop: %v", err)
	}
	for _, bad := range []string{"172.20.7.0", "172.20.7.0/33", "172.20.300.0/24", "not-a-cidr", "172.20.7.1/24"} {
		if _, err := createRoute(t, c, bad, node1, nil); code(t, err) != fakecloud.CodeCIDRMalformed || status(t, err) != 400 {
			t.Fatalf("malformed %q: %v", bad, err)
		}
	}
	// None of the refused calls left an entry behind.
	custom := listRoutes(t, c, func(r *vpc.DescribeRouteEntryListRequest) { r.RouteEntryType = "Custom" })
	if len(custom) != 1 || custom[0].RouteEntryId != id {
		t.Fatalf("custom entries after refusals: %+v", custom)
	}

	// System entries cannot be deleted.
	sys := listRoutes(t, c, func(r *vpc.DescribeRouteEntryListRequest) { r.RouteEntryType = "System" })
	if len(sys) != 3 {
		t.Fatalf("system entries: %+v", sys)
	}
	for _, s := range sys {
		if s.Status != "Available" || s.Type != "System" {
			t.Fatalf("system entry: %+v", s)
		}
	}
	delSys := vpc.CreateDeleteRouteEntryRequest()
	delSys.RouteEntryId = sys[0].RouteEntryId
	if _, err := c.DeleteRouteEntry(delSys); code(t, err) != fakecloud.CodeRouteSystem || status(t, err) != 400 {
		t.Fatalf("delete system entry: %v", err)
	}
	delSys = vpc.CreateDeleteRouteEntryRequest()
	delSys.RouteTableId = fakecloud.DefaultRouteTableID
	delSys.DestinationCidrBlock = "192.168.0.0/24"
	if _, err := c.DeleteRouteEntry(delSys); code(t, err) != fakecloud.CodeRouteSystem || status(t, err) != 400 {
		t.Fatalf("delete system entry by CIDR: %v", err)
	}

	// Delete by table + CIDR.
	_, before := rec.last()
	del = vpc.CreateDeleteRouteEntryRequest()
	del.RouteTableId = fakecloud.DefaultRouteTableID
	del.DestinationCidrBlock = dst.String()
	try(c.DeleteRouteEntry(del)).must(t)
	if got := listRoutes(t, c, func(r *vpc.DescribeRouteEntryListRequest) { r.RouteEntryId = id }); len(got) != 0 {
		t.Fatalf("after delete: %+v", got)
	}
	waitHypervisor(t, e)
	tbl, n = rec.last()
	if n <= before {
		t.Fatalf("no RoutesChanged after delete (%d calls)", n)
	}
	if _, ok := hasDestination(tbl, dst); ok || tbl.ID != fakecloud.DefaultRouteTableID {
		t.Fatalf("RoutesChanged after delete still has %s: %+v", dst, tbl)
	}
	if _, err := c.DeleteRouteEntry(del); code(t, err) != fakecloud.CodeRouteEntryNotFound {
		t.Fatalf("delete again: %v", err)
	}
	del.RouteTableId = "vtb-doesnotexist00000000"
	if _, err := c.DeleteRouteEntry(del); code(t, err) != fakecloud.CodeRouteTableNotFound || status(t, err) != 404 {
		t.Fatalf("delete in unknown table: %v", err)
	}

	// Delete by RouteEntryId, next hop on another instance.
	dst2 := mustPrefix(t, "172.20.2.0/24")
	r2 := try(createRoute(t, c, dst2.String(), node2, nil)).must(t)
	waitRouteAvailable(t, c, r2.RouteEntryId)
	waitHypervisor(t, e)
	tbl, _ = rec.last()
	if ri, ok := hasDestination(tbl, dst2); !ok || ri.NextHopID != node2 || ri.NextHopIP != primaryIP(t, e, node2) {
		t.Fatalf("RoutesChanged for %s: %+v", dst2, tbl)
	}
	del = vpc.CreateDeleteRouteEntryRequest()
	del.RouteEntryId = r2.RouteEntryId
	try(c.DeleteRouteEntry(del)).must(t)
	waitHypervisor(t, e)
	tbl, _ = rec.last()
	if len(tbl.Entries) != 0 {
		t.Fatalf("RoutesChanged after last delete: %+v", tbl)
	}
}

func TestRouteEntryListPaging(t *testing.T) {
	e := newEnv(t)
	c := e.vpc()
	var ids []string
	for i := 1; i <= 5; i++ {
		cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 20, byte(i), 0}), 24).String()
		r := try(createRoute(t, c, cidr, node1, nil)).must(t)
		ids = append(ids, r.RouteEntryId)
	}
	for _, id := range ids {
		waitRouteAvailable(t, c, id)
	}
	// 5 custom + 3 system entries, 3 per page.
	walk := func(max int, mod func(*vpc.DescribeRouteEntryListRequest)) (pages [][]string) {
		t.Helper()
		token := ""
		for range 20 {
			req := vpc.CreateDescribeRouteEntryListRequest()
			req.RouteTableId = fakecloud.DefaultRouteTableID
			req.MaxResult = requests.NewInteger(max)
			req.NextToken = token
			if mod != nil {
				mod(req)
			}
			resp := try(c.DescribeRouteEntryList(req)).must(t)
			var page []string
			for _, r := range resp.RouteEntrys.RouteEntry {
				page = append(page, r.RouteEntryId)
			}
			pages = append(pages, page)
			if resp.NextToken == "" {
				return pages
			}
			token = resp.NextToken
		}
		t.Fatalf("paging did not end")
		return nil
	}
	check := func(what string, pages [][]string, sizes []int, want []string) {
		t.Helper()
		var all []string
		var got []int
		for _, p := range pages {
			got = append(got, len(p))
			all = append(all, p...)
		}
		if !slices.Equal(got, sizes) {
			t.Fatalf("%s: page sizes %v, want %v", what, got, sizes)
		}
		slices.Sort(all)
		if n := len(slices.Compact(slices.Clone(all))); n != len(all) {
			t.Fatalf("%s: duplicates across pages: %v", what, all)
		}
		if want != nil {
			w := slices.Clone(want)
			slices.Sort(w)
			if !slices.Equal(all, w) {
				t.Fatalf("%s: entries %v, want %v", what, all, w)
			}
		}
	}
	check("all", walk(3, nil), []int{3, 3, 2}, nil)
	check("custom", walk(2, func(r *vpc.DescribeRouteEntryListRequest) { r.RouteEntryType = "Custom" }), []int{2, 2, 1}, ids)
	check("one page", walk(100, nil), []int{8}, nil)
	check("by next hop", walk(4, func(r *vpc.DescribeRouteEntryListRequest) { r.NextHopId = node1 }), []int{4, 1}, ids)
	// The default page is 10 entries.
	if got := listRoutes(t, c, nil); len(got) != 8 {
		t.Fatalf("default page: %d entries", len(got))
	}
	// A token that was never issued is refused.
	req := vpc.CreateDescribeRouteEntryListRequest()
	req.RouteTableId = fakecloud.DefaultRouteTableID
	req.NextToken = "!!not-a-token!!"
	if _, err := c.DescribeRouteEntryList(req); code(t, err) != fakecloud.CodeNextTokenInvalid || status(t, err) != 400 {
		t.Fatalf("bad token: %v", err)
	}
	// Unknown table in the list call.
	req = vpc.CreateDescribeRouteEntryListRequest()
	req.RouteTableId = "vtb-doesnotexist00000000"
	if _, err := c.DescribeRouteEntryList(req); code(t, err) != fakecloud.CodeRouteTableNotFoundList {
		t.Fatalf("unknown table: %v", err)
	}
}

func TestRouteEntryClientToken(t *testing.T) {
	e := newEnv(t)
	c := e.vpc()
	tok := func(r *vpc.CreateRouteEntryRequest) { r.ClientToken = "route-token-1" }
	first := try(createRoute(t, c, "172.20.9.0/24", node1, tok)).must(t)
	again := try(createRoute(t, c, "172.20.9.0/24", node1, tok)).must(t)
	if first.RouteEntryId == "" || again.RouteEntryId != first.RouteEntryId {
		t.Fatalf("retry with token: %q then %q", first.RouteEntryId, again.RouteEntryId)
	}
	if again.RequestId == first.RequestId {
		t.Fatalf("replayed answer kept the old RequestId %q", again.RequestId)
	}
	got := listRoutes(t, c, func(r *vpc.DescribeRouteEntryListRequest) { r.DestinationCidrBlock = "172.20.9.0/24" })
	if len(got) != 1 || got[0].RouteEntryId != first.RouteEntryId {
		t.Fatalf("entries for the CIDR: %+v", got)
	}
	// The retry is answered even after the entry settled: not a duplicate.
	waitRouteAvailable(t, c, first.RouteEntryId)
	if r := try(createRoute(t, c, "172.20.9.0/24", node1, tok)).must(t); r.RouteEntryId != first.RouteEntryId {
		t.Fatalf("late retry: %q", r.RouteEntryId)
	}
	// Same token, different request.
	_, err := createRoute(t, c, "172.20.10.0/24", node1, tok)
	if code(t, err) != fakecloud.CodeIdempotentFailed || status(t, err) != 400 {
		t.Fatalf("same token, other CIDR: %v", err)
	}
	if got := listRoutes(t, c, func(r *vpc.DescribeRouteEntryListRequest) { r.RouteEntryType = "Custom" }); len(got) != 1 {
		t.Fatalf("custom entries: %+v", got)
	}
	// Without a token, the same request is a duplicate.
	if _, err := createRoute(t, c, "172.20.9.0/24", node1, nil); code(t, err) != fakecloud.CodeCIDRDuplicate {
		t.Fatalf("no token: %v", err)
	}
}

func describeEIP(t *testing.T, c *vpc.Client, id string) (vpc.EipAddress, bool) {
	t.Helper()
	req := vpc.CreateDescribeEipAddressesRequest()
	req.AllocationId = id
	resp := try(c.DescribeEipAddresses(req)).must(t)
	switch len(resp.EipAddresses.EipAddress) {
	case 0:
		return vpc.EipAddress{}, false
	case 1:
		return resp.EipAddresses.EipAddress[0], true
	}
	t.Fatalf("eip %s: %d results", id, len(resp.EipAddresses.EipAddress))
	return vpc.EipAddress{}, false
}

func waitEIP(t *testing.T, c *vpc.Client, id, want string) vpc.EipAddress {
	t.Helper()
	var got vpc.EipAddress
	testwait.Until(t, 10*time.Second, id+" "+want, func() bool {
		var ok bool
		got, ok = describeEIP(t, c, id)
		return ok && got.Status == want
	})
	return got
}

func allocateEIP(t *testing.T, c *vpc.Client) *vpc.AllocateEipAddressResponse {
	t.Helper()
	req := vpc.CreateAllocateEipAddressRequest()
	req.Bandwidth = "10"
	resp := try(c.AllocateEipAddress(req)).must(t)
	a, err := netip.ParseAddr(resp.EipAddress)
	if err != nil || !mustPrefix(t, "198.18.0.0/15").Contains(a) || resp.AllocationId == "" {
		t.Fatalf("allocate: %+v", resp)
	}
	return resp
}

func associateEIP(c *vpc.Client, id, typ, target, priv string) error {
	req := vpc.CreateAssociateEipAddressRequest()
	req.AllocationId, req.InstanceType, req.InstanceId, req.PrivateIpAddress = id, typ, target, priv
	_, err := c.AssociateEipAddress(req)
	return err
}

// slowEIPs keeps EIP transitions long enough to be seen.
func slowEIPs(s *fakecloud.Settings) { s.EIPDelay = fakecloud.Duration(300 * time.Millisecond) }

func TestEipNetworkInterfaceLifecycle(t *testing.T) {
	e := newEnv(t, withSettings(slowEIPs))
	c, ec := e.vpc(), e.ecs()

	eni := createENI(t, ec, vsw1, func(r *ecs.CreateNetworkInterfaceRequest) {
		r.SecondaryPrivateIpAddressCount = requests.NewInteger(2)
	})
	att := ecs.CreateAttachNetworkInterfaceRequest()
	att.NetworkInterfaceId, att.InstanceId = eni.NetworkInterfaceId, node1
	try(ec.AttachNetworkInterface(att)).must(t)
	waitStatus(t, ec, eni.NetworkInterfaceId, "InUse")
	secondary := eni.PrivateIpSets.PrivateIpSet[2].PrivateIpAddress

	alloc := allocateEIP(t, c)
	got, ok := describeEIP(t, c, alloc.AllocationId)
	if !ok || got.Status != "Available" || got.IpAddress != alloc.EipAddress || got.Bandwidth != "10" ||
		got.InstanceId != "" || got.RegionId != fakecloud.DefaultRegion {
		t.Fatalf("allocated: %+v", got)
	}

	if err := associateEIP(c, alloc.AllocationId, "NetworkInterface", eni.NetworkInterfaceId, secondary); err != nil {
		t.Fatalf("associate: %v", err)
	}
	got, _ = describeEIP(t, c, alloc.AllocationId)
	if got.Status != "Associating" {
		t.Fatalf("right after associate: %s, want Associating", got.Status)
	}
	if err := associateEIP(c, alloc.AllocationId, "NetworkInterface", eni.NetworkInterfaceId, secondary); code(t, err) != fakecloud.CodeIncorrectEIPStatus {
		t.Fatalf("associate while associating: %v", err)
	}
	rel := vpc.CreateReleaseEipAddressRequest()
	rel.AllocationId = alloc.AllocationId
	if _, err := c.ReleaseEipAddress(rel); code(t, err) != fakecloud.CodeIncorrectEIPStatus || status(t, err) != 400 {
		t.Fatalf("release while associating: %v", err)
	}
	got = waitEIP(t, c, alloc.AllocationId, "InUse")
	if got.InstanceId != eni.NetworkInterfaceId || got.InstanceType != "NetworkInterface" || got.PrivateIpAddress != secondary {
		t.Fatalf("in use: %+v", got)
	}

	// Filter by what it is bound to.
	req := vpc.CreateDescribeEipAddressesRequest()
	req.AssociatedInstanceType = "NetworkInterface"
	req.AssociatedInstanceId = eni.NetworkInterfaceId
	resp := try(c.DescribeEipAddresses(req)).must(t)
	if resp.TotalCount != 1 || len(resp.EipAddresses.EipAddress) != 1 || resp.EipAddresses.EipAddress[0].AllocationId != alloc.AllocationId {
		t.Fatalf("by association: %+v", resp.EipAddresses)
	}
	req.AssociatedInstanceType = "EcsInstance"
	if resp := try(c.DescribeEipAddresses(req)).must(t); len(resp.EipAddresses.EipAddress) != 0 {
		t.Fatalf("wrong association type matched: %+v", resp.EipAddresses)
	}

	// ECS shows the public address on that private address only.
	set := describeENI(t, ec, eni.NetworkInterfaceId)
	for _, p := range set.PrivateIpSets.PrivateIpSet {
		pub := p.AssociatedPublicIp
		if p.PrivateIpAddress == secondary {
			if pub.PublicIpAddress != alloc.EipAddress || pub.AllocationId != alloc.AllocationId {
				t.Fatalf("private IP %s: associated %+v", secondary, pub)
			}
		} else if pub.PublicIpAddress != "" || pub.AllocationId != "" {
			t.Fatalf("private IP %s has a public IP: %+v", p.PrivateIpAddress, pub)
		}
	}
	if set.AssociatedPublicIp.PublicIpAddress != "" {
		t.Fatalf("ENI primary has a public IP: %+v", set.AssociatedPublicIp)
	}

	if err := associateEIP(c, alloc.AllocationId, "NetworkInterface", eni.NetworkInterfaceId, secondary); code(t, err) != fakecloud.CodeIncorrectEIPStatus || status(t, err) != 400 {
		t.Fatalf("associate twice: %v", err)
	}
	// Another EIP cannot take the same private address.
	other := allocateEIP(t, c)
	if err := associateEIP(c, other.AllocationId, "NetworkInterface", eni.NetworkInterfaceId, secondary); code(t, err) != fakecloud.CodeAssociationDuplicated {
		t.Fatalf("second EIP on the same address: %v", err)
	}
	// Nor an address the ENI does not have.
	if err := associateEIP(c, other.AllocationId, "NetworkInterface", eni.NetworkInterfaceId, "192.168.0.250"); code(t, err) != fakecloud.CodeInvalidParameter {
		t.Fatalf("foreign private IP: %v", err)
	}
	if _, err := c.ReleaseEipAddress(rel); code(t, err) != fakecloud.CodeIncorrectEIPStatus || status(t, err) != 400 {
		t.Fatalf("release while InUse: %v", err)
	}

	un := vpc.CreateUnassociateEipAddressRequest()
	un.AllocationId, un.InstanceId, un.InstanceType = alloc.AllocationId, eni.NetworkInterfaceId, "NetworkInterface"
	try(c.UnassociateEipAddress(un)).must(t)
	if got, _ := describeEIP(t, c, alloc.AllocationId); got.Status != "Unassociating" {
		t.Fatalf("right after unassociate: %s", got.Status)
	}
	got = waitEIP(t, c, alloc.AllocationId, "Available")
	if got.InstanceId != "" || got.PrivateIpAddress != "" || got.InstanceType != "" {
		t.Fatalf("after unassociate: %+v", got)
	}
	if _, err := c.UnassociateEipAddress(un); code(t, err) != fakecloud.CodeIncorrectEIPStatus {
		t.Fatalf("unassociate again: %v", err)
	}
	for _, p := range describeENI(t, ec, eni.NetworkInterfaceId).PrivateIpSets.PrivateIpSet {
		if p.AssociatedPublicIp.PublicIpAddress != "" {
			t.Fatalf("public IP left on %s: %+v", p.PrivateIpAddress, p.AssociatedPublicIp)
		}
	}

	try(c.ReleaseEipAddress(rel)).must(t)
	if _, ok := describeEIP(t, c, alloc.AllocationId); ok {
		t.Fatalf("released EIP still listed")
	}
	if _, err := c.ReleaseEipAddress(rel); code(t, err) != fakecloud.CodeAllocationNotFound || status(t, err) != 404 {
		t.Fatalf("release again: %v", err)
	}
}

func TestEipErrors(t *testing.T) {
	e := newEnv(t)
	c := e.vpc()
	for _, bw := range []string{"0", "-1", "501", "abc", "1.5"} {
		req := vpc.CreateAllocateEipAddressRequest()
		req.Bandwidth = bw
		if _, err := c.AllocateEipAddress(req); code(t, err) != "InvalidBandwidth.Malformed" || status(t, err) != 400 {
			t.Fatalf("bandwidth %q: %v", bw, err)
		}
	}
	const unknown = "eip-doesnotexist00000000"
	if err := associateEIP(c, unknown, "EcsInstance", node1, ""); code(t, err) != fakecloud.CodeAllocationNotFound || status(t, err) != 404 {
		t.Fatalf("associate unknown: %v", err)
	}
	un := vpc.CreateUnassociateEipAddressRequest()
	un.AllocationId, un.InstanceId = unknown, node1
	if _, err := c.UnassociateEipAddress(un); code(t, err) != fakecloud.CodeAllocationNotFound || status(t, err) != 404 {
		t.Fatalf("unassociate unknown: %v", err)
	}
	rel := vpc.CreateReleaseEipAddressRequest()
	rel.AllocationId = unknown
	if _, err := c.ReleaseEipAddress(rel); code(t, err) != fakecloud.CodeAllocationNotFound || status(t, err) != 404 {
		t.Fatalf("release unknown: %v", err)
	}
	if _, ok := describeEIP(t, c, unknown); ok {
		t.Fatalf("unknown allocation listed")
	}
	// Default bandwidth is accepted; every allocation gets its own address.
	a := try(c.AllocateEipAddress(vpc.CreateAllocateEipAddressRequest())).must(t)
	b := allocateEIP(t, c)
	if a.EipAddress == b.EipAddress || a.AllocationId == b.AllocationId {
		t.Fatalf("two allocations share: %+v %+v", a, b)
	}
	if err := associateEIP(c, a.AllocationId, "EcsInstance", "i-doesnotexist00000000", ""); err == nil {
		t.Fatalf("associate to unknown instance succeeded")
	}
	if err := associateEIP(c, a.AllocationId, "NetworkInterface", "eni-doesnotexist00000000", ""); code(t, err) != fakecloud.CodeNicOrVMNotFound {
		t.Fatalf("associate to unknown ENI: %v", err)
	}
	if err := associateEIP(c, a.AllocationId, "SlbInstance", node1, ""); code(t, err) != fakecloud.CodeEIPInstanceType {
		t.Fatalf("unsupported instance type: %v", err)
	}
}

func TestEipEcsInstance(t *testing.T) {
	e := newEnv(t)
	c, ec := e.vpc(), e.ecs()
	in, _ := e.cloud.Instance(node2)
	primary := in.ENIs[0]

	alloc := allocateEIP(t, c)
	if err := associateEIP(c, alloc.AllocationId, "EcsInstance", node2, ""); err != nil {
		t.Fatalf("associate: %v", err)
	}
	got := waitEIP(t, c, alloc.AllocationId, "InUse")
	if got.InstanceId != node2 || got.InstanceType != "EcsInstance" || got.PrivateIpAddress != primary.PrimaryIP.String() {
		t.Fatalf("bound to instance: %+v, want private IP %s", got, primary.PrimaryIP)
	}
	req := vpc.CreateDescribeEipAddressesRequest()
	req.AssociatedInstanceType = "EcsInstance"
	req.AssociatedInstanceId = node2
	if resp := try(c.DescribeEipAddresses(req)).must(t); len(resp.EipAddresses.EipAddress) != 1 ||
		resp.EipAddresses.EipAddress[0].AllocationId != alloc.AllocationId {
		t.Fatalf("by instance: %+v", resp.EipAddresses)
	}

	set := describeENI(t, ec, primary.ID)
	if set.AssociatedPublicIp.PublicIpAddress != alloc.EipAddress || set.AssociatedPublicIp.AllocationId != alloc.AllocationId {
		t.Fatalf("primary ENI public IP: %+v", set.AssociatedPublicIp)
	}
	if p := set.PrivateIpSets.PrivateIpSet[0]; !p.Primary || p.PrivateIpAddress != primary.PrimaryIP.String() ||
		p.AssociatedPublicIp.PublicIpAddress != alloc.EipAddress {
		t.Fatalf("primary private IP set: %+v", p)
	}

	// The instance's primary address is taken, for an ENI-type binding too.
	other := allocateEIP(t, c)
	if err := associateEIP(c, other.AllocationId, "EcsInstance", node2, ""); code(t, err) != fakecloud.CodeAssociationDuplicated {
		t.Fatalf("second EIP on the instance: %v", err)
	}
	if err := associateEIP(c, other.AllocationId, "NetworkInterface", primary.ID, ""); code(t, err) != fakecloud.CodeAssociationDuplicated {
		t.Fatalf("second EIP on the primary ENI: %v", err)
	}

	// Unassociating names the instance it is bound to.
	un := vpc.CreateUnassociateEipAddressRequest()
	un.AllocationId, un.InstanceId = alloc.AllocationId, node1
	if _, err := c.UnassociateEipAddress(un); err == nil {
		t.Fatalf("unassociate from the wrong instance succeeded")
	}
	un.InstanceId = node2
	try(c.UnassociateEipAddress(un)).must(t)
	waitEIP(t, c, alloc.AllocationId, "Available")
	if set := describeENI(t, ec, primary.ID); set.AssociatedPublicIp.PublicIpAddress != "" {
		t.Fatalf("public IP left after unassociate: %+v", set.AssociatedPublicIp)
	}
}
