package fakecloud

import (
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

type allocateEipResponse struct {
	base
	AllocationID string `json:"AllocationId"`
	EipAddress   string `json:"EipAddress"`
	OrderID      int64  `json:"OrderId,omitempty"`
}

func (c *Cloud) allocateEipAddress(x *call) (response, error) {
	p := x.p
	bw := p.String("Bandwidth")
	if bw == "" {
		bw = "5"
	}
	if n, err := strconv.Atoi(bw); err != nil || n < 1 || n > 500 {
		return nil, apiErr(400, "InvalidBandwidth.Malformed", "The specified Bandwidth is invalid.")
	}
	charge := p.String("InternetChargeType")
	switch charge {
	case "":
		charge = "PayByTraffic"
	case "PayByTraffic", "PayByBandwidth":
	default:
		return nil, apiErr(400, CodeInvalidParameter, "Specified value of \"InternetChargeType\" is not valid")
	}
	isp := p.String("ISP")
	if isp == "" {
		isp = "BGP"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp, ok, err := c.replayLocked(x, "AllocateEipAddress"); ok {
		return resp, err
	}
	got, ok := c.st.eipPool.take(1)
	if !ok {
		return nil, apiErr(400, CodeEIPQuota, "Elastic IP address quota exceeded")
	}
	e := &eip{ID: c.st.newID("eip"), Address: got[0], Name: p.String("Name"), Bandwidth: bw,
		InternetChargeType: charge, ISP: isp, Status: EIPAvailable, CreatedAt: c.now()}
	c.st.EIPs[e.ID] = e
	c.dirty.eip(e.ID)
	resp := &allocateEipResponse{AllocationID: e.ID, EipAddress: e.Address.String()}
	c.rememberLocked(x, "AllocateEipAddress", resp)
	return resp, c.commitLocked()
}

func (c *Cloud) associateEipAddress(x *call) (response, error) {
	p := x.p
	id, err := required(p, "AllocationId")
	if err != nil {
		return nil, err
	}
	target, err := required(p, "InstanceId")
	if err != nil {
		return nil, err
	}
	typ := p.String("InstanceType")
	if typ == "" {
		typ = "EcsInstance"
	}
	if typ != "EcsInstance" && typ != "NetworkInterface" {
		return nil, apiErr(400, CodeEIPInstanceType, "The specified value of InstanceType is not supported.")
	}
	priv, err := p.Addr("PrivateIpAddress")
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.eipInStatusLocked(id, EIPAvailable)
	if err != nil {
		return nil, err
	}
	var nic *eni
	switch typ {
	case "EcsInstance":
		in := c.st.Instances[target]
		if in == nil {
			return nil, apiErr(404, "InvalidInstanId.NotFound", "Specified instance does not exist.")
		}
		nic = c.st.ENIs[in.PrimaryENI]
		priv = nic.PrimaryIP
	case "NetworkInterface":
		nic = c.st.ENIs[target]
		if nic == nil {
			return nil, apiErr(400, CodeNicOrVMNotFound, "Bind nic or vm not exist.")
		}
		if !priv.IsValid() {
			priv = nic.PrimaryIP
		}
		if priv != nic.PrimaryIP && !slices.ContainsFunc(nic.IPv4, func(r addrRec) bool { return r.Addr == priv }) {
			return nil, apiErr(400, CodeInvalidParameter, "The private IP %s is not assigned to %s.", priv, target)
		}
	}
	if c.eipOnLocked(nic.ID, priv) != nil {
		return nil, apiErr(400, CodeAssociationDuplicated, "Specified instance already is associated.")
	}
	e.Status, e.InstanceID, e.InstanceType, e.PrivateIP = EIPAssociating, target, typ, priv
	e.Due = c.scheduleLocked(eipKey(id), c.st.Spec.Settings.EIPDelay.D())
	c.dirty.eip(id)
	return &base{}, c.commitLocked()
}

// eipInStatusLocked looks an EIP up and checks it is in status want.
func (c *Cloud) eipInStatusLocked(id, want string) (*eip, error) {
	e := c.st.EIPs[id]
	if e == nil {
		return nil, apiErr(404, CodeAllocationNotFound, "Specified allocation ID is not found.")
	}
	if e.Status != want {
		return nil, apiErr(400, CodeIncorrectEIPStatus, "Current elastic IP status does not support this operation.")
	}
	return e, nil
}

// eipOnLocked returns the EIP bound (or binding) to address a of ENI
// eniID, if any.
func (c *Cloud) eipOnLocked(eniID string, a netip.Addr) *eip {
	for _, e := range c.st.EIPs {
		if e.InstanceID == "" || e.PrivateIP != a {
			continue
		}
		if e.InstanceID == eniID {
			return e
		}
		if in := c.st.Instances[e.InstanceID]; in != nil && in.PrimaryENI == eniID {
			return e
		}
	}
	return nil
}

func (c *Cloud) unassociateEipAddress(x *call) (response, error) {
	p := x.p
	id, err := required(p, "AllocationId")
	if err != nil {
		return nil, err
	}
	target, err := required(p, "InstanceId")
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.eipInStatusLocked(id, EIPInUse)
	if err != nil {
		return nil, err
	}
	if e.InstanceID != target {
		return nil, apiErr(404, "InvalidBindInstance.NotFound", "The specified bind instance does not exist.")
	}
	e.Status = EIPUnassociating
	e.Due = c.scheduleLocked(eipKey(id), c.st.Spec.Settings.EIPDelay.D())
	c.dirty.eip(id)
	return &base{}, c.commitLocked()
}

func (c *Cloud) releaseEipAddress(x *call) (response, error) {
	id, err := required(x.p, "AllocationId")
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.eipInStatusLocked(id, EIPAvailable)
	if err != nil {
		return nil, err
	}
	c.st.eipPool.release(e.Address)
	delete(c.st.EIPs, id)
	c.dirty.eip(id)
	return &base{}, c.commitLocked()
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
	RegionID           string `json:"RegionId"`
	AllocationTime     string `json:"AllocationTime"`
	OperationLocks     struct {
		LockReason []struct {
			LockReason string `json:"LockReason"`
		} `json:"LockReason"`
	} `json:"OperationLocks"`
}

type describeEipAddressesResponse struct {
	base
	TotalCount   int `json:"TotalCount"`
	PageNumber   int `json:"PageNumber"`
	PageSize     int `json:"PageSize"`
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
	var ids []string
	if s := p.String("AllocationId"); s != "" {
		ids = strings.Split(s, ",")
	}
	atype := p.String("AssociatedInstanceType")
	if atype != "" && atype != "EcsInstance" && atype != "NetworkInterface" && atype != "SlbInstance" &&
		atype != "Nat" && atype != "HaVip" {
		return nil, apiErr(400, "InvalidIAssociatedInstanceType.ValueNotSupported", "The specified value of AssociatedInstanceType is not supported.")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var matched []*eip
	for _, e := range c.st.EIPs {
		if (len(ids) > 0 && !slices.Contains(ids, e.ID)) ||
			(p.String("EipAddress") != "" && p.String("EipAddress") != e.Address.String()) ||
			(p.String("Status") != "" && p.String("Status") != e.Status) ||
			(atype != "" && atype != e.InstanceType) ||
			(p.String("AssociatedInstanceId") != "" && p.String("AssociatedInstanceId") != e.InstanceID) {
			continue
		}
		matched = append(matched, e)
	}
	sort.Slice(matched, func(i, j int) bool { return matched[i].ID < matched[j].ID })
	page, _, _ := pageOf(pg, matched, func(e *eip) string { return e.ID })
	resp := &describeEipAddressesResponse{TotalCount: len(matched), PageNumber: pg.number, PageSize: pg.size}
	resp.EipAddresses.EipAddress = make([]eipJSON, 0, len(page))
	for _, e := range page {
		j := eipJSON{AllocationID: e.ID, IPAddress: e.Address.String(), InstanceID: e.InstanceID,
			InstanceType: e.InstanceType, Status: e.Status, Bandwidth: e.Bandwidth, InternetChargeType: e.InternetChargeType,
			ChargeType: "PostPaid", ISP: e.ISP, Name: e.Name, RegionID: c.st.Spec.RegionID,
			AllocationTime: apiTime(e.CreatedAt)}
		if e.InstanceID != "" {
			j.InstanceRegionID = c.st.Spec.RegionID
			if e.PrivateIP.IsValid() {
				j.PrivateIPAddress = e.PrivateIP.String()
			}
		}
		j.OperationLocks.LockReason = []struct {
			LockReason string `json:"LockReason"`
		}{}
		resp.EipAddresses.EipAddress = append(resp.EipAddresses.EipAddress, j)
	}
	return resp, nil
}
