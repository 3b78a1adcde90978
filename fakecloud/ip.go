package fakecloud

import (
	"net/netip"
	"slices"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// ipFamily abstracts what differs between the IPv4 and IPv6 variants of
// Assign/Unassign.
type ipFamily struct {
	v6        bool
	listParam string // PrivateIpAddress / Ipv6Address
	countName string // SecondaryPrivateIpAddressCount / Ipv6AddressCount
	action    string
	countCode string
}

var (
	family4 = ipFamily{listParam: "PrivateIpAddress", countName: "SecondaryPrivateIpAddressCount",
		action: "AssignPrivateIpAddresses", countCode: CodeIPv4CountExceeded}
	family6 = ipFamily{v6: true, listParam: "Ipv6Address", countName: "Ipv6AddressCount",
		action: "AssignIpv6Addresses", countCode: CodeIPv6CountExceeded}
)

func (f ipFamily) recs(e *eni) *[]addrRec {
	if f.v6 {
		return &e.IPv6
	}
	return &e.IPv4
}

func (f ipFamily) gone(e *eni) *[]addrRec {
	if f.v6 {
		return &e.Gone6
	}
	return &e.Gone4
}

// limit is how many addresses of the family e may hold in total (for
// IPv4 including its primary address).
func (c *Cloud) limitLocked(f ipFamily, e *eni) int {
	if e.Status != ENIInUse {
		if f.v6 {
			return maxAvailableSecondaryIPs
		}
		return maxAvailableSecondaryIPs + 1
	}
	in := c.st.Instances[e.InstanceID]
	t, _ := c.instanceTypeLocked(in.InstanceType)
	if f.v6 {
		return t.EniIPv6AddressQuantity
	}
	return t.EniPrivateIPAddressQuantity
}

type assignIPv4Response struct {
	base
	AssignedPrivateIPAddressesSet struct {
		NetworkInterfaceID string `json:"NetworkInterfaceId"`
		PrivateIPSet       struct {
			PrivateIPAddress []string `json:"PrivateIpAddress"`
		} `json:"PrivateIpSet"`
		Ipv4PrefixSet struct {
			Ipv4Prefixes []string `json:"Ipv4Prefixes"`
		} `json:"Ipv4PrefixSet"`
	} `json:"AssignedPrivateIpAddressesSet"`
}

type assignIPv6Response struct {
	base
	NetworkInterfaceID string `json:"NetworkInterfaceId"`
	Ipv6Sets           struct {
		Ipv6Address []string `json:"Ipv6Address"`
	} `json:"Ipv6Sets"`
	Ipv6PrefixSets struct {
		Ipv6Prefix []string `json:"Ipv6Prefix"`
	} `json:"Ipv6PrefixSets"`
}

// addressableENILocked looks up the ENI of an Assign/Unassign call; only
// Available and InUse ENIs take address changes.
func (c *Cloud) addressableENILocked(p wire.Params) (*eni, error) {
	e, err := c.eniLocked(p)
	if err != nil {
		return nil, err
	}
	if e.Status != ENIAvailable && e.Status != ENIInUse {
		return nil, errENIState(e.ID, "Available or InUse", e.Status)
	}
	return e, nil
}

func (c *Cloud) assignPrivateIPAddresses(x *call) (response, error) { return c.assign(x, family4) }
func (c *Cloud) assignIPv6Addresses(x *call) (response, error)      { return c.assign(x, family6) }

func (c *Cloud) assign(x *call, f ipFamily) (response, error) {
	p := x.p
	id, err := required(p, "NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	explicit, err := p.AddrList(f.listParam)
	if err != nil {
		return nil, err
	}
	count, err := p.Int(f.countName, 0)
	if err != nil {
		return nil, err
	}
	switch {
	case count == 0 && len(explicit) == 0:
		return nil, apiErr(400, CodeMissingParameter, "One of %s.N and %s is mandatory for this action.", f.listParam, f.countName)
	case count != 0 && len(explicit) != 0:
		return nil, apiErr(400, "InvalidParameter.Conflict", "%s.N and %s cannot be set together.", f.listParam, f.countName)
	case count < 0 || count > maxAssignPerCall:
		return nil, errInvalid(f.countName, p.String(f.countName))
	case len(explicit) > maxAssignPerCall:
		return nil, errInvalid(f.listParam+".N", "more than 10 addresses")
	}
	if err := noDuplicates(explicit, netip.Addr{}); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp, ok, err := c.replayLocked(x, f.action); ok {
		return resp, err
	}
	e, err := c.addressableENILocked(p)
	if err != nil {
		return nil, err
	}
	v := c.st.VSwitches[e.VSwitchID]
	if f.v6 && v.pool6 == nil {
		return nil, apiErr(403, CodeIPv6NotTurnOn, "IPv6 is not enabled on vSwitch %s.", v.ID)
	}
	n := count + len(explicit)
	have := len(*f.recs(e))
	if !f.v6 {
		have++ // the primary address counts
	}
	if limit := c.limitLocked(f, e); have+n > limit {
		return nil, apiErr(403, f.countCode, "ENI %s (%s) can hold at most %d addresses; it has %d and %d more were requested.", id, e.Status, limit, have, n)
	}
	var got []netip.Addr
	if f.v6 {
		if err := c.checkClaimable6Locked(v, explicit); err != nil {
			return nil, err
		}
		for _, a := range explicit {
			_ = v.pool6.claim(a)
		}
		got = append(explicit, v.pool6.take(count)...)
	} else {
		if err := c.checkClaimable4Locked(v, explicit); err != nil {
			return nil, err
		}
		if v.pool4.available() < n {
			return nil, c.errExhaustedLocked(v)
		}
		for _, a := range explicit {
			_ = v.pool4.claim(a)
		}
		auto, _ := v.pool4.take(count)
		got = append(explicit, auto...)
	}
	now := c.now()
	recs, gone := f.recs(e), f.gone(e)
	for _, a := range got {
		*recs = append(*recs, addrRec{Addr: a, At: now})
		*gone = slices.DeleteFunc(*gone, func(r addrRec) bool { return r.Addr == a })
	}
	c.dirty.eni(id)
	c.pushAddressesLocked(e)
	strs := make([]string, len(got))
	for i, a := range got {
		strs[i] = a.String()
	}
	var resp response
	if f.v6 {
		r := &assignIPv6Response{NetworkInterfaceID: id}
		r.Ipv6Sets.Ipv6Address = strs
		r.Ipv6PrefixSets.Ipv6Prefix = []string{}
		resp = r
	} else {
		r := &assignIPv4Response{}
		r.AssignedPrivateIPAddressesSet.NetworkInterfaceID = id
		r.AssignedPrivateIPAddressesSet.PrivateIPSet.PrivateIPAddress = strs
		r.AssignedPrivateIPAddressesSet.Ipv4PrefixSet.Ipv4Prefixes = []string{}
		resp = r
	}
	c.rememberLocked(x, f.action, resp)
	return resp, c.commitLocked()
}

func (c *Cloud) unassignPrivateIPAddresses(x *call) (response, error) { return c.unassign(x, family4) }
func (c *Cloud) unassignIPv6Addresses(x *call) (response, error)      { return c.unassign(x, family6) }

func (c *Cloud) unassign(x *call, f ipFamily) (response, error) {
	p := x.p
	id, err := required(p, "NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	addrs, err := p.AddrList(f.listParam)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, apiErr(403, CodeMissingParameter, "These parameters %s.N cannot be both empty.", f.listParam)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.addressableENILocked(p)
	if err != nil {
		return nil, err
	}
	recs := f.recs(e)
	for _, a := range addrs {
		if !slices.ContainsFunc(*recs, func(r addrRec) bool { return r.Addr == a }) {
			return nil, apiErr(403, CodeIPUnassigned, "The specified IP %q is not assigned on this ENI.", a)
		}
	}
	v := c.st.VSwitches[e.VSwitchID]
	now := c.now()
	gone := f.gone(e)
	*gone = slices.DeleteFunc(*gone, func(r addrRec) bool { return c.metadataGoneExpired(r, now) })
	for _, a := range addrs {
		*recs = slices.DeleteFunc(*recs, func(r addrRec) bool { return r.Addr == a })
		*gone = append(*gone, addrRec{Addr: a, At: now})
		if f.v6 {
			v.pool6.release(a)
		} else {
			v.pool4.release(a)
		}
	}
	c.dirty.eni(id)
	c.pushAddressesLocked(e)
	return &base{}, c.commitLocked()
}
