package fakecloud

import (
	"encoding/json"
	"net/netip"

	"github.com/terway-sim/terway/fakecloud/wire"
)

type instanceTypeJSON struct {
	InstanceTypeID              string  `json:"InstanceTypeId"`
	InstanceTypeFamily          string  `json:"InstanceTypeFamily"`
	CPUCoreCount                int     `json:"CpuCoreCount"`
	MemorySize                  float64 `json:"MemorySize"`
	EniQuantity                 int     `json:"EniQuantity"`
	EniTotalQuantity            int     `json:"EniTotalQuantity"`
	EniPrivateIPAddressQuantity int     `json:"EniPrivateIpAddressQuantity"`
	EniIpv6AddressQuantity      int     `json:"EniIpv6AddressQuantity"`
	EniTrunkSupported           bool    `json:"EniTrunkSupported"`
	NetworkCardQuantity         int     `json:"NetworkCardQuantity"`
	NetworkCards                struct {
		NetworkCardInfo []struct {
			NetworkCardIndex int `json:"NetworkCardIndex"`
		} `json:"NetworkCardInfo"`
	} `json:"NetworkCards"`
	SupportedBootModes struct {
		SupportedBootMode []string `json:"SupportedBootMode"`
	} `json:"SupportedBootModes"`
}

type describeInstanceTypesResponse struct {
	base
	NextToken     string `json:"NextToken"`
	InstanceTypes struct {
		InstanceType []instanceTypeJSON `json:"InstanceType"`
	} `json:"InstanceTypes"`
}

func (c *Cloud) describeInstanceTypes(x *call) (response, error) {
	p := x.p
	families := p.List("InstanceTypeFamilies")
	if f := p.String("InstanceTypeFamily"); f != "" {
		families = append(families, f)
	}
	pg, err := parsePaging(p, 0, 1600)
	if err != nil {
		return nil, err
	}
	if !pg.token {
		// DescribeInstanceTypes pages only by NextToken; it answers at
		// most 100 types per call (MaxResults default).
		pg = paging{token: true, size: 100}
	}
	types, next := pageOf(pg, c.w.instanceTypes(p.List("InstanceTypes"), families), func(t InstanceType) string { return t.InstanceTypeID })
	resp := &describeInstanceTypesResponse{NextToken: nextToken(next)}
	resp.InstanceTypes.InstanceType = renderAll(types, instanceTypeJSONOf)
	return resp, nil
}

func instanceTypeJSONOf(t InstanceType) instanceTypeJSON {
	j := instanceTypeJSON{InstanceTypeID: t.InstanceTypeID, InstanceTypeFamily: t.InstanceTypeFamily,
		CPUCoreCount: t.CPUCoreCount, MemorySize: t.MemorySize, EniQuantity: t.EniQuantity,
		EniTotalQuantity: t.EniTotalQuantity, EniPrivateIPAddressQuantity: t.EniPrivateIPAddressQuantity,
		EniIpv6AddressQuantity: t.EniIPv6AddressQuantity, EniTrunkSupported: t.EniTrunkSupported, NetworkCardQuantity: 1}
	j.NetworkCards.NetworkCardInfo = []struct {
		NetworkCardIndex int `json:"NetworkCardIndex"`
	}{{NetworkCardIndex: 0}}
	j.SupportedBootModes.SupportedBootMode = []string{"UEFI"}
	return j
}

type ipList struct {
	IPAddress []string `json:"IpAddress"`
}

type vpcAttributes struct {
	VpcID            string `json:"VpcId"`
	VSwitchID        string `json:"VSwitchId"`
	NatIPAddress     string `json:"NatIpAddress"`
	PrivateIPAddress ipList `json:"PrivateIpAddress"`
}

type instanceENIJSON struct {
	NetworkInterfaceID string           `json:"NetworkInterfaceId"`
	MacAddress         string           `json:"MacAddress"`
	PrimaryIPAddress   string           `json:"PrimaryIpAddress"`
	Type               string           `json:"Type"`
	VSwitchID          string           `json:"VSwitchId"`
	SecurityGroupIDs   securityGroupIDs `json:"SecurityGroupIds"`
	PrivateIPSets      privateIPSets    `json:"PrivateIpSets"`
	Ipv6Sets           ipv6Sets         `json:"Ipv6Sets"`
}

// instanceJSON is an instance as DescribeInstances lists it;
// DescribeInstanceAttribute answers the same fields flat.
type instanceJSON struct {
	InstanceID          string           `json:"InstanceId"`
	InstanceName        string           `json:"InstanceName"`
	HostName            string           `json:"HostName"`
	Hostname            string           `json:"Hostname,omitempty"`
	Description         string           `json:"Description"`
	InstanceType        string           `json:"InstanceType"`
	InstanceTypeFamily  string           `json:"InstanceTypeFamily,omitempty"`
	Status              string           `json:"Status"`
	RegionID            string           `json:"RegionId"`
	ZoneID              string           `json:"ZoneId"`
	CPU                 int              `json:"Cpu"`
	Memory              int              `json:"Memory"`
	OSType              string           `json:"OSType,omitempty"`
	InstanceNetworkType string           `json:"InstanceNetworkType"`
	CreationTime        string           `json:"CreationTime"`
	SecurityGroupIDs    securityGroupIDs `json:"SecurityGroupIds"`
	InnerIPAddress      ipList           `json:"InnerIpAddress"`
	VpcAttributes       vpcAttributes    `json:"VpcAttributes"`
	Tags                *tagsJSON        `json:"Tags,omitempty"`
	NetworkInterfaces   *struct {
		NetworkInterface []instanceENIJSON `json:"NetworkInterface"`
	} `json:"NetworkInterfaces,omitempty"`
}

// instanceJSON renders an instance as DescribeInstances lists it (with
// its ENIs, when the snapshot has them) or DescribeInstanceAttribute.
func (c *Cloud) instanceJSON(in instanceSnap, withENIs bool) instanceJSON {
	t := in.typ
	j := instanceJSON{
		InstanceID: in.ID, InstanceName: in.Name, HostName: in.Name, InstanceType: in.InstanceType,
		InstanceTypeFamily: t.InstanceTypeFamily, Status: in.Status, RegionID: c.region, ZoneID: in.ZoneID,
		CPU: t.CPUCoreCount, Memory: int(t.MemorySize * 1024), InstanceNetworkType: "vpc",
		CreationTime: apiTime(in.CreatedAt), SecurityGroupIDs: securityGroupIDs{SecurityGroupID: orEmpty(in.SecurityGroupIDs)},
		InnerIPAddress: ipList{IPAddress: []string{}},
		VpcAttributes:  vpcAttributes{VpcID: in.VPCID, VSwitchID: in.VSwitchID, PrivateIPAddress: ipList{IPAddress: []string{}}},
	}
	if in.primaryIP.IsValid() {
		j.VpcAttributes.PrivateIPAddress.IPAddress = []string{in.primaryIP.String()}
	}
	if withENIs {
		j.OSType = "linux"
		j.Hostname = in.Name
		j.Tags = &tagsJSON{Tag: tagList(in.Tags)}
		j.NetworkInterfaces = &struct {
			NetworkInterface []instanceENIJSON `json:"NetworkInterface"`
		}{NetworkInterface: renderAll(in.enis, c.instanceENIJSON)}
	}
	return j
}

// instanceENIJSON renders an ENI as DescribeInstances lists it under its
// instance.
func (c *Cloud) instanceENIJSON(e eniSnap) instanceENIJSON {
	ej := c.eniJSON(e)
	return instanceENIJSON{NetworkInterfaceID: e.ID, MacAddress: e.MAC, PrimaryIPAddress: e.PrimaryIP.String(), Type: e.Type,
		VSwitchID: e.VSwitchID, SecurityGroupIDs: ej.SecurityGroupIDs, PrivateIPSets: ej.PrivateIPSets, Ipv6Sets: ej.Ipv6Sets}
}

type describeInstancesResponse struct {
	base
	pageMarks
	Instances struct {
		Instance []instanceJSON `json:"Instance"`
	} `json:"Instances"`
}

// jsonList parses parameters such as InstanceIds that DescribeInstances
// takes as a JSON array in a string.
func jsonList(p interface{ String(string) string }, name string) ([]string, error) {
	raw := p.String(name)
	if raw == "" {
		return nil, nil
	}
	// Entries decode as *string so that a JSON null (which would decode
	// into "" and silently match nothing) is told apart and refused.
	var entries []*string
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		return nil, errInvalid(name, preview(raw))
	}
	if len(entries) > 100 {
		return nil, errInvalid(name, "more than 100 entries")
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		if e == nil || *e == "" {
			return nil, apiErr(400, CodeInvalidParameter, "The specified parameter %q is not valid: entry %d is null or empty.", name, i+1)
		}
		out[i] = *e
	}
	return out, nil
}

// jsonAddrList is jsonList for a JSON array of IP addresses, such as
// DescribeInstances' PrivateIpAddresses: an entry that is not an address
// is refused rather than matching nothing.
func jsonAddrList(p interface{ String(string) string }, name string) ([]string, error) {
	raw, err := jsonList(p, name)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(raw))
	for i, v := range raw {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, apiErr(400, CodeInvalidParameter, "The specified parameter %q is not valid: entry %d %q is not an IP address.", name, i+1, preview(v))
		}
		out[i] = a.String() // canonical form, as the stored addresses print
	}
	return out, nil
}

func (c *Cloud) describeInstances(x *call) (response, error) {
	f, err := decodeInstanceFilter(x.p)
	if err != nil {
		return nil, err
	}
	pg, err := parsePaging(x.p, 100, 100)
	if err != nil {
		return nil, err
	}
	switch f.status {
	case "", StatusRunning, StatusStopped, "Starting", "Stopping", "Pending":
	default:
		return nil, apiErr(404, "InvalidStatus.NotFound", "The specified Status is not found")
	}
	found := c.w.findInstances(f, pg)
	resp := &describeInstancesResponse{pageMarks: marksOf(pg, found)}
	resp.Instances.Instance = renderAll(found.items, func(in instanceSnap) instanceJSON { return c.instanceJSON(in, true) })
	return resp, nil
}

// decodeInstanceFilter reads what DescribeInstances selects by; the
// lists are checked here, the status after the paging.
func decodeInstanceFilter(p wire.Params) (instanceFilter, error) {
	ids, err := jsonList(p, "InstanceIds")
	if err != nil {
		return instanceFilter{}, err
	}
	ips, err := jsonAddrList(p, "PrivateIpAddresses")
	if err != nil {
		return instanceFilter{}, err
	}
	return instanceFilter{ids: ids, ips: ips, status: p.String("Status"), vpc: p.String("VpcId"),
		vsw: p.String("VSwitchId"), zone: p.String("ZoneId"), typ: p.String("InstanceType")}, nil
}

type describeInstanceAttributeResponse struct {
	base
	instanceJSON
}

func (c *Cloud) describeInstanceAttribute(x *call) (response, error) {
	return describeOne(x, "InstanceId", c.w.describeInstance, func(in instanceSnap) response {
		return &describeInstanceAttributeResponse{instanceJSON: c.instanceJSON(in, false)}
	})
}
