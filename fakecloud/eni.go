package fakecloud

import (
	"net/netip"
	"slices"
	"time"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// maxSecurityGroupsPerENI is ECS's limit on security groups of one ENI.
const maxSecurityGroupsPerENI = 5

// maxCreateSecondaryIPs is how many secondary IPs CreateNetworkInterface
// may assign at once (current ECS documentation: 49).
const maxCreateSecondaryIPs = 49

// maxAvailableSecondaryIPs is how many secondary addresses of each family
// an ENI that is not attached may hold.
const maxAvailableSecondaryIPs = 10

// maxAssignPerCall bounds one Assign call, which is why clients assign in
// batches of ten.
const maxAssignPerCall = 10

type createENIResponse struct {
	base
	eniJSON
}

func (c *Cloud) createNetworkInterface(x *call) (response, error) {
	p := x.p
	vswID, err := required(p, "VSwitchId")
	if err != nil {
		return nil, err
	}
	sgs := p.List("SecurityGroupIds")
	if g := p.String("SecurityGroupId"); g != "" {
		sgs = append([]string{g}, sgs...)
	}
	if len(sgs) == 0 {
		return nil, errMissing("SecurityGroupId")
	}
	typ := p.String("InstanceType")
	switch typ {
	case "", ENITypeSecondary:
		typ = ENITypeSecondary
	case ENITypeTrunk:
	default:
		return nil, errInvalid("InstanceType", typ)
	}
	explicit, err := p.AddrList("PrivateIpAddress")
	if err != nil {
		return nil, err
	}
	count, err := p.Int("SecondaryPrivateIpAddressCount", 0)
	if err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, errInvalid("SecondaryPrivateIpAddressCount", p.String("SecondaryPrivateIpAddressCount"))
	}
	if count > 0 && len(explicit) > 0 {
		return nil, apiErr(400, "InvalidParameter.Conflict", "PrivateIpAddress.N and SecondaryPrivateIpAddressCount cannot be set together.")
	}
	primary, err := p.Addr("PrimaryIpAddress")
	if err != nil {
		return nil, err
	}
	explicit6, err := p.AddrList("Ipv6Address")
	if err != nil {
		return nil, err
	}
	count6, err := p.Int("Ipv6AddressCount", 0)
	if err != nil {
		return nil, err
	}
	if count6 < 0 || (count6 > 0 && len(explicit6) > 0) {
		return nil, errInvalid("Ipv6AddressCount", p.String("Ipv6AddressCount"))
	}
	tags, err := parseTags(p)
	if err != nil {
		return nil, err
	}
	deleteOnRelease, err := p.Bool("DeleteOnRelease", false)
	if err != nil {
		return nil, err
	}
	srcDst, err := p.Bool("SourceDestCheck", false)
	if err != nil {
		return nil, err
	}
	queues, err := parseQueueNumber(p)
	if err != nil {
		return nil, err
	}
	if err := checkENIText(p); err != nil {
		return nil, err
	}
	if err := checkResourceGroup(p); err != nil {
		return nil, err
	}
	mode := p.String("NetworkInterfaceTrafficMode")
	if mode != "" && mode != "Standard" && mode != "HighPerformance" {
		return nil, errInvalid("NetworkInterfaceTrafficMode", mode)
	}
	n4 := count + len(explicit)
	if n4 > maxCreateSecondaryIPs {
		return nil, apiErr(403, CodeMaxENIPrivateIPs, "An ENI can be created with at most %d secondary private IP addresses.", maxCreateSecondaryIPs)
	}
	if n6 := count6 + len(explicit6); n6 > maxAvailableSecondaryIPs {
		return nil, apiErr(403, CodeIPv6CountExceeded, "An ENI that is not attached can hold at most %d IPv6 addresses.", maxAvailableSecondaryIPs)
	}
	if err := noDuplicates(append(append([]netip.Addr{}, explicit...), explicit6...), primary); err != nil {
		return nil, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if resp, ok, err := c.replayLocked(x, "CreateNetworkInterface"); ok {
		return resp, err
	}
	v := c.st.VSwitches[vswID]
	if v == nil {
		return nil, apiErr(404, CodeVSwitchNotFound, "The specified VSwitchId %q is not found.", vswID)
	}
	if len(sgs) > maxSecurityGroupsPerENI {
		return nil, apiErr(400, "JoinedGroupLimitExceed", "An ENI can join at most %d security groups.", maxSecurityGroupsPerENI)
	}
	for _, g := range sgs {
		sg := c.st.SecurityGroups[g]
		if sg == nil {
			return nil, apiErr(404, CodeSecurityGroupNotFound, "The specified security group %q does not exist.", g)
		}
		if sg.VPCID != v.VPCID {
			return nil, apiErr(403, CodeVpcMismatch, "Security group %s is not in the VPC of vSwitch %s.", g, v.ID)
		}
	}
	if (count6 > 0 || len(explicit6) > 0) && v.pool6 == nil {
		return nil, apiErr(403, CodeIPv6NotTurnOn, "IPv6 is not enabled on vSwitch %s.", v.ID)
	}
	if max := c.st.Spec.Settings.MaxENIs; max > 0 && len(c.st.ENIs) >= max {
		return nil, apiErr(403, CodeMaxENICount, "The maximum number of ENIs (%d) of the account has been reached.", max)
	}
	pick := []netip.Addr{}
	if primary.IsValid() {
		pick = append(pick, primary)
	}
	pick = append(pick, explicit...)
	if err := c.checkClaimable4Locked(v, pick); err != nil {
		return nil, err
	}
	if err := c.checkClaimable6Locked(v, explicit6); err != nil {
		return nil, err
	}
	need := count
	if !primary.IsValid() {
		need++
	}
	if v.pool4.available() < need+len(pick) {
		return nil, c.errExhaustedLocked(v)
	}
	// Validation is complete; from here on the world changes.
	now := c.now()
	for _, a := range pick {
		_ = v.pool4.claim(a)
	}
	auto, _ := v.pool4.take(need)
	if !primary.IsValid() {
		primary, auto = auto[0], auto[1:]
	}
	addrs := append(append([]netip.Addr{}, explicit...), auto...)
	e := &eni{
		ID: c.st.newID("eni"), Name: p.String("NetworkInterfaceName"), Description: p.String("Description"),
		Type: typ, Status: ENIAvailable, VSwitchID: v.ID, VPCID: v.VPCID, ZoneID: v.ZoneID, MAC: c.st.newMAC(),
		SecurityGroups: dedupe(sgs), PrimaryIP: primary, Tags: tags, DeleteOnRelease: deleteOnRelease,
		SourceDestCheck: srcDst, ResourceGroupID: p.String("ResourceGroupId"), TrafficMode: mode,
		QueueNumber: queues, CreatedAt: now,
		VisibleAt: now.Add(c.scale(max(c.st.Spec.Settings.ConsistencyWindow.D(), x.hide))),
	}
	for _, a := range addrs {
		e.IPv4 = append(e.IPv4, addrRec{Addr: a, At: now})
	}
	if v.pool6 != nil {
		for _, a := range explicit6 {
			_ = v.pool6.claim(a)
			e.IPv6 = append(e.IPv6, addrRec{Addr: a, At: now})
		}
		for _, a := range v.pool6.take(count6) {
			e.IPv6 = append(e.IPv6, addrRec{Addr: a, At: now})
		}
	}
	c.st.ENIs[e.ID] = e
	c.st.macs[e.MAC] = e.ID
	c.dirty.eni(e.ID)
	resp := &createENIResponse{eniJSON: c.eniJSONLocked(e)}
	resp.Attachment = nil
	c.rememberLocked(x, "CreateNetworkInterface", resp)
	return resp, c.commitLocked()
}

// errExhaustedLocked is what a dry vSwitch answers, per settings.
func (c *Cloud) errExhaustedLocked(v *vswitch) error {
	code := c.st.Spec.Settings.ExhaustionCode
	if code == CodeQuotaPrivateIP {
		return apiErr(403, code, "The private IP address quota of vSwitch %s is exhausted.", v.ID)
	}
	return apiErr(403, CodeIPNotEnough, "The specified VSwitch %q has not enough IpAddress.", v.ID)
}

func (c *Cloud) checkClaimable4Locked(v *vswitch, addrs []netip.Addr) error {
	for _, a := range addrs {
		off, ok := v.pool4.offset(a)
		switch {
		case !ok || v.pool4.reserved[off]:
			return apiErr(403, CodeIPInvalid, "The specified IpAddress %q is not valid in VSwitch CIDR block %q.", a, v.CIDR)
		case v.pool4.isUsed(off):
			return apiErr(403, CodeIPAssigned, "The specified IpAddress %q is already assigned.", a)
		}
	}
	return nil
}

func (c *Cloud) checkClaimable6Locked(v *vswitch, addrs []netip.Addr) error {
	for _, a := range addrs {
		switch {
		case v.pool6 == nil || !v.IPv6CIDR.Contains(a) || a == v.pool6.gateway() || a == v.IPv6CIDR.Addr():
			return apiErr(403, CodeIPInvalid, "The specified IPv6 address %q is not valid in VSwitch CIDR block %q.", a, v.IPv6CIDR)
		case v.pool6.used[a]:
			return apiErr(403, CodeIPAssigned, "The specified IPv6 address %q is already assigned.", a)
		}
	}
	return nil
}

func noDuplicates(addrs []netip.Addr, extra netip.Addr) error {
	seen := map[netip.Addr]bool{}
	if extra.IsValid() {
		seen[extra] = true
	}
	for _, a := range addrs {
		if seen[a] {
			return apiErr(400, CodeIPDuplicated, "Specified private IP address is duplicated.")
		}
		seen[a] = true
	}
	return nil
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// eniAndInstanceLocked reads NetworkInterfaceId and InstanceId and looks
// both up, as Attach and Detach do.
func (c *Cloud) eniAndInstanceLocked(p wire.Params) (*eni, *instance, error) {
	e, err := c.eniLocked(p)
	if err != nil {
		return nil, nil, err
	}
	instID, err := required(p, "InstanceId")
	if err != nil {
		return nil, nil, err
	}
	in := c.st.Instances[instID]
	if in == nil {
		return nil, nil, errEcsNotFound(instID)
	}
	return e, in, nil
}

// eniLocked reads NetworkInterfaceId and looks the ENI up.
func (c *Cloud) eniLocked(p wire.Params) (*eni, error) {
	id, err := required(p, "NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	e := c.st.ENIs[id]
	if e == nil {
		return nil, errENINotFound(id)
	}
	return e, nil
}

func (c *Cloud) attachNetworkInterface(x *call) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, in, err := c.eniAndInstanceLocked(x.p)
	if err != nil {
		return nil, err
	}
	id, instID := e.ID, in.ID
	if e.Type == ENITypePrimary {
		return nil, apiErr(403, CodeInvalidENIType, "The primary ENI %s cannot be attached.", id)
	}
	if e.Status != ENIAvailable {
		return nil, errENIState(id, ENIAvailable, e.Status)
	}
	if err := c.checkHotplugLocked(in); err != nil {
		return nil, err
	}
	if e.VPCID != in.VPCID {
		return nil, apiErr(403, CodeVpcMismatch, "ENI %s and instance %s are not in the same VPC.", id, instID)
	}
	if e.ZoneID != in.ZoneID {
		return nil, apiErr(403, CodeZoneMismatch, "ENI %s (%s) and instance %s (%s) are not in the same zone.", id, e.ZoneID, instID, in.ZoneID)
	}
	t, _ := c.instanceTypeLocked(in.InstanceType)
	attached := c.st.enisOf(instID)
	if len(attached) >= t.EniQuantity {
		return nil, apiErr(403, CodeENIPerInstanceLimit, "The maximum number of ENIs (%d) that can be attached to instance %s (%s) has been reached.", t.EniQuantity, instID, in.InstanceType)
	}
	e.Status, e.InstanceID, e.DeviceIndex = ENIAttaching, instID, freeDeviceIndex(attached)
	e.StaleInstanceID, e.StaleUntil = "", time.Time{}
	e.Due = c.scheduleLocked(eniKey(id), c.st.Spec.Settings.AttachDelay.D())
	c.dirty.eni(id)
	return &base{}, c.commitLocked()
}

// checkHotplugLocked refuses attach/detach where ECS would: instances not
// Running or Stopped, and types that need Stopped while Running.
func (c *Cloud) checkHotplugLocked(in *instance) error {
	if in.Status != StatusRunning && in.Status != StatusStopped {
		return apiErr(400, CodeInvalidEcsState, "The operation is not allowed while instance %s is %s.", in.ID, in.Status)
	}
	if t, _ := c.instanceTypeLocked(in.InstanceType); t.AttachRequiresStopped && in.Status != StatusStopped {
		return apiErr(400, CodeInvalidEcsState, "Instances of type %s must be Stopped to attach or detach ENIs; %s is %s.", in.InstanceType, in.ID, in.Status)
	}
	return nil
}

func freeDeviceIndex(attached []*eni) int {
	used := map[int]bool{}
	for _, e := range attached {
		used[e.DeviceIndex] = true
	}
	i := 1
	for used[i] {
		i++
	}
	return i
}

func (c *Cloud) detachNetworkInterface(x *call) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, in, err := c.eniAndInstanceLocked(x.p)
	if err != nil {
		return nil, err
	}
	id, instID := e.ID, in.ID
	if e.Type == ENITypePrimary {
		return nil, apiErr(400, CodeDetachPrimary, "The primary ENI %s cannot be detached.", id)
	}
	if e.InstanceID != "" && e.InstanceID != instID {
		return nil, apiErr(400, "InvalidParameter.EniNotBelongEcs", "ENI %s is not attached to instance %s.", id, instID)
	}
	if e.Status != ENIInUse {
		return nil, errENIState(id, ENIInUse, e.Status)
	}
	if err := c.checkHotplugLocked(in); err != nil {
		return nil, err
	}
	e.Status = ENIDetaching
	e.Due = c.scheduleLocked(eniKey(id), c.st.Spec.Settings.DetachDelay.D())
	c.dirty.eni(id)
	return &base{}, c.commitLocked()
}

func (c *Cloud) deleteNetworkInterface(x *call) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.eniLocked(x.p)
	if err != nil {
		return nil, err
	}
	id := e.ID
	if e.Type == ENITypePrimary {
		return nil, apiErr(403, CodeInvalidENIType, "The primary ENI %s cannot be deleted.", id)
	}
	if e.Status != ENIAvailable {
		return nil, errENIState(id, ENIAvailable, e.Status)
	}
	e.Status = ENIDeleting
	e.Due = c.scheduleLocked(eniKey(id), c.st.Spec.Settings.DeleteDelay.D())
	c.dirty.eni(id)
	return &base{}, c.commitLocked()
}

func (c *Cloud) modifyNetworkInterfaceAttribute(x *call) (response, error) {
	p := x.p
	id, err := required(p, "NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	sgs := p.List("SecurityGroupId")
	dor, err := p.Bool("DeleteOnRelease", false)
	if err != nil {
		return nil, err
	}
	sdc, err := p.Bool("SourceDestCheck", false)
	if err != nil {
		return nil, err
	}
	queues, err := parseQueueNumber(p)
	if err != nil {
		return nil, err
	}
	if err := checkENIText(p); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.st.ENIs[id]
	if e == nil {
		return nil, errENINotFound(id)
	}
	if e.Type == ENITypePrimary && (len(sgs) > 0 || p.Has("DeleteOnRelease") || p.Has("SourceDestCheck") || p.Has("QueueNumber")) {
		return nil, apiErr(404, "InvalidOperation.PrimaryEniOnlySupportModifyNameAndDesc", "Primary NetworkInterface is only allowed to modify name and description.")
	}
	if len(sgs) > maxSecurityGroupsPerENI {
		return nil, apiErr(400, "JoinedGroupLimitExceed", "An ENI can join at most %d security groups.", maxSecurityGroupsPerENI)
	}
	if len(dedupe(sgs)) != len(sgs) {
		return nil, apiErr(404, "InvalidParameter.SecurityGroupIdRepeated", "The specified security group ids has repeated.")
	}
	for _, g := range sgs {
		sg := c.st.SecurityGroups[g]
		if sg == nil {
			return nil, apiErr(404, CodeSecurityGroupNotFound, "Specified security group not exist.")
		}
		if sg.VPCID != e.VPCID {
			return nil, apiErr(403, CodeVpcMismatch, "Security group %s is not in the VPC of ENI %s.", g, id)
		}
	}
	if p.Has("QueueNumber") && e.Status != ENIAvailable {
		return nil, apiErr(403, CodeInvalidENIState, "Available status or ECS instance attached is Stopped is allowed to modify network interface queue number.")
	}
	if p.Has("NetworkInterfaceName") {
		e.Name = p.String("NetworkInterfaceName")
	}
	if p.Has("Description") {
		e.Description = p.String("Description")
	}
	if len(sgs) > 0 {
		e.SecurityGroups = sgs
	}
	if p.Has("DeleteOnRelease") {
		e.DeleteOnRelease = dor
	}
	if p.Has("SourceDestCheck") {
		e.SourceDestCheck = sdc
	}
	if p.Has("QueueNumber") {
		e.QueueNumber = queues
	}
	c.dirty.eni(id)
	return &base{}, c.commitLocked()
}

type describeENIAttrResponse struct {
	base
	eniJSON
}

func (c *Cloud) describeNetworkInterfaceAttribute(x *call) (response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.eniLocked(x.p)
	if err != nil {
		return nil, err
	}
	if !c.visibleLocked(e) {
		return nil, errENINotFound(e.ID)
	}
	return &describeENIAttrResponse{eniJSON: c.eniJSONLocked(e)}, nil
}

// visibleLocked models eventual consistency, when a world opts in: an ENI
// created through the API is missing from Describe answers until its
// VisibleAt (creation plus the consistencyWindow setting or a consistency
// fault's window; both are 0 by default, as CreateNetworkInterface is
// documented synchronous). ENIs of the world file exist from the start.
func (c *Cloud) visibleLocked(e *eni) bool {
	return !c.now().Before(e.VisibleAt)
}

type describeENIsResponse struct {
	base
	TotalCount           int    `json:"TotalCount"`
	PageNumber           int    `json:"PageNumber,omitempty"`
	PageSize             int    `json:"PageSize,omitempty"`
	NextToken            string `json:"NextToken"`
	NetworkInterfaceSets struct {
		NetworkInterfaceSet []eniJSON `json:"NetworkInterfaceSet"`
	} `json:"NetworkInterfaceSets"`
}

func (c *Cloud) describeNetworkInterfaces(x *call) (response, error) {
	p := x.p
	f, err := parseENIFilter(p)
	if err != nil {
		return nil, err
	}
	pg, err := parsePaging(p, 1000, 500)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var matched []*eni
	for _, e := range c.st.sortedENIs() {
		if f.match(e) && c.visibleLocked(e) {
			matched = append(matched, e)
		}
	}
	page, next, err := pageOf(pg, matched, func(e *eni) string { return e.ID })
	if err != nil {
		return nil, err
	}
	resp := &describeENIsResponse{TotalCount: len(matched), NextToken: next}
	if !pg.token {
		resp.PageNumber, resp.PageSize = pg.number, pg.size
	}
	resp.NetworkInterfaceSets.NetworkInterfaceSet = make([]eniJSON, 0, len(page))
	for _, e := range page {
		resp.NetworkInterfaceSets.NetworkInterfaceSet = append(resp.NetworkInterfaceSets.NetworkInterfaceSet, c.eniJSONLocked(e))
	}
	return resp, nil
}

type eniFilter struct {
	vpc, vsw, instance, typ, status, name, sg, rg, primary string
	ids                                                    []string
	ips, ip6s                                              []netip.Addr
	tags                                                   []tag
}

func parseENIFilter(p wire.Params) (eniFilter, error) {
	f := eniFilter{
		vpc: p.String("VpcId"), vsw: p.String("VSwitchId"), instance: p.String("InstanceId"), typ: p.String("Type"),
		status: p.String("Status"), name: p.String("NetworkInterfaceName"), sg: p.String("SecurityGroupId"),
		rg: p.String("ResourceGroupId"), primary: p.String("PrimaryIpAddress"), ids: p.List("NetworkInterfaceId"),
	}
	for _, t := range p.Tags("Tag") {
		f.tags = append(f.tags, tag{Key: t.Key, Value: t.Value})
	}
	for _, s := range p.List("PrivateIpAddress") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return f, errInvalid("PrivateIpAddress", s)
		}
		f.ips = append(f.ips, a)
	}
	for _, s := range p.List("Ipv6Address") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return f, errInvalid("Ipv6Address", s)
		}
		f.ip6s = append(f.ip6s, a)
	}
	return f, nil
}

func (f eniFilter) match(e *eni) bool {
	switch {
	case f.vpc != "" && f.vpc != e.VPCID,
		f.vsw != "" && f.vsw != e.VSwitchID,
		f.instance != "" && f.instance != e.InstanceID,
		f.typ != "" && f.typ != e.Type,
		f.status != "" && f.status != e.Status,
		f.name != "" && f.name != e.Name,
		f.sg != "" && !slices.Contains(e.SecurityGroups, f.sg),
		f.rg != "" && f.rg != e.ResourceGroupID,
		f.primary != "" && f.primary != e.PrimaryIP.String(),
		len(f.ids) > 0 && !slices.Contains(f.ids, e.ID):
		return false
	}
	if len(f.ips) > 0 && !slices.ContainsFunc(f.ips, func(a netip.Addr) bool {
		return a == e.PrimaryIP || slices.ContainsFunc(e.IPv4, func(r addrRec) bool { return r.Addr == a })
	}) {
		return false
	}
	if len(f.ip6s) > 0 && !slices.ContainsFunc(f.ip6s, func(a netip.Addr) bool {
		return slices.ContainsFunc(e.IPv6, func(r addrRec) bool { return r.Addr == a })
	}) {
		return false
	}
	return matchTags(e.Tags, f.tags)
}

// matchTags reports whether have carries every filter tag (a filter tag
// without a value matches any value).
func matchTags(have, want []tag) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h tag) bool {
			return h.Key == w.Key && (w.Value == "" || h.Value == w.Value)
		}) {
			return false
		}
	}
	return true
}
