package fakecloud

import (
	"net/netip"
	"slices"
)

// maxAvailableSecondaryIPs is how many secondary addresses of each family
// an ENI that is not attached may hold.
const maxAvailableSecondaryIPs = 10

// ipFamily is what differs between the IPv4 and IPv6 variants of
// Assign/Unassign: in the world (v6, the code of a full ENI) and on the
// wire (the parameter names, the action).
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

// limitLocked is how many addresses of the family e may hold in total
// (for IPv4 including its primary address).
func (w *world) limitLocked(f ipFamily, e *eni) int {
	if e.Status != ENIInUse {
		if f.v6 {
			return maxAvailableSecondaryIPs
		}
		return maxAvailableSecondaryIPs + 1
	}
	in := w.st.Instances[e.InstanceID]
	t, _ := w.instanceTypeLocked(in.InstanceType)
	if f.v6 {
		return t.EniIPv6AddressQuantity
	}
	return t.EniPrivateIPAddressQuantity
}

// addressableENILocked looks up the ENI of an Assign/Unassign call; only
// Available and InUse ENIs take address changes.
func (w *world) addressableENILocked(id string) (*eni, error) {
	e, err := w.eniLocked(id)
	if err != nil {
		return nil, err
	}
	return e, checkAddressable(e)
}

// checkAddressable refuses address changes on an ENI that is neither
// Available nor InUse.
func checkAddressable(e *eni) error {
	if e.Status != ENIAvailable && e.Status != ENIInUse {
		return errENIState(e.ID, "Available or InUse", e.Status)
	}
	return nil
}

// addrAssign is an Assign(PrivateIp|Ipv6)Addresses request: explicit
// addresses or a count to pick, not both.
type addrAssign struct {
	eni      string
	explicit []netip.Addr
	count    int
}

// assignAddrs assigns addresses of family f to an ENI. As with createENI,
// render's answer is kept for a repeat with the same ClientToken.
func (w *world) assignAddrs(f ipFamily, r addrAssign, tok clientToken, render func(got []netip.Addr) any) (any, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if raw, ok, err := w.replayLocked(tok); ok {
		return raw, err
	}
	e, err := w.addressableENILocked(r.eni)
	if err != nil {
		return nil, err
	}
	got, err := w.claimAddrsLocked(f, e, r)
	if err != nil {
		return nil, err
	}
	now := w.now()
	recs, gone := f.recs(e), f.gone(e)
	for _, a := range got {
		*recs = append(*recs, addrRec{Addr: a, At: now})
		*gone = slices.DeleteFunc(*gone, func(r addrRec) bool { return r.Addr == a })
	}
	w.dirty.eni(e.ID)
	w.pushAddressesLocked(e)
	answer := render(got)
	w.rememberLocked(tok, answer)
	return answer, w.commitLocked()
}

// claimAddrsLocked checks an assign against the ENI's limit and its
// vSwitch, then takes the addresses from the vSwitch.
func (w *world) claimAddrsLocked(f ipFamily, e *eni, r addrAssign) ([]netip.Addr, error) {
	v := w.st.VSwitches[e.VSwitchID]
	if f.v6 && v.pool6 == nil {
		return nil, apiErr(403, CodeIPv6NotTurnOn, "IPv6 is not enabled on vSwitch %s.", v.ID)
	}
	n := r.count + len(r.explicit)
	have := len(*f.recs(e))
	if !f.v6 {
		have++ // the primary address counts
	}
	if limit := w.limitLocked(f, e); have+n > limit {
		return nil, apiErr(403, f.countCode, "ENI %s (%s) can hold at most %d addresses; it has %d and %d more were requested.", e.ID, e.Status, limit, have, n)
	}
	if f.v6 {
		if err := checkClaimable6(v, r.explicit); err != nil {
			return nil, err
		}
		for _, a := range r.explicit {
			_ = v.pool6.claim(a)
		}
		return append(r.explicit, v.pool6.take(r.count)...), nil
	}
	if err := checkClaimable4(v, r.explicit); err != nil {
		return nil, err
	}
	if v.pool4.available() < n {
		return nil, w.errExhaustedLocked(v)
	}
	for _, a := range r.explicit {
		_ = v.pool4.claim(a)
	}
	auto, _ := v.pool4.take(r.count)
	return append(r.explicit, auto...), nil
}

// unassignAddrs returns addresses of family f of an ENI to its vSwitch;
// instance metadata keeps listing them for the metadata lag.
func (w *world) unassignAddrs(f ipFamily, id string, addrs []netip.Addr) error {
	return w.changeENI(id, func(e *eni) error {
		if err := checkAddressable(e); err != nil {
			return err
		}
		recs := f.recs(e)
		for _, a := range addrs {
			if !slices.ContainsFunc(*recs, func(r addrRec) bool { return r.Addr == a }) {
				return apiErr(403, CodeIPUnassigned, "The specified IP %q is not assigned on this ENI.", a)
			}
		}
		if x := w.eipOfAddrLocked(e.ID, addrs...); x != nil && !f.v6 && len(addrs) > 0 {
			// The reference does not say (fakecloud/README.md): refused.
			return apiErr(400, CodeInvalidOperation, "The private IP %s is associated with EIP %s; unassociate it first.", x.PrivateIP, x.ID)
		}
		v := w.st.VSwitches[e.VSwitchID]
		now := w.now()
		gone := f.gone(e)
		*gone = slices.DeleteFunc(*gone, func(r addrRec) bool { return w.metadataGoneExpired(r, now) })
		for _, a := range addrs {
			*recs = slices.DeleteFunc(*recs, func(r addrRec) bool { return r.Addr == a })
			*gone = append(*gone, addrRec{Addr: a, At: now})
			if f.v6 {
				v.pool6.release(a)
			} else {
				v.pool4.release(a)
			}
		}
		w.pushAddressesLocked(e)
		return nil
	})
}
