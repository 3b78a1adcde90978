package fakecloud

import (
	"slices"
	"sort"
	"strings"
)

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

func (c *Cloud) vswitchJSONLocked(v *vswitch) vswitchJSON {
	j := vswitchJSON{VSwitchID: v.ID, VpcID: v.VPCID, ZoneID: v.ZoneID, CidrBlock: v.CIDR.String(),
		AvailableIPAddressCount: int64(v.pool4.available()), Status: "Available", VSwitchName: v.Name,
		CreationTime: apiTime(c.st.Created), OwnerID: c.ownerIDLocked(), ShareType: "Sharing",
		Tags: tagsJSON{Tag: []tagJSON{}}}
	if v.pool6 != nil {
		j.Ipv6CidrBlock, j.EnabledIpv6 = v.IPv6CIDR.String(), true
	}
	j.RouteTable.RouteTableID = c.st.VPCs[v.VPCID].RouteTableID
	j.RouteTable.RouteTableType = "System"
	return j
}

func (c *Cloud) ownerIDLocked() int64 {
	var n int64
	for _, ch := range c.st.Spec.AccountID {
		if ch < '0' || ch > '9' {
			return 0
		}
		n = n*10 + int64(ch-'0')
	}
	return n
}

type describeVSwitchesResponse struct {
	base
	TotalCount int `json:"TotalCount"`
	PageNumber int `json:"PageNumber"`
	PageSize   int `json:"PageSize"`
	VSwitches  struct {
		VSwitch []vswitchJSON `json:"VSwitch"`
	} `json:"VSwitches"`
}

func (c *Cloud) describeVSwitches(x *call) (response, error) {
	p := x.p
	pg, err := parsePaging(p, 50, 0)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var matched []*vswitch
	for _, v := range c.st.VSwitches {
		if (p.String("VSwitchId") != "" && p.String("VSwitchId") != v.ID) ||
			(p.String("VpcId") != "" && p.String("VpcId") != v.VPCID) ||
			(p.String("ZoneId") != "" && p.String("ZoneId") != v.ZoneID) ||
			(p.String("VSwitchName") != "" && p.String("VSwitchName") != v.Name) {
			continue
		}
		matched = append(matched, v)
	}
	sort.Slice(matched, func(i, j int) bool { return matched[i].ID < matched[j].ID })
	page, _, _ := pageOf(pg, matched, func(v *vswitch) string { return v.ID })
	resp := &describeVSwitchesResponse{TotalCount: len(matched), PageNumber: pg.number, PageSize: pg.size}
	resp.VSwitches.VSwitch = make([]vswitchJSON, 0, len(page))
	for _, v := range page {
		resp.VSwitches.VSwitch = append(resp.VSwitches.VSwitch, c.vswitchJSONLocked(v))
	}
	return resp, nil
}

type describeVSwitchAttributesResponse struct {
	base
	vswitchJSON
}

func (c *Cloud) describeVSwitchAttributes(x *call) (response, error) {
	id, err := required(x.p, "VSwitchId")
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.st.VSwitches[id]
	if v == nil {
		return nil, apiErr(400, CodeVSwitchNotFound, "Specified VSwitch can not found.")
	}
	return &describeVSwitchAttributesResponse{vswitchJSON: c.vswitchJSONLocked(v)}, nil
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
		Ipv6CidrBlock []struct {
			Ipv6CidrBlock string `json:"Ipv6CidrBlock"`
			Ipv6Isp       string `json:"Ipv6Isp"`
		} `json:"Ipv6CidrBlock"`
	} `json:"Ipv6CidrBlocks"`
}

type describeVpcsResponse struct {
	base
	TotalCount int `json:"TotalCount"`
	PageNumber int `json:"PageNumber"`
	PageSize   int `json:"PageSize"`
	Vpcs       struct {
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
	c.mu.Lock()
	defer c.mu.Unlock()
	var matched []*vpc
	for _, v := range c.st.VPCs {
		if (len(ids) > 0 && !slices.Contains(ids, v.ID)) || (p.String("VpcName") != "" && p.String("VpcName") != v.Name) {
			continue
		}
		matched = append(matched, v)
	}
	sort.Slice(matched, func(i, j int) bool { return matched[i].ID < matched[j].ID })
	page, _, _ := pageOf(pg, matched, func(v *vpc) string { return v.ID })
	resp := &describeVpcsResponse{TotalCount: len(matched), PageNumber: pg.number, PageSize: pg.size}
	resp.Vpcs.Vpc = make([]vpcJSON, 0, len(page))
	for _, v := range page {
		j := vpcJSON{VpcID: v.ID, RegionID: c.st.Spec.RegionID, Status: "Available", VpcName: v.Name,
			CidrBlock: v.CIDR.String(), VRouterID: v.VRouterID, OwnerID: c.ownerIDLocked(), CreationTime: apiTime(c.st.Created)}
		if v.IPv6CIDR.IsValid() {
			j.Ipv6CidrBlock, j.EnabledIpv6 = v.IPv6CIDR.String(), true
			j.Ipv6CidrBlocks.Ipv6CidrBlock = append(j.Ipv6CidrBlocks.Ipv6CidrBlock, struct {
				Ipv6CidrBlock string `json:"Ipv6CidrBlock"`
				Ipv6Isp       string `json:"Ipv6Isp"`
			}{Ipv6CidrBlock: v.IPv6CIDR.String(), Ipv6Isp: "BGP"})
		} else {
			j.Ipv6CidrBlocks.Ipv6CidrBlock = []struct {
				Ipv6CidrBlock string `json:"Ipv6CidrBlock"`
				Ipv6Isp       string `json:"Ipv6Isp"`
			}{}
		}
		j.VSwitchIDs.VSwitchID = c.vswitchIDsLocked(v.ID)
		j.RouterTableIDs.RouterTableIDs = []string{v.RouteTableID}
		resp.Vpcs.Vpc = append(resp.Vpcs.Vpc, j)
	}
	return resp, nil
}

// vswitchIDsLocked lists the vSwitches of a VPC, sorted.
func (c *Cloud) vswitchIDsLocked(vpcID string) []string {
	out := []string{}
	for _, s := range c.st.VSwitches {
		if s.VPCID == vpcID {
			out = append(out, s.ID)
		}
	}
	sort.Strings(out)
	return out
}
