package fakecloud

import (
	"net/netip"
	"time"

	"github.com/terway-sim/terway/fakecloud/wire"
)

type describeRouteTableListResponse struct {
	base
	Success bool   `json:"Success"`
	Code    string `json:"Code"`
	Message string `json:"Message"`
	pageNumbers
	RouterTableList struct {
		RouterTableListType []routeTableJSON `json:"RouterTableListType"`
	} `json:"RouterTableList"`
}

type routeTableJSON struct {
	VpcID          string `json:"VpcId"`
	RouteTableID   string `json:"RouteTableId"`
	RouteTableName string `json:"RouteTableName"`
	RouteTableType string `json:"RouteTableType"`
	RouterID       string `json:"RouterId"`
	RouterType     string `json:"RouterType"`
	AssociateType  string `json:"AssociateType"`
	Status         string `json:"Status"`
	CreationTime   string `json:"CreationTime"`
	OwnerID        int64  `json:"OwnerId"`
	VSwitchIDs     struct {
		VSwitchID []string `json:"VSwitchId"`
	} `json:"VSwitchIds"`
	GatewayIDs struct {
		GatewayIDs []string `json:"GatewayIds"`
	} `json:"GatewayIds"`
}

func (c *Cloud) describeRouteTableList(x *call) (response, error) {
	p := x.p
	pg, err := parsePaging(p, 50, 0)
	if err != nil {
		return nil, err
	}
	f := routeTableFilter{vpc: p.String("VpcId"), table: p.String("RouteTableId"), vrouter: p.String("VRouterId"),
		typ: p.String("RouteTableType")}
	found := c.w.findRouteTables(f, pg)
	resp := &describeRouteTableListResponse{Success: true, Code: "200", Message: "successful", pageNumbers: numbersOf(pg, found)}
	resp.RouterTableList.RouterTableListType = renderAll(found.items, c.routeTableJSON)
	return resp, nil
}

func (c *Cloud) routeTableJSON(v vpcSnap) routeTableJSON {
	j := routeTableJSON{VpcID: v.ID, RouteTableID: v.RouteTableID, RouteTableType: "System", RouterID: v.VRouterID,
		RouterType: "VRouter", AssociateType: "VSwitch", Status: "Available", CreationTime: apiTime(c.created),
		OwnerID: c.ownerID()}
	j.VSwitchIDs.VSwitchID = v.vswitchIDs
	j.GatewayIDs.GatewayIDs = []string{}
	return j
}

type createRouteEntryResponse struct {
	base
	RouteEntryID string `json:"RouteEntryId"`
}

func (c *Cloud) createRouteEntry(x *call) (response, error) {
	r, err := decodeCreateRoute(x.p)
	if err != nil {
		return nil, err
	}
	return answered(c.w.createRoute(r, x.token("CreateRouteEntry"), func(e routeEntry) any {
		return &createRouteEntryResponse{RouteEntryID: e.ID}
	}))
}

func decodeCreateRoute(p wire.Params) (routeCreate, error) {
	r := routeCreate{hopType: p.String("NextHopType"), name: p.String("RouteEntryName"), description: p.String("Description")}
	var err error
	if r.table, err = required(p, "RouteTableId"); err != nil {
		return r, err
	}
	dst, err := required(p, "DestinationCidrBlock")
	if err != nil {
		return r, err
	}
	if r.destination, err = netip.ParsePrefix(dst); err != nil || r.destination != r.destination.Masked() {
		return r, apiErr(400, CodeCIDRMalformed, "Specified CIDR block is not valid.")
	}
	if r.hopType == "" {
		r.hopType = "Instance"
	}
	if r.hopType != "Instance" && r.hopType != "NetworkInterface" {
		return r, apiErr(400, CodeNextHopType, "Specified parameter \"NextHopType\" is not valid.")
	}
	r.hop, err = required(p, "NextHopId")
	return r, err
}

func (c *Cloud) deleteRouteEntry(x *call) (response, error) {
	p := x.p
	r := routeDelete{id: p.String("RouteEntryId"), table: p.String("RouteTableId"), hop: p.String("NextHopId")}
	dst := p.String("DestinationCidrBlock")
	if r.id == "" && (r.table == "" || dst == "") {
		return nil, apiErr(400, CodeMissingParameter, "Miss mandatory parameter.")
	}
	if dst != "" {
		var err error
		if r.destination, err = netip.ParsePrefix(dst); err != nil {
			return nil, apiErr(400, CodeCIDRMalformed, "Specified CIDR block is not valid.")
		}
	}
	return ack(c.w.deleteRoute(r))
}

type routeEntryJSON struct {
	RouteEntryID         string `json:"RouteEntryId"`
	RouteEntryName       string `json:"RouteEntryName"`
	RouteTableID         string `json:"RouteTableId"`
	DestinationCidrBlock string `json:"DestinationCidrBlock"`
	Type                 string `json:"Type"`
	Status               string `json:"Status"`
	NextHopType          string `json:"NextHopType"`
	InstanceID           string `json:"InstanceId"`
	Description          string `json:"Description"`
	IPVersion            string `json:"IpVersion"`
	Origin               string `json:"Origin"`
	GmtModified          string `json:"GmtModified"`
	NextHops             struct {
		NextHop []nextHopJSON `json:"NextHop"`
	} `json:"NextHops"`
}

type nextHopJSON struct {
	NextHopType string `json:"NextHopType"`
	NextHopID   string `json:"NextHopId"`
	Enabled     int    `json:"Enabled"`
	Weight      int    `json:"Weight"`
}

type describeRouteEntryListResponse struct {
	base
	NextToken   string `json:"NextToken"`
	RouteEntrys struct {
		RouteEntry []routeEntryJSON `json:"RouteEntry"`
	} `json:"RouteEntrys"`
}

func (c *Cloud) describeRouteEntryList(x *call) (response, error) {
	p := x.p
	table, err := required(p, "RouteTableId")
	if err != nil {
		return nil, err
	}
	pg, err := parseRouteEntryPaging(p)
	if err != nil {
		return nil, err
	}
	f := routeFilter{id: p.String("RouteEntryId"), name: p.String("RouteEntryName"), destination: p.String("DestinationCidrBlock"),
		typ: p.String("RouteEntryType"), hop: p.String("NextHopId"), hopType: p.String("NextHopType")}
	found, err := c.w.findRoutes(table, f, pg)
	if err != nil {
		return nil, err
	}
	resp := &describeRouteEntryListResponse{NextToken: nextToken(found.next)}
	resp.RouteEntrys.RouteEntry = renderAll(found.items, routeEntryJSONOf)
	return resp, nil
}

// parseRouteEntryPaging reads the paging of DescribeRouteEntryList: by
// NextToken only, 10 entries unless MaxResults or MaxResult says.
func parseRouteEntryPaging(p wire.Params) (paging, error) {
	pg, err := parsePaging(p, 0, 100)
	if err != nil {
		return pg, err
	}
	if !pg.token {
		pg = paging{token: true, size: 10}
	}
	// This API spells the page size MaxResult (1-100, default 10); the
	// SDKs send that name.
	if p.Has("MaxResult") {
		n, err := p.Int("MaxResult", 10)
		if err != nil {
			return pg, err
		}
		if n < 1 || n > 100 {
			return pg, errInvalid("MaxResult", p.String("MaxResult"))
		}
		pg.size = n
	}
	return pg, nil
}

func routeEntryJSONOf(r routeEntry) routeEntryJSON {
	j := routeEntryJSON{RouteEntryID: r.ID, RouteEntryName: r.Name, RouteTableID: r.TableID,
		DestinationCidrBlock: r.Destination.String(), Type: r.Type, Status: r.Status, NextHopType: r.NextHopType,
		InstanceID: r.NextHopID, Description: r.Description, IPVersion: ipVersion(r.Destination),
		Origin: "Custom", GmtModified: r.CreatedAt.UTC().Format(time.RFC3339)}
	if r.Type == "System" {
		j.Origin = "System"
	}
	j.NextHops.NextHop = []nextHopJSON{}
	if r.NextHopID != "" {
		j.NextHops.NextHop = append(j.NextHops.NextHop, nextHopJSON{NextHopType: r.NextHopType, NextHopID: r.NextHopID, Enabled: 1})
	}
	return j
}

func ipVersion(p netip.Prefix) string {
	if p.Addr().Is6() {
		return "ipv6"
	}
	return "ipv4"
}
