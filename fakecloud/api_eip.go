package fakecloud

import (
	"strconv"
	"strings"

	"github.com/terway-sim/terway/fakecloud/wire"
)

type allocateEipResponse struct {
	base
	AllocationID string `json:"AllocationId"`
	EipAddress   string `json:"EipAddress"`
	OrderID      int64  `json:"OrderId,omitempty"`
}

func (c *Cloud) allocateEipAddress(x *call) (response, error) {
	r, err := decodeAllocateEIP(x.p)
	if err != nil {
		return nil, err
	}
	return answered(c.w.allocateEIP(r, x.token("AllocateEipAddress"), func(e eip) any {
		return &allocateEipResponse{AllocationID: e.ID, EipAddress: e.Address.String()}
	}))
}

func decodeAllocateEIP(p wire.Params) (eipAllocate, error) {
	r := eipAllocate{name: p.String("Name"), description: p.String("Description"), bandwidth: p.String("Bandwidth"),
		chargeType: p.String("InternetChargeType"), isp: p.String("ISP")}
	if r.bandwidth == "" {
		r.bandwidth = "5"
	}
	if n, err := strconv.Atoi(r.bandwidth); err != nil || n < 1 || n > 500 {
		return r, apiErr(400, "InvalidBandwidth.Malformed", "The specified Bandwidth is invalid.")
	}
	switch r.chargeType {
	case "":
		r.chargeType = "PayByTraffic"
	case "PayByTraffic", "PayByBandwidth":
	default:
		return r, apiErr(400, CodeInvalidParameter, "Specified value of \"InternetChargeType\" is not valid")
	}
	if r.isp == "" {
		r.isp = "BGP"
	}
	return r, nil
}

func (c *Cloud) associateEipAddress(x *call) (response, error) {
	p := x.p
	r := eipAssociate{targetType: p.String("InstanceType")}
	var err error
	if r.id, err = required(p, "AllocationId"); err != nil {
		return nil, err
	}
	if r.target, err = required(p, "InstanceId"); err != nil {
		return nil, err
	}
	if r.targetType == "" {
		r.targetType = "EcsInstance"
	}
	if r.targetType != "EcsInstance" && r.targetType != "NetworkInterface" {
		return nil, apiErr(400, CodeEIPInstanceType, "The specified value of InstanceType is not supported.")
	}
	if r.privateIP, err = p.Addr("PrivateIpAddress"); err != nil {
		return nil, err
	}
	return ack(c.w.associateEIP(r))
}

func (c *Cloud) unassociateEipAddress(x *call) (response, error) {
	return changeByID(x, "AllocationId", func(id string) error {
		target, err := required(x.p, "InstanceId")
		if err != nil {
			return err
		}
		priv, err := x.p.Addr("PrivateIpAddress")
		if err != nil {
			return err
		}
		return c.w.unassociateEIP(id, target, priv)
	})
}

func (c *Cloud) releaseEipAddress(x *call) (response, error) {
	return changeByID(x, "AllocationId", c.w.releaseEIP)
}

type eipJSON struct {
	AllocationID       string `json:"AllocationId"`
	IPAddress          string `json:"IpAddress"`
	PrivateIPAddress   string `json:"PrivateIpAddress"`
	InstanceID         string `json:"InstanceId"`
	InstanceType       string `json:"InstanceType"`
	InstanceRegionID   string `json:"InstanceRegionId"`
	Status             string `json:"Status"`
	Bandwidth          string `json:"Bandwidth"`
	InternetChargeType string `json:"InternetChargeType"`
	ChargeType         string `json:"ChargeType"`
	ISP                string `json:"ISP"`
	Name               string `json:"Name"`
	Description        string `json:"Description"`
	RegionID           string `json:"RegionId"`
	AllocationTime     string `json:"AllocationTime"`
	BandwidthPackageID string `json:"BandwidthPackageId"`
	// BandwidthPackageType is CommonBandwidthPackage in one, else "".
	BandwidthPackageType string   `json:"BandwidthPackageType"`
	Tags                 tagsJSON `json:"Tags"`
	OperationLocks       struct {
		LockReason []struct {
			LockReason string `json:"LockReason"`
		} `json:"LockReason"`
	} `json:"OperationLocks"`
}

type describeEipAddressesResponse struct {
	base
	pageNumbers
	EipAddresses struct {
		EipAddress []eipJSON `json:"EipAddress"`
	} `json:"EipAddresses"`
}

func (c *Cloud) describeEipAddresses(x *call) (response, error) {
	p := x.p
	pg, err := parsePaging(p, 100, 0)
	if err != nil {
		return nil, err
	}
	f := eipFilter{address: p.String("EipAddress"), status: p.String("Status"), boundType: p.String("AssociatedInstanceType"),
		boundTo: p.String("AssociatedInstanceId")}
	for _, t := range p.Tags("Tag") {
		f.tags = append(f.tags, tag{Key: t.Key, Value: t.Value})
	}
	if s := p.String("AllocationId"); s != "" {
		f.ids = strings.Split(s, ",")
	}
	switch f.boundType {
	case "", "EcsInstance", "NetworkInterface", "SlbInstance", "Nat", "HaVip":
	default:
		return nil, apiErr(400, "InvalidIAssociatedInstanceType.ValueNotSupported", "The specified value of AssociatedInstanceType is not supported.")
	}
	found := c.w.findEIPs(f, pg)
	resp := &describeEipAddressesResponse{pageNumbers: numbersOf(pg, found)}
	resp.EipAddresses.EipAddress = renderAll(found.items, c.eipJSON)
	return resp, nil
}

func (c *Cloud) eipJSON(e eip) eipJSON {
	j := eipJSON{AllocationID: e.ID, IPAddress: e.Address.String(), InstanceID: e.InstanceID,
		InstanceType: e.InstanceType, Status: e.Status, Bandwidth: e.Bandwidth, InternetChargeType: e.InternetChargeType,
		ChargeType: "PostPaid", ISP: e.ISP, Name: e.Name, Description: e.Description, RegionID: c.region, AllocationTime: apiTime(e.CreatedAt),
		BandwidthPackageID: e.BandwidthPackageID, Tags: tagsJSON{Tag: tagList(e.Tags)}}
	if e.BandwidthPackageID != "" {
		j.BandwidthPackageType = "CommonBandwidthPackage"
	}
	if e.InstanceID != "" {
		j.InstanceRegionID = c.region
		if e.PrivateIP.IsValid() {
			j.PrivateIPAddress = e.PrivateIP.String()
		}
	}
	j.OperationLocks.LockReason = []struct {
		LockReason string `json:"LockReason"`
	}{}
	return j
}

// addCommonBandwidthPackageIp puts an EIP (IpInstanceId) into an
// Internet Shared Bandwidth.
func (c *Cloud) addCommonBandwidthPackageIP(x *call) (response, error) {
	return c.bandwidthPackageIP(x, c.w.addToBandwidthPackage)
}

// removeCommonBandwidthPackageIp takes an EIP out of one.
func (c *Cloud) removeCommonBandwidthPackageIP(x *call) (response, error) {
	return c.bandwidthPackageIP(x, c.w.removeFromBandwidthPackage)
}

func (c *Cloud) bandwidthPackageIP(x *call, change func(pkg, id string) error) (response, error) {
	pkg, err := required(x.p, "BandwidthPackageId")
	if err != nil {
		return nil, err
	}
	if t := x.p.String("IpType"); t != "" && t != "EIP" {
		return nil, apiErr(400, CodeInvalidParameter, "Specified value of \"IpType\" is not valid.")
	}
	return changeByID(x, "IpInstanceId", func(id string) error { return change(pkg, id) })
}
