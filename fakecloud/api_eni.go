package fakecloud

import (
	"net/netip"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// The ECS ENI actions: each decodes and checks its request, makes one
// call to the world and renders what it gets back.

// maxCreateSecondaryIPs is how many secondary IPs CreateNetworkInterface
// may assign at once (current ECS documentation: 49).
const maxCreateSecondaryIPs = 49

type createENIResponse struct {
	base
	eniJSON
}

func (c *Cloud) createNetworkInterface(x *call) (response, error) {
	r, err := decodeCreateENI(x.p)
	if err != nil {
		return nil, err
	}
	r.hide = x.hide
	return answered(c.w.createENI(r, x.token("CreateNetworkInterface"), func(e eniSnap) any {
		resp := &createENIResponse{eniJSON: c.eniJSON(e)}
		resp.Attachment = nil
		return resp
	}))
}

// decodeCreateENI reads a CreateNetworkInterface request and refuses
// what is wrong whatever the state.
func decodeCreateENI(p wire.Params) (eniCreate, error) {
	var r eniCreate
	var err error
	if r.vswitch, err = required(p, "VSwitchId"); err != nil {
		return r, err
	}
	r.securityGroups = p.List("SecurityGroupIds")
	if g := p.String("SecurityGroupId"); g != "" {
		r.securityGroups = append([]string{g}, r.securityGroups...)
	}
	if len(r.securityGroups) == 0 {
		return r, errMissing("SecurityGroupId")
	}
	switch r.typ = p.String("InstanceType"); r.typ {
	case "", ENITypeSecondary:
		r.typ = ENITypeSecondary
	case ENITypeTrunk:
	default:
		return r, errInvalid("InstanceType", r.typ)
	}
	if err := decodeCreateENIAddrs(p, &r); err != nil {
		return r, err
	}
	if err := decodeCreateENIAttrs(p, &r); err != nil {
		return r, err
	}
	if len(r.ips)+r.count > maxCreateSecondaryIPs {
		return r, apiErr(403, CodeMaxENIPrivateIPs, "An ENI can be created with at most %d secondary private IP addresses.", maxCreateSecondaryIPs)
	}
	if len(r.ips6)+r.count6 > maxAvailableSecondaryIPs {
		return r, apiErr(403, CodeIPv6CountExceeded, "An ENI that is not attached can hold at most %d IPv6 addresses.", maxAvailableSecondaryIPs)
	}
	return r, noDuplicates(append(append([]netip.Addr{}, r.ips...), r.ips6...), r.primary)
}

// decodeCreateENIAddrs reads the addresses of a CreateNetworkInterface
// request: explicit ones or counts, not both.
func decodeCreateENIAddrs(p wire.Params, r *eniCreate) error {
	var err error
	if r.ips, err = p.AddrList("PrivateIpAddress"); err != nil {
		return err
	}
	if r.count, err = p.Int("SecondaryPrivateIpAddressCount", 0); err != nil {
		return err
	}
	if r.count < 0 {
		return errInvalid("SecondaryPrivateIpAddressCount", p.String("SecondaryPrivateIpAddressCount"))
	}
	if r.count > 0 && len(r.ips) > 0 {
		return apiErr(400, "InvalidParameter.Conflict", "PrivateIpAddress.N and SecondaryPrivateIpAddressCount cannot be set together.")
	}
	if r.primary, err = p.Addr("PrimaryIpAddress"); err != nil {
		return err
	}
	if r.ips6, err = p.AddrList("Ipv6Address"); err != nil {
		return err
	}
	if r.count6, err = p.Int("Ipv6AddressCount", 0); err != nil {
		return err
	}
	if r.count6 < 0 || (r.count6 > 0 && len(r.ips6) > 0) {
		return errInvalid("Ipv6AddressCount", p.String("Ipv6AddressCount"))
	}
	return nil
}

// decodeCreateENIAttrs reads the other attributes of a
// CreateNetworkInterface request.
func decodeCreateENIAttrs(p wire.Params, r *eniCreate) error {
	var err error
	if r.tags, err = parseTags(p); err != nil {
		return err
	}
	if r.deleteOnRelease, err = p.Bool("DeleteOnRelease", false); err != nil {
		return err
	}
	if r.sourceDestCheck, err = p.Bool("SourceDestCheck", false); err != nil {
		return err
	}
	if r.queues, err = parseQueueNumber(p); err != nil {
		return err
	}
	if err := checkENIText(p); err != nil {
		return err
	}
	if err := checkResourceGroup(p); err != nil {
		return err
	}
	r.name, r.description, r.resourceGroup = p.String("NetworkInterfaceName"), p.String("Description"), p.String("ResourceGroupId")
	r.trafficMode = p.String("NetworkInterfaceTrafficMode")
	if m := r.trafficMode; m != "" && m != "Standard" && m != "HighPerformance" {
		return errInvalid("NetworkInterfaceTrafficMode", m)
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

func (c *Cloud) attachNetworkInterface(x *call) (response, error) {
	return changeByID(x, "NetworkInterfaceId", func(id string) error { return c.w.attachENI(id, x.p.String("InstanceId")) })
}

func (c *Cloud) detachNetworkInterface(x *call) (response, error) {
	return changeByID(x, "NetworkInterfaceId", func(id string) error { return c.w.detachENI(id, x.p.String("InstanceId")) })
}

func (c *Cloud) deleteNetworkInterface(x *call) (response, error) {
	return changeByID(x, "NetworkInterfaceId", c.w.deleteENI)
}

func (c *Cloud) modifyNetworkInterfaceAttribute(x *call) (response, error) {
	id, err := required(x.p, "NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	m, err := decodeModifyENI(x.p)
	if err != nil {
		return nil, err
	}
	return ack(c.w.modifyENI(id, m))
}

// decodeModifyENI reads the attributes a ModifyNetworkInterfaceAttribute
// request sets; a parameter that is sent, even empty, is set.
func decodeModifyENI(p wire.Params) (eniModify, error) {
	m := eniModify{securityGroups: p.List("SecurityGroupId")}
	dor, err := p.Bool("DeleteOnRelease", false)
	if err != nil {
		return m, err
	}
	sdc, err := p.Bool("SourceDestCheck", false)
	if err != nil {
		return m, err
	}
	queues, err := parseQueueNumber(p)
	if err != nil {
		return m, err
	}
	if err := checkENIText(p); err != nil {
		return m, err
	}
	m.name, m.description = sentString(p, "NetworkInterfaceName"), sentString(p, "Description")
	m.deleteOnRelease, m.sourceDestCheck = sent(p, "DeleteOnRelease", dor), sent(p, "SourceDestCheck", sdc)
	m.queues = sent(p, "QueueNumber", queues)
	return m, nil
}

// sent returns &v when parameter name was sent, nil otherwise.
func sent[T any](p wire.Params, name string, v T) *T {
	if !p.Has(name) {
		return nil
	}
	return &v
}

// sentString returns the value of name when it was sent, nil otherwise.
func sentString(p wire.Params, name string) *string { return sent(p, name, p.String(name)) }

type describeENIAttrResponse struct {
	base
	eniJSON
}

func (c *Cloud) describeNetworkInterfaceAttribute(x *call) (response, error) {
	return describeOne(x, "NetworkInterfaceId", c.w.describeENI, func(e eniSnap) response {
		return &describeENIAttrResponse{eniJSON: c.eniJSON(e)}
	})
}

// describeOne is the shape of the Describe*Attribute actions: the ID in
// parameter idParam, one lookup in the world, one rendering.
func describeOne[S any](x *call, idParam string, find func(string) (S, error), render func(S) response) (response, error) {
	id, err := required(x.p, idParam)
	if err != nil {
		return nil, err
	}
	s, err := find(id)
	if err != nil {
		return nil, err
	}
	return render(s), nil
}

type describeENIsResponse struct {
	base
	pageMarks
	NetworkInterfaceSets struct {
		NetworkInterfaceSet []eniJSON `json:"NetworkInterfaceSet"`
	} `json:"NetworkInterfaceSets"`
}

func (c *Cloud) describeNetworkInterfaces(x *call) (response, error) {
	f, err := decodeENIFilter(x.p)
	if err != nil {
		return nil, err
	}
	pg, err := parsePaging(x.p, 1000, 500)
	if err != nil {
		return nil, err
	}
	found := c.w.findENIs(f, pg)
	resp := &describeENIsResponse{pageMarks: marksOf(pg, found)}
	resp.NetworkInterfaceSets.NetworkInterfaceSet = renderAll(found.items, c.eniJSON)
	return resp, nil
}

func decodeENIFilter(p wire.Params) (eniFilter, error) {
	f := eniFilter{
		vpc: p.String("VpcId"), vsw: p.String("VSwitchId"), instance: p.String("InstanceId"), typ: p.String("Type"),
		status: p.String("Status"), name: p.String("NetworkInterfaceName"), sg: p.String("SecurityGroupId"),
		rg: p.String("ResourceGroupId"), primary: p.String("PrimaryIpAddress"), ids: p.List("NetworkInterfaceId"),
	}
	for _, t := range p.Tags("Tag") {
		f.tags = append(f.tags, tag{Key: t.Key, Value: t.Value})
	}
	var err error
	if f.ips, err = addrFilter(p, "PrivateIpAddress"); err != nil {
		return f, err
	}
	f.ip6s, err = addrFilter(p, "Ipv6Address")
	return f, err
}

// addrFilter reads a list of addresses to select by; one that does not
// parse is InvalidParameter.
func addrFilter(p wire.Params, name string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range p.List(name) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, errInvalid(name, s)
		}
		out = append(out, a)
	}
	return out, nil
}

// renderAll renders items with render; the result is never nil, as the
// SDKs want an array for an empty list.
func renderAll[S, J any](items []S, render func(S) J) []J {
	out := make([]J, 0, len(items))
	for _, s := range items {
		out = append(out, render(s))
	}
	return out
}
