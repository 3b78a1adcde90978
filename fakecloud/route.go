package fakecloud

import (
	"net/netip"
	"sort"
	"time"
)

type describeRouteTableListResponse struct {
	base
	Success         bool   `json:"Success"`
	Code            string `json:"Code"`
	Message         string `json:"Message"`
	TotalCount      int    `json:"TotalCount"`
	PageNumber      int    `json:"PageNumber"`
	PageSize        int    `json:"PageSize"`
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
	c.mu.Lock()
	defer c.mu.Unlock()
	var matched []*vpc
	for _, v := range c.st.VPCs {
		if (p.String("VpcId") != "" && p.String("VpcId") != v.ID) ||
			(p.String("RouteTableId") != "" && p.String("RouteTableId") != v.RouteTableID) ||
			(p.String("VRouterId") != "" && p.String("VRouterId") != v.VRouterID) ||
			(p.String("RouteTableType") != "" && p.String("RouteTableType") != "System") {
			continue
		}
		matched = append(matched, v)
	}
	sort.Slice(matched, func(i, j int) bool { return matched[i].RouteTableID < matched[j].RouteTableID })
	page, _, _ := pageOf(pg, matched, func(v *vpc) string { return v.RouteTableID })
	resp := &describeRouteTableListResponse{Success: true, Code: "200", Message: "successful",
		TotalCount: len(matched), PageNumber: pg.number, PageSize: pg.size}
	resp.RouterTableList.RouterTableListType = make([]routeTableJSON, 0, len(page))
	for _, v := range page {
		j := routeTableJSON{VpcID: v.ID, RouteTableID: v.RouteTableID, RouteTableType: "System", RouterID: v.VRouterID,
			RouterType: "VRouter", AssociateType: "VSwitch", Status: "Available", CreationTime: apiTime(c.st.Created),
			OwnerID: c.ownerIDLocked()}
		j.VSwitchIDs.VSwitchID = c.vswitchIDsLocked(v.ID)
		j.GatewayIDs.GatewayIDs = []string{}
		resp.RouterTableList.RouterTableListType = append(resp.RouterTableList.RouterTableListType, j)
	}
	return resp, nil
}

func (c *Cloud) vpcByTableLocked(tableID string) *vpc {
	for _, v := range c.st.VPCs {
		if v.RouteTableID == tableID {
			return v
		}
	}
	return nil
}

type createRouteEntryResponse struct {
	base
	RouteEntryID string `json:"RouteEntryId"`
}

func (c *Cloud) createRouteEntry(x *call) (response, error) {
	p := x.p
	table, err := required(p, "RouteTableId")
	if err != nil {
		return nil, err
	}
	dstS, err := required(p, "DestinationCidrBlock")
	if err != nil {
		return nil, err
	}
	dst, err := netip.ParsePrefix(dstS)
	if err != nil || dst != dst.Masked() {
		return nil, apiErr(400, CodeCIDRMalformed, "Specified CIDR block is not valid.")
	}
	hopType := p.String("NextHopType")
	if hopType == "" {
		hopType = "Instance"
	}
	if hopType != "Instance" && hopType != "NetworkInterface" {
		return nil, apiErr(400, CodeNextHopType, "Specified parameter \"NextHopType\" is not valid.")
	}
	hop, err := required(p, "NextHopId")
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp, ok, err := c.replayLocked(x, "CreateRouteEntry"); ok {
		return resp, err
	}
	v := c.vpcByTableLocked(table)
	if v == nil {
		return nil, apiErr(404, CodeRouteTableNotFound, "Specified route table does not exist.")
	}
	switch hopType {
	case "Instance":
		in := c.st.Instances[hop]
		if in == nil || in.VPCID != v.ID {
			return nil, apiErr(404, CodeNextHopNotFound, "Specified next hop does not exist.")
		}
	case "NetworkInterface":
		e := c.st.ENIs[hop]
		if e == nil {
			return nil, apiErr(404, "InvalidNetworkInterface.NotFound", "The specified networkInterface does not exist.")
		}
		if e.VPCID != v.ID {
			return nil, apiErr(400, "Mismatch.EniIdAndRouteTableId", "The operation is not allowed because eni and route table not in same vpc.")
		}
	}
	for _, r := range c.st.Routes {
		if r.TableID == table && r.Destination == dst {
			return nil, apiErr(400, CodeCIDRDuplicate, "Specified CIDR block is already exists.")
		}
	}
	now := c.now()
	r := &routeEntry{ID: c.st.newID("rte"), TableID: table, Destination: dst, NextHopType: hopType, NextHopID: hop,
		Name: p.String("RouteEntryName"), Description: p.String("Description"), Type: "Custom", Status: "Pending", CreatedAt: now}
	r.Due = c.scheduleLocked(routeKey(r.ID), c.st.Spec.Settings.RouteEntryDelay.D())
	c.st.Routes[r.ID] = r
	c.dirty.route(r.ID)
	resp := &createRouteEntryResponse{RouteEntryID: r.ID}
	c.rememberLocked(x, "CreateRouteEntry", resp)
	return resp, c.commitLocked()
}

func (c *Cloud) deleteRouteEntry(x *call) (response, error) {
	p := x.p
	id := p.String("RouteEntryId")
	table := p.String("RouteTableId")
	dstS := p.String("DestinationCidrBlock")
	if id == "" && (table == "" || dstS == "") {
		return nil, apiErr(400, CodeMissingParameter, "Miss mandatory parameter.")
	}
	var dst netip.Prefix
	if dstS != "" {
		var err error
		if dst, err = netip.ParsePrefix(dstS); err != nil {
			return nil, apiErr(400, CodeCIDRMalformed, "Specified CIDR block is not valid.")
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if table != "" && c.vpcByTableLocked(table) == nil {
		return nil, apiErr(404, CodeRouteTableNotFound, "Specified route table does not exist.")
	}
	var r *routeEntry
	for _, x := range c.st.Routes {
		if (id != "" && x.ID == id) || (id == "" && x.TableID == table && x.Destination == dst) {
			if hop := p.String("NextHopId"); hop != "" && x.NextHopID != hop {
				continue
			}
			r = x
		}
	}
	if r == nil {
		return nil, apiErr(400, CodeRouteEntryNotFound, "Route entry not exists.")
	}
	if r.Type == "System" {
		return nil, apiErr(400, CodeRouteSystem, "Specified operation is denied as route entry type is system.")
	}
	if r.Status != "Available" {
		return nil, apiErr(400, CodeRouteEntryStatus, "Some route entry status blocked this operation.")
	}
	delete(c.st.Routes, r.ID)
	c.dirty.route(r.ID)
	c.pushRoutesLocked(r.TableID)
	return &base{}, c.commitLocked()
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
	pg, err := parsePaging(p, 0, 100)
	if err != nil {
		return nil, err
	}
	if !pg.token {
		pg = paging{token: true, size: 10}
	}
	// This API spells the page size MaxResult (1-100, default 10); the
	// SDKs send that name.
	if p.Has("MaxResult") {
		n, err := p.Int("MaxResult", 10)
		if err != nil {
			return nil, err
		}
		if n < 1 || n > 100 {
			return nil, errInvalid("MaxResult", p.String("MaxResult"))
		}
		pg.size = n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vpcByTableLocked(table) == nil {
		return nil, apiErr(400, CodeRouteTableNotFoundList, "The specified RouteTable was not found.")
	}
	var matched []*routeEntry
	for _, r := range c.st.Routes {
		if r.TableID != table ||
			(p.String("RouteEntryId") != "" && p.String("RouteEntryId") != r.ID) ||
			(p.String("RouteEntryName") != "" && p.String("RouteEntryName") != r.Name) ||
			(p.String("DestinationCidrBlock") != "" && p.String("DestinationCidrBlock") != r.Destination.String()) ||
			(p.String("RouteEntryType") != "" && p.String("RouteEntryType") != r.Type) ||
			(p.String("NextHopId") != "" && p.String("NextHopId") != r.NextHopID) ||
			(p.String("NextHopType") != "" && p.String("NextHopType") != r.NextHopType) {
			continue
		}
		matched = append(matched, r)
	}
	sort.Slice(matched, func(i, j int) bool { return matched[i].ID < matched[j].ID })
	page, next, err := pageOf(pg, matched, func(r *routeEntry) string { return r.ID })
	if err != nil {
		return nil, err
	}
	resp := &describeRouteEntryListResponse{NextToken: next}
	resp.RouteEntrys.RouteEntry = make([]routeEntryJSON, 0, len(page))
	for _, r := range page {
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
		resp.RouteEntrys.RouteEntry = append(resp.RouteEntrys.RouteEntry, j)
	}
	return resp, nil
}

func ipVersion(p netip.Prefix) string {
	if p.Addr().Is6() {
		return "ipv6"
	}
	return "ipv4"
}
