package fakecloud

import (
	"net/netip"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// maxAssignPerCall bounds one Assign call, which is why clients assign in
// batches of ten.
const maxAssignPerCall = 10

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

func (c *Cloud) assignPrivateIPAddresses(x *call) (response, error) { return c.assign(x, family4) }
func (c *Cloud) assignIPv6Addresses(x *call) (response, error)      { return c.assign(x, family6) }

func (c *Cloud) assign(x *call, f ipFamily) (response, error) {
	r, err := decodeAssign(x.p, f)
	if err != nil {
		return nil, err
	}
	return answered(c.w.assignAddrs(f, r, x.token(f.action), func(got []netip.Addr) any {
		return assignedResponse(f, r.eni, addrStrings(got))
	}))
}

// decodeAssign reads an Assign(PrivateIp|Ipv6)Addresses request: at most
// ten addresses, named or counted.
func decodeAssign(p wire.Params, f ipFamily) (addrAssign, error) {
	var r addrAssign
	var err error
	if r.eni, err = required(p, "NetworkInterfaceId"); err != nil {
		return r, err
	}
	if r.explicit, err = p.AddrList(f.listParam); err != nil {
		return r, err
	}
	if r.count, err = p.Int(f.countName, 0); err != nil {
		return r, err
	}
	switch {
	case r.count == 0 && len(r.explicit) == 0:
		return r, apiErr(400, CodeMissingParameter, "One of %s.N and %s is mandatory for this action.", f.listParam, f.countName)
	case r.count != 0 && len(r.explicit) != 0:
		return r, apiErr(400, "InvalidParameter.Conflict", "%s.N and %s cannot be set together.", f.listParam, f.countName)
	case r.count < 0 || r.count > maxAssignPerCall:
		return r, errInvalid(f.countName, p.String(f.countName))
	case len(r.explicit) > maxAssignPerCall:
		return r, errInvalid(f.listParam+".N", "more than 10 addresses")
	}
	return r, noDuplicates(r.explicit, netip.Addr{})
}

// assignedResponse is the answer of an Assign call that assigned addrs.
func assignedResponse(f ipFamily, eniID string, addrs []string) response {
	if f.v6 {
		r := &assignIPv6Response{NetworkInterfaceID: eniID}
		r.Ipv6Sets.Ipv6Address = addrs
		r.Ipv6PrefixSets.Ipv6Prefix = []string{}
		return r
	}
	r := &assignIPv4Response{}
	r.AssignedPrivateIPAddressesSet.NetworkInterfaceID = eniID
	r.AssignedPrivateIPAddressesSet.PrivateIPSet.PrivateIPAddress = addrs
	r.AssignedPrivateIPAddressesSet.Ipv4PrefixSet.Ipv4Prefixes = []string{}
	return r
}

func (c *Cloud) unassignPrivateIPAddresses(x *call) (response, error) { return c.unassign(x, family4) }
func (c *Cloud) unassignIPv6Addresses(x *call) (response, error)      { return c.unassign(x, family6) }

func (c *Cloud) unassign(x *call, f ipFamily) (response, error) {
	id, err := required(x.p, "NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	addrs, err := x.p.AddrList(f.listParam)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, apiErr(403, CodeMissingParameter, "These parameters %s.N cannot be both empty.", f.listParam)
	}
	return ack(c.w.unassignAddrs(f, id, addrs))
}
