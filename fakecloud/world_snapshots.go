package fakecloud

import (
	"net/netip"
	"sort"
)

// What the world's queries hand the API layer: copies of records taken
// under the lock, with what rendering them needs from elsewhere in the
// state, so that responses are built after the lock is released.

// eniSnap is a copy of an ENI's record with the EIPs bound to its
// addresses.
type eniSnap struct {
	eni
	eips map[netip.Addr]eipRef
}

// eipRef names an EIP bound to an address.
type eipRef struct {
	id      string
	address netip.Addr
}

// instanceSnap is a copy of an instance's record with its type, its
// primary address and, when asked for, its ENIs.
type instanceSnap struct {
	instance
	typ       InstanceType
	primaryIP netip.Addr // invalid when the primary ENI is gone
	enis      []eniSnap
}

// vswitchSnap is a copy of a vSwitch with its free address count and
// route table. IPv6CIDR is valid only when IPv6 is enabled on it.
type vswitchSnap struct {
	vswitch
	available    int
	routeTableID string
}

// vpcSnap is a copy of a VPC with its vSwitches, sorted.
type vpcSnap struct {
	vpc
	vswitchIDs []string
}

// page is one page of a Describe answer.
type page[S any] struct {
	items []S
	total int    // matches on all pages
	next  string // the key the following page starts at; "" on the last
}

// pageLocked is the shape of every Describe: the records of m that keep
// accepts, ordered by key, cut to page pg and copied out with snap.
func pageLocked[T, S any](m map[string]*T, keep func(*T) bool, key func(*T) string, pg paging, snap func(*T) S) page[S] {
	var matched []*T
	for _, x := range m {
		if keep(x) {
			matched = append(matched, x)
		}
	}
	sort.Slice(matched, func(i, j int) bool { return key(matched[i]) < key(matched[j]) })
	items, next := pageOf(pg, matched, key)
	out := page[S]{items: make([]S, 0, len(items)), total: len(matched), next: next}
	for _, x := range items {
		out.items = append(out.items, snap(x))
	}
	return out
}

func (w *world) eniSnapLocked(e *eni) eniSnap {
	s := eniSnap{eni: e.clone()}
	for _, a := range append([]netip.Addr{e.PrimaryIP}, addrsOf(e.IPv4)...) {
		if x := w.eipOfAddrLocked(e.ID, a); x != nil {
			if s.eips == nil {
				s.eips = map[netip.Addr]eipRef{}
			}
			s.eips[a] = eipRef{id: x.ID, address: x.Address}
		}
	}
	return s
}

func (w *world) instanceSnapLocked(in *instance, withENIs bool) instanceSnap {
	s := instanceSnap{instance: in.clone(), typ: w.st.types[in.InstanceType]}
	if p := w.st.ENIs[in.PrimaryENI]; p != nil {
		s.primaryIP = p.PrimaryIP
	}
	if withENIs {
		for _, e := range w.st.enisOf(in.ID) {
			s.enis = append(s.enis, w.eniSnapLocked(e))
		}
	}
	return s
}

func (w *world) vswitchSnapLocked(v *vswitch) vswitchSnap {
	s := vswitchSnap{vswitch: *v, available: v.pool4.available(), routeTableID: w.st.VPCs[v.VPCID].RouteTableID}
	s.pool4, s.pool6 = nil, nil
	s.Reserved = nil
	return s
}

func (w *world) vpcSnapLocked(v *vpc) vpcSnap {
	return vpcSnap{vpc: *v, vswitchIDs: w.vswitchIDsLocked(v.ID)}
}

// vswitchIDsLocked lists the vSwitches of a VPC, sorted.
func (w *world) vswitchIDsLocked(vpcID string) []string {
	out := []string{}
	for _, s := range w.st.VSwitches {
		if s.VPCID == vpcID {
			out = append(out, s.ID)
		}
	}
	sort.Strings(out)
	return out
}

// copyOf is the snapshot of records without slices.
func copyOf[T any](x *T) T { return *x }
