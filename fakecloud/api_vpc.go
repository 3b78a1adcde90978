package fakecloud

import "strings"

type vswitchJSON struct {
	VSwitchID               string   `json:"VSwitchId"`
	VpcID                   string   `json:"VpcId"`
	ZoneID                  string   `json:"ZoneId"`
	CidrBlock               string   `json:"CidrBlock"`
	Ipv6CidrBlock           string   `json:"Ipv6CidrBlock"`
	EnabledIpv6             bool     `json:"EnabledIpv6"`
	AvailableIPAddressCount int64    `json:"AvailableIpAddressCount"`
	Status                  string   `json:"Status"`
	VSwitchName             string   `json:"VSwitchName"`
	Description             string   `json:"Description"`
	IsDefault               bool     `json:"IsDefault"`
	CreationTime            string   `json:"CreationTime"`
	ResourceGroupID         string   `json:"ResourceGroupId"`
	OwnerID                 int64    `json:"OwnerId"`
	NetworkACLID            string   `json:"NetworkAclId"`
	ShareType               string   `json:"ShareType"`
	Tags                    tagsJSON `json:"Tags"`
	RouteTable              struct {
		RouteTableID   string `json:"RouteTableId"`
		RouteTableType string `json:"RouteTableType"`
	} `json:"RouteTable"`
}

func (c *Cloud) vswitchJSON(v vswitchSnap) vswitchJSON {
	j := vswitchJSON{VSwitchID: v.ID, VpcID: v.VPCID, ZoneID: v.ZoneID, CidrBlock: v.CIDR.String(),
		AvailableIPAddressCount: int64(v.available), Status: "Available", VSwitchName: v.Name,
		CreationTime: apiTime(c.created), OwnerID: c.ownerID(), ShareType: "Sharing",
		Tags: tagsJSON{Tag: []tagJSON{}}}
	if v.IPv6CIDR.IsValid() {
		j.Ipv6CidrBlock, j.EnabledIpv6 = v.IPv6CIDR.String(), true
	}
	j.RouteTable.RouteTableID = v.routeTableID
	j.RouteTable.RouteTableType = "System"
	return j
}

// ownerID is the account ID as the VPC API writes it: a number.
func (c *Cloud) ownerID() int64 {
	var n int64
	for _, ch := range c.account {
		if ch < '0' || ch > '9' {
			return 0
		}
		n = n*10 + int64(ch-'0')
	}
	return n
}

type describeVSwitchesResponse struct {
	base
	pageNumbers
	VSwitches struct {
		VSwitch []vswitchJSON `json:"VSwitch"`
	} `json:"VSwitches"`
}

func (c *Cloud) describeVSwitches(x *call) (response, error) {
	p := x.p
	pg, err := parsePaging(p, 50, 0)
	if err != nil {
		return nil, err
	}
	f := vswitchFilter{id: p.String("VSwitchId"), vpc: p.String("VpcId"), zone: p.String("ZoneId"), name: p.String("VSwitchName")}
	found := c.w.findVSwitches(f, pg)
	resp := &describeVSwitchesResponse{pageNumbers: numbersOf(pg, found)}
	resp.VSwitches.VSwitch = renderAll(found.items, c.vswitchJSON)
	return resp, nil
}

type describeVSwitchAttributesResponse struct {
	base
	vswitchJSON
}

func (c *Cloud) describeVSwitchAttributes(x *call) (response, error) {
	return describeOne(x, "VSwitchId", c.w.describeVSwitch, func(v vswitchSnap) response {
		return &describeVSwitchAttributesResponse{vswitchJSON: c.vswitchJSON(v)}
	})
}

type vpcJSON struct {
	VpcID         string `json:"VpcId"`
	RegionID      string `json:"RegionId"`
	Status        string `json:"Status"`
	VpcName       string `json:"VpcName"`
	CidrBlock     string `json:"CidrBlock"`
	Ipv6CidrBlock string `json:"Ipv6CidrBlock"`
	EnabledIpv6   bool   `json:"EnabledIpv6"`
	VRouterID     string `json:"VRouterId"`
	Description   string `json:"Description"`
	IsDefault     bool   `json:"IsDefault"`
	CreationTime  string `json:"CreationTime"`
	OwnerID       int64  `json:"OwnerId"`
	VSwitchIDs    struct {
		VSwitchID []string `json:"VSwitchId"`
	} `json:"VSwitchIds"`
	RouterTableIDs struct {
		RouterTableIDs []string `json:"RouterTableIds"`
	} `json:"RouterTableIds"`
	Ipv6CidrBlocks struct {
		Ipv6CidrBlock []ipv6CidrBlockJSON `json:"Ipv6CidrBlock"`
	} `json:"Ipv6CidrBlocks"`
}

type describeVpcsResponse struct {
	base
	pageNumbers
	Vpcs struct {
		Vpc []vpcJSON `json:"Vpc"`
	} `json:"Vpcs"`
}

func (c *Cloud) describeVpcs(x *call) (response, error) {
	p := x.p
	pg, err := parsePaging(p, 50, 0)
	if err != nil {
		return nil, err
	}
	ids := p.List("VpcId")
	if v := p.String("VpcId"); v != "" {
		// VpcId is a comma-separated list of up to 20 IDs.
		ids = append(ids, strings.Split(v, ",")...)
	}
	found := c.w.findVPCs(vpcFilter{ids: ids, name: p.String("VpcName")}, pg)
	resp := &describeVpcsResponse{pageNumbers: numbersOf(pg, found)}
	resp.Vpcs.Vpc = renderAll(found.items, c.vpcJSON)
	return resp, nil
}

// ipv6CidrBlockJSON is one IPv6 block of a VPC.
type ipv6CidrBlockJSON struct {
	Ipv6CidrBlock string `json:"Ipv6CidrBlock"`
	Ipv6Isp       string `json:"Ipv6Isp"`
}

func (c *Cloud) vpcJSON(v vpcSnap) vpcJSON {
	j := vpcJSON{VpcID: v.ID, RegionID: c.region, Status: "Available", VpcName: v.Name,
		CidrBlock: v.CIDR.String(), VRouterID: v.VRouterID, OwnerID: c.ownerID(), CreationTime: apiTime(c.created)}
	j.Ipv6CidrBlocks.Ipv6CidrBlock = []ipv6CidrBlockJSON{}
	if v.IPv6CIDR.IsValid() {
		j.Ipv6CidrBlock, j.EnabledIpv6 = v.IPv6CIDR.String(), true
		j.Ipv6CidrBlocks.Ipv6CidrBlock = append(j.Ipv6CidrBlocks.Ipv6CidrBlock, ipv6CidrBlockJSON{Ipv6CidrBlock: v.IPv6CIDR.String(), Ipv6Isp: "BGP"})
	}
	j.VSwitchIDs.VSwitchID = v.vswitchIDs
	j.RouterTableIDs.RouterTableIDs = []string{v.RouteTableID}
	return j
}
