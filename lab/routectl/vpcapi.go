package routectl

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/daemon/cloud"
)

// Values of RouteEntry.NextHopType and Type that matter here.
const (
	hopInstance = "Instance"
	entryCustom = "Custom"
	statusReady = "Available"
)

// routeEntry is the part of a VPC route entry the controller reasons on.
type routeEntry struct {
	ID      string
	Dst     netip.Prefix // invalid when the cloud's CIDR did not parse
	HopType string
	HopID   string
	Type    string // "System" or "Custom"
	Status  string // "Pending", "Available", ...
}

// vpcAPI makes single VPC calls through the SDK; it does not retry. The
// SDK's clients are not safe for concurrent use, so calls are serialised.
type vpcAPI struct {
	mu     sync.Mutex
	client *vpc.Client
}

// call makes one call through a's client while holding a.mu.
func call[Req, Resp any](a *vpcAPI, do func(Req) (Resp, error), req Req) (Resp, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return do(req)
}

// newVPCAPI builds the SDK client for endpoint ("" = the SDK's endpoint
// resolution over HTTPS, "http(s)://host[:port]", or a bare HTTPS host)
// through daemon/cloud, which owns SDK client construction and its mutex.
func newVPCAPI(endpoint, region, akID, akSecret string) (*vpcAPI, error) {
	cl, err := cloud.NewVPCClient(region, credentials.NewAccessKeyCredential(akID, akSecret),
		cloud.SDKOptions{Endpoint: endpoint, Timeout: 20 * time.Second, UserAgent: "terway-sim-routectl"})
	if err != nil {
		return nil, fmt.Errorf("routectl: %w", err)
	}
	return &vpcAPI{client: cl}, nil
}

// vpcRouter returns the VRouter of a VPC.
func (a *vpcAPI) vpcRouter(vpcID string) (string, error) {
	req := vpc.CreateDescribeVpcsRequest()
	req.VpcId = vpcID
	resp, err := call(a, a.client.DescribeVpcs, req)
	if err != nil {
		return "", err
	}
	for _, v := range resp.Vpcs.Vpc {
		if v.VpcId == vpcID {
			return v.VRouterId, nil
		}
	}
	return "", fmt.Errorf("VPC %s not found", vpcID)
}

// systemTable returns the system route table of the VPC's VRouter.
func (a *vpcAPI) systemTable(vpcID, vRouterID string) (string, error) {
	req := vpc.CreateDescribeRouteTableListRequest()
	req.VpcId = vpcID
	req.RouterId = vRouterID
	req.RouterType = "VRouter"
	req.RouteTableType = "System"
	req.PageSize = requests.NewInteger(50)
	resp, err := call(a, a.client.DescribeRouteTableList, req)
	if err != nil {
		return "", err
	}
	for _, t := range resp.RouterTableList.RouterTableListType {
		if t.RouteTableType == "System" && (t.RouterId == "" || t.RouterId == vRouterID) {
			return t.RouteTableId, nil
		}
	}
	return "", fmt.Errorf("no system route table for VRouter %s of VPC %s", vRouterID, vpcID)
}

// entries lists every entry of a route table, page by page.
func (a *vpcAPI) entries(table string) ([]routeEntry, error) {
	var out []routeEntry
	token := ""
	for {
		req := vpc.CreateDescribeRouteEntryListRequest()
		req.RouteTableId = table
		req.MaxResult = requests.NewInteger(100)
		req.NextToken = token
		resp, err := call(a, a.client.DescribeRouteEntryList, req)
		if err != nil {
			return nil, err
		}
		for _, e := range resp.RouteEntrys.RouteEntry {
			out = append(out, entryOf(e))
		}
		if resp.NextToken == "" {
			return out, nil
		}
		token = resp.NextToken
	}
}

func entryOf(e vpc.RouteEntry) routeEntry {
	r := routeEntry{ID: e.RouteEntryId, HopType: e.NextHopType, HopID: e.InstanceId, Type: e.Type, Status: e.Status}
	if len(e.NextHops.NextHop) == 1 {
		h := e.NextHops.NextHop[0]
		if r.HopType == "" {
			r.HopType = h.NextHopType
		}
		if r.HopID == "" {
			r.HopID = h.NextHopId
		}
	}
	if p, err := netip.ParsePrefix(e.DestinationCidrBlock); err == nil {
		r.Dst = p.Masked()
	}
	return r
}

// create asks for an entry dst → instance. token makes a repeated call
// (after a lost answer) idempotent.
func (a *vpcAPI) create(table string, dst netip.Prefix, instanceID, name, token string) (string, error) {
	req := vpc.CreateCreateRouteEntryRequest()
	req.RouteTableId = table
	req.DestinationCidrBlock = dst.String()
	req.NextHopType = hopInstance
	req.NextHopId = instanceID
	req.RouteEntryName = name
	req.Description = "podCIDR of node " + name + " (terway-lab routectl)"
	req.ClientToken = token
	resp, err := call(a, a.client.CreateRouteEntry, req)
	if err != nil {
		return "", err
	}
	return resp.RouteEntryId, nil
}

// remove deletes the entry dst → hopID of a route table.
func (a *vpcAPI) remove(table string, dst netip.Prefix, hopID string) error {
	req := vpc.CreateDeleteRouteEntryRequest()
	req.RouteTableId = table
	req.DestinationCidrBlock = dst.String()
	req.NextHopId = hopID
	_, err := call(a, a.client.DeleteRouteEntry, req)
	return err
}
