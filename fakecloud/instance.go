package fakecloud

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
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
	want := p.List("InstanceTypes")
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
	c.mu.Lock()
	var types []InstanceType
	for _, t := range c.st.types {
		if (len(want) == 0 || slices.Contains(want, t.InstanceTypeID)) &&
			(len(families) == 0 || slices.Contains(families, t.InstanceTypeFamily)) {
			types = append(types, t)
		}
	}
	c.mu.Unlock()
	sort.Slice(types, func(i, j int) bool { return types[i].InstanceTypeID < types[j].InstanceTypeID })
	page, next, err := pageOf(pg, types, func(t InstanceType) string { return t.InstanceTypeID })
	if err != nil {
		return nil, err
	}
	resp := &describeInstanceTypesResponse{NextToken: next}
	resp.InstanceTypes.InstanceType = make([]instanceTypeJSON, 0, len(page))
	for _, t := range page {
		j := instanceTypeJSON{InstanceTypeID: t.InstanceTypeID, InstanceTypeFamily: t.InstanceTypeFamily,
			CPUCoreCount: t.CPUCoreCount, MemorySize: t.MemorySize, EniQuantity: t.EniQuantity,
			EniTotalQuantity: t.EniTotalQuantity, EniPrivateIPAddressQuantity: t.EniPrivateIPAddressQuantity,
			EniIpv6AddressQuantity: t.EniIPv6AddressQuantity, EniTrunkSupported: t.EniTrunkSupported, NetworkCardQuantity: 1}
		j.NetworkCards.NetworkCardInfo = []struct {
			NetworkCardIndex int `json:"NetworkCardIndex"`
		}{{NetworkCardIndex: 0}}
		j.SupportedBootModes.SupportedBootMode = []string{"UEFI"}
		resp.InstanceTypes.InstanceType = append(resp.InstanceTypes.InstanceType, j)
	}
	return resp, nil
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

func (c *Cloud) instanceJSONLocked(in *instance, withENIs bool) instanceJSON {
	t := c.st.types[in.InstanceType]
	j := instanceJSON{
		InstanceID: in.ID, InstanceName: in.Name, HostName: in.Name, InstanceType: in.InstanceType,
		InstanceTypeFamily: t.InstanceTypeFamily, Status: in.Status, RegionID: c.st.Spec.RegionID, ZoneID: in.ZoneID,
		CPU: t.CPUCoreCount, Memory: int(t.MemorySize * 1024), InstanceNetworkType: "vpc",
		CreationTime: apiTime(in.CreatedAt), SecurityGroupIDs: securityGroupIDs{SecurityGroupID: orEmpty(in.SecurityGroupIDs)},
		InnerIPAddress: ipList{IPAddress: []string{}},
		VpcAttributes:  vpcAttributes{VpcID: in.VPCID, VSwitchID: in.VSwitchID, PrivateIPAddress: ipList{IPAddress: []string{}}},
	}
	if p := c.st.ENIs[in.PrimaryENI]; p != nil {
		j.VpcAttributes.PrivateIPAddress.IPAddress = []string{p.PrimaryIP.String()}
	}
	if withENIs {
		j.OSType = "linux"
		j.Hostname = in.Name
		j.Tags = &tagsJSON{Tag: tagList(in.Tags)}
		j.NetworkInterfaces = &struct {
			NetworkInterface []instanceENIJSON `json:"NetworkInterface"`
		}{NetworkInterface: []instanceENIJSON{}}
		for _, e := range c.st.enisOf(in.ID) {
			ej := c.eniJSONLocked(e)
			j.NetworkInterfaces.NetworkInterface = append(j.NetworkInterfaces.NetworkInterface, instanceENIJSON{
				NetworkInterfaceID: e.ID, MacAddress: e.MAC, PrimaryIPAddress: e.PrimaryIP.String(), Type: e.Type,
				VSwitchID: e.VSwitchID, SecurityGroupIDs: ej.SecurityGroupIDs, PrivateIPSets: ej.PrivateIPSets, Ipv6Sets: ej.Ipv6Sets})
		}
	}
	return j
}

type describeInstancesResponse struct {
	base
	TotalCount int    `json:"TotalCount"`
	PageNumber int    `json:"PageNumber,omitempty"`
	PageSize   int    `json:"PageSize,omitempty"`
	NextToken  string `json:"NextToken"`
	Instances  struct {
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
	p := x.p
	ids, err := jsonList(p, "InstanceIds")
	if err != nil {
		return nil, err
	}
	ips, err := jsonAddrList(p, "PrivateIpAddresses")
	if err != nil {
		return nil, err
	}
	pg, err := parsePaging(p, 100, 100)
	if err != nil {
		return nil, err
	}
	status := p.String("Status")
	switch status {
	case "", StatusRunning, StatusStopped, "Starting", "Stopping", "Pending":
	default:
		return nil, apiErr(404, "InvalidStatus.NotFound", "The specified Status is not found")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var matched []*instance
	for _, in := range c.st.Instances {
		prim := c.st.ENIs[in.PrimaryENI]
		if (len(ids) > 0 && !slices.Contains(ids, in.ID)) ||
			(len(ips) > 0 && (prim == nil || !slices.Contains(ips, prim.PrimaryIP.String()))) ||
			(status != "" && status != in.Status) ||
			(p.String("VpcId") != "" && p.String("VpcId") != in.VPCID) ||
			(p.String("VSwitchId") != "" && p.String("VSwitchId") != in.VSwitchID) ||
			(p.String("ZoneId") != "" && p.String("ZoneId") != in.ZoneID) ||
			(p.String("InstanceType") != "" && p.String("InstanceType") != in.InstanceType) {
			continue
		}
		matched = append(matched, in)
	}
	sort.Slice(matched, func(i, j int) bool { return matched[i].ID < matched[j].ID })
	page, next, err := pageOf(pg, matched, func(in *instance) string { return in.ID })
	if err != nil {
		return nil, err
	}
	resp := &describeInstancesResponse{TotalCount: len(matched), NextToken: next}
	if !pg.token {
		resp.PageNumber, resp.PageSize = pg.number, pg.size
	}
	resp.Instances.Instance = make([]instanceJSON, 0, len(page))
	for _, in := range page {
		resp.Instances.Instance = append(resp.Instances.Instance, c.instanceJSONLocked(in, true))
	}
	return resp, nil
}

type describeInstanceAttributeResponse struct {
	base
	instanceJSON
}

func (c *Cloud) describeInstanceAttribute(x *call) (response, error) {
	id, err := required(x.p, "InstanceId")
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.st.Instances[id]
	if in == nil {
		return nil, apiErr(404, CodeInstanceNotFound, "The specified InstanceId does not exist.")
	}
	return &describeInstanceAttributeResponse{instanceJSON: c.instanceJSONLocked(in, false)}, nil
}

// StopInstance stops a running instance. Its ENIs stay attached, as in
// ECS; the hypervisor is told.
func (c *Cloud) StopInstance(id string) error {
	return c.setInstanceStatus(id, StatusRunning, StatusStopped)
}

// StartInstance starts a stopped instance.
func (c *Cloud) StartInstance(id string) error {
	return c.setInstanceStatus(id, StatusStopped, StatusRunning)
}

func (c *Cloud) setInstanceStatus(id, from, to string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.st.Instances[id]
	if in == nil {
		return apiErr(404, CodeInstanceNotFound, "The specified InstanceId does not exist.")
	}
	if in.Status != from {
		return apiErr(403, "IncorrectInstanceStatus", "The current status of the resource does not support this operation: %s is %s.", id, in.Status)
	}
	in.Status = to
	c.dirty.instance(id)
	info := c.instanceInfoLocked(in)
	if to == StatusRunning {
		c.hooks.push(hookEvent{name: "InstanceStarted " + id, call: func(ctx context.Context) error { return c.hv.InstanceStarted(ctx, info) }})
	} else {
		c.hooks.push(hookEvent{name: "InstanceStopped " + id, call: func(ctx context.Context) error { return c.hv.InstanceStopped(ctx, info) }})
	}
	return c.commitLocked()
}

// ReleaseInstance releases an instance as ECS does: secondary ENIs are
// detached to Available, or deleted when DeleteOnRelease is set; the
// primary ENI is deleted with the instance.
func (c *Cloud) ReleaseInstance(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.st.Instances[id]
	if in == nil {
		return apiErr(404, CodeInstanceNotFound, "The specified InstanceId does not exist.")
	}
	info := c.instanceInfoLocked(in)
	for _, e := range c.st.enisOf(id) {
		if e.Type == ENITypePrimary || e.DeleteOnRelease {
			c.removeENILocked(e)
			continue
		}
		e.Status, e.InstanceID, e.DeviceIndex, e.Due = ENIAvailable, "", 0, time.Time{}
		e.StaleInstanceID, e.StaleUntil = "", time.Time{}
		c.dirty.eni(e.ID)
	}
	for rid, r := range c.st.Routes {
		if r.NextHopID == id {
			delete(c.st.Routes, rid)
			c.dirty.route(rid)
			c.pushRoutesLocked(r.TableID)
		}
	}
	if p := c.st.ENIs[in.PrimaryENI]; p != nil {
		c.removeENILocked(p)
	}
	for a, iid := range c.st.byIP {
		if iid == id {
			delete(c.st.byIP, a)
		}
	}
	delete(c.st.Instances, id)
	c.dirty.instance(id)
	c.hooks.push(hookEvent{name: "InstanceReleased " + id, call: func(ctx context.Context) error { return c.hv.InstanceReleased(ctx, info) }})
	return c.commitLocked()
}

// AddInstance creates a running (or stopped) instance with its primary
// ENI, as RunInstances would; the hypervisor is told it started.
func (c *Cloud) AddInstance(spec InstanceSpec) (InstanceInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if spec.ID == "" {
		spec.ID = "i-" + strings.TrimPrefix(c.st.newID("x"), "x-")
	}
	if _, ok := c.st.types[spec.InstanceType]; !ok {
		return InstanceInfo{}, fmt.Errorf("unknown instance type %q", spec.InstanceType)
	}
	for _, g := range spec.SecurityGroupIDs {
		if c.st.SecurityGroups[g] == nil {
			return InstanceInfo{}, fmt.Errorf("unknown security group %q", g)
		}
	}
	if len(spec.SecurityGroupIDs) == 0 {
		return InstanceInfo{}, fmt.Errorf("instance %s needs at least one security group", spec.ID)
	}
	if err := c.st.addInstance(spec, c.now()); err != nil {
		return InstanceInfo{}, err
	}
	in := c.st.Instances[spec.ID]
	c.dirty.instance(in.ID)
	c.dirty.eni(in.PrimaryENI)
	info := c.instanceInfoLocked(in)
	if in.Status == StatusRunning {
		c.hooks.push(hookEvent{name: "InstanceStarted " + in.ID, call: func(ctx context.Context) error { return c.hv.InstanceStarted(ctx, info) }})
	}
	return info, c.commitLocked()
}

// Resync tells the hypervisor the whole current state: every running
// instance with its ENIs and every route table. A lab calls it after it
// (re)connects.
func (c *Cloud) Resync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.st.Instances))
	for id := range c.st.Instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		in := c.st.Instances[id]
		info := c.instanceInfoLocked(in)
		if in.Status == StatusRunning {
			c.hooks.push(hookEvent{name: "InstanceStarted " + id, call: func(ctx context.Context) error { return c.hv.InstanceStarted(ctx, info) }})
		}
	}
	for _, v := range c.st.VPCs {
		c.pushRoutesLocked(v.RouteTableID)
	}
}
