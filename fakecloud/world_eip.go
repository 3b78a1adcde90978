package fakecloud

import (
	"net/netip"
	"slices"
)

// eipAllocate is an AllocateEipAddress request.
type eipAllocate struct {
	name, description, bandwidth, chargeType, isp string
}

// allocateEIP takes an address from the EIP pool. As with createENI,
// render's answer is kept for a repeat with the same ClientToken.
func (w *world) allocateEIP(r eipAllocate, tok clientToken, render func(eip) any) (any, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if raw, ok, err := w.replayLocked(tok); ok {
		return raw, err
	}
	got, ok := w.st.eipPool.take(1)
	if !ok {
		return nil, apiErr(400, CodeEIPQuota, "Elastic IP address quota exceeded")
	}
	e := &eip{ID: w.st.newID("eip"), Address: got[0], Name: r.name, Bandwidth: r.bandwidth,
		InternetChargeType: r.chargeType, ISP: r.isp, Status: EIPAvailable, Description: r.description, CreatedAt: w.now()}
	w.st.EIPs[e.ID] = e
	w.dirty.eip(e.ID)
	answer := render(*e)
	w.rememberLocked(tok, answer)
	return answer, w.commitLocked()
}

// eipAssociate is an AssociateEipAddress request: the EIP, and an
// instance (its primary address) or an ENI (its primary address, or
// privateIP).
type eipAssociate struct {
	id, target, targetType string
	privateIP              netip.Addr
}

// associateEIP starts binding an Available EIP; it is InUse once the EIP
// delay has passed.
func (w *world) associateEIP(r eipAssociate) error {
	return w.changeEIP(r.id, EIPAvailable, func(e *eip) error {
		nic, priv, err := w.eipTargetLocked(r)
		if err != nil {
			return err
		}
		if w.eipOfAddrLocked(nic.ID, priv) != nil {
			return apiErr(400, CodeAssociationDuplicated, "Specified instance already is associated.")
		}
		e.Status, e.InstanceID, e.InstanceType, e.PrivateIP = EIPAssociating, r.target, r.targetType, priv
		e.Due = w.scheduleLocked(eipKey(r.id), w.st.Spec.Settings.EIPDelay.D())
		return nil
	})
}

// changeEIP runs change on EIP id, which must be in status want, under
// the lock and journals the EIP when change succeeds.
func (w *world) changeEIP(id, want string, change func(e *eip) error) error {
	return changeOne(w, func() (*eip, error) { return w.eipInStatusLocked(id, want) }, change, func() { w.dirty.eip(id) })
}

// eipTargetLocked finds the ENI and the address an association binds to.
func (w *world) eipTargetLocked(r eipAssociate) (*eni, netip.Addr, error) {
	if r.targetType == "EcsInstance" {
		in := w.st.Instances[r.target]
		if in == nil {
			return nil, netip.Addr{}, apiErr(404, "InvalidInstanId.NotFound", "Specified instance does not exist.")
		}
		nic := w.st.ENIs[in.PrimaryENI]
		return nic, nic.PrimaryIP, nil
	}
	nic := w.st.ENIs[r.target]
	if nic == nil {
		return nil, netip.Addr{}, apiErr(400, CodeNicOrVMNotFound, "Bind nic or vm not exist.")
	}
	priv := r.privateIP
	if !priv.IsValid() {
		priv = nic.PrimaryIP
	}
	if priv != nic.PrimaryIP && !slices.ContainsFunc(nic.IPv4, func(a addrRec) bool { return a.Addr == priv }) {
		return nil, netip.Addr{}, apiErr(400, CodeInvalidParameter, "The private IP %s is not assigned to %s.", priv, r.target)
	}
	return nic, priv, nil
}

// eipInStatusLocked looks an EIP up and checks it is in status want.
func (w *world) eipInStatusLocked(id, want string) (*eip, error) {
	e, err := w.eipLocked(id)
	if err != nil {
		return nil, err
	}
	if e.Status != want {
		return nil, apiErr(400, CodeIncorrectEIPStatus, "Current elastic IP status does not support this operation.")
	}
	return e, nil
}

// unassociateEIP starts unbinding an InUse EIP from target (and from
// privateIP of it, when valid).
func (w *world) unassociateEIP(id, target string, privateIP netip.Addr) error {
	return w.changeEIP(id, EIPInUse, func(e *eip) error {
		if e.InstanceID != target || (privateIP.IsValid() && e.PrivateIP != privateIP) {
			return apiErr(404, "InvalidBindInstance.NotFound", "The specified bind instance does not exist.")
		}
		e.Status = EIPUnassociating
		e.Due = w.scheduleLocked(eipKey(id), w.st.Spec.Settings.EIPDelay.D())
		w.pushEIPsLocked() // it stops forwarding at once
		return nil
	})
}

// releaseEIP returns an Available EIP to the pool. One still in an
// Internet Shared Bandwidth is refused (fakecloud/README.md: the
// reference does not say; the daemon must remove it first, as Terway
// does).
func (w *world) releaseEIP(id string) error {
	return w.changeEIP(id, EIPAvailable, func(e *eip) error {
		if e.BandwidthPackageID != "" {
			return apiErr(400, CodeInvalidOperation, "The EIP %s is in Internet Shared Bandwidth %s; remove it first.", id, e.BandwidthPackageID)
		}
		w.st.eipPool.release(e.Address)
		delete(w.st.EIPs, id)
		return nil
	})
}

// eipFilter is what DescribeEipAddresses selects by; empty fields match
// anything.
type eipFilter struct {
	ids                                 []string
	address, status, boundType, boundTo string
	tags                                []tag
}

// findEIPs returns the page pg of the EIPs f matches, ordered by ID.
func (w *world) findEIPs(f eipFilter, pg paging) page[eip] {
	w.mu.Lock()
	defer w.mu.Unlock()
	return pageLocked(w.st.EIPs, f.match, func(e *eip) string { return e.ID }, pg, copyOf[eip])
}

func (f eipFilter) match(e *eip) bool {
	return (len(f.ids) == 0 || slices.Contains(f.ids, e.ID)) && (f.address == "" || f.address == e.Address.String()) &&
		(f.status == "" || f.status == e.Status) && (f.boundType == "" || f.boundType == e.InstanceType) &&
		(f.boundTo == "" || f.boundTo == e.InstanceID) && matchTags(e.Tags, f.tags)
}

// addToBandwidthPackage puts an EIP into an Internet Shared Bandwidth of
// the world: again into the same one is done already; one in another, or
// of another line (ISP), is refused.
func (w *world) addToBandwidthPackage(pkg, id string) error {
	p, err := w.bandwidthPackage(pkg)
	if err != nil {
		return err
	}
	return changeOne(w, func() (*eip, error) { return w.eipLocked(id) }, func(e *eip) error {
		switch {
		case e.BandwidthPackageID == pkg:
			return nil
		case e.BandwidthPackageID != "":
			return apiErr(400, CodeInvalidOperation, "The EIP %s is in Internet Shared Bandwidth %s already.", id, e.BandwidthPackageID)
		case e.ISP != p.isp():
			return apiErr(400, CodeInvalidOperation, "The line type %s of EIP %s differs from that of Internet Shared Bandwidth %s (%s).", e.ISP, id, pkg, p.isp())
		}
		e.BandwidthPackageID = pkg
		return nil
	}, func() { w.dirty.eip(id) })
}

// removeFromBandwidthPackage takes an EIP out of an Internet Shared
// Bandwidth; one that is not in it is refused, as VPC does.
func (w *world) removeFromBandwidthPackage(pkg, id string) error {
	if _, err := w.bandwidthPackage(pkg); err != nil {
		return err
	}
	return changeOne(w, func() (*eip, error) { return w.eipLocked(id) }, func(e *eip) error {
		if e.BandwidthPackageID != pkg {
			return apiErr(400, CodeIPNotInCbwp, "The EIP %s is not in Internet Shared Bandwidth %s.", id, pkg)
		}
		e.BandwidthPackageID = ""
		return nil
	}, func() { w.dirty.eip(id) })
}

// bandwidthPackage finds an Internet Shared Bandwidth of the world's spec.
func (w *world) bandwidthPackage(id string) (BandwidthPackageSpec, error) {
	for _, p := range w.st.Spec.BandwidthPackages {
		if p.ID == id {
			return p, nil
		}
	}
	return BandwidthPackageSpec{}, apiErr(404, CodeBandwidthPackageNotFound, "The specified bandwidthPackageId does not exist in our records.")
}

// eipLocked looks an EIP up, in any status.
func (w *world) eipLocked(id string) (*eip, error) {
	e := w.st.EIPs[id]
	if e == nil {
		return nil, apiErr(404, CodeAllocationNotFound, "Specified allocation ID is not found.")
	}
	return e, nil
}

// eipOfAddrLocked returns an EIP bound or binding to a private address of
// ENI eniID (to one of addrs, or to any with none given).
func (w *world) eipOfAddrLocked(eniID string, addrs ...netip.Addr) *eip {
	for _, e := range w.st.EIPs {
		if e.InstanceID == "" || (len(addrs) > 0 && !slices.Contains(addrs, e.PrivateIP)) {
			continue
		}
		if e.InstanceID == eniID {
			return e
		}
		if in := w.st.Instances[e.InstanceID]; in != nil && in.PrimaryENI == eniID {
			return e
		}
	}
	return nil
}
