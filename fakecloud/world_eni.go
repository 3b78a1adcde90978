package fakecloud

import (
	"net/netip"
	"slices"
	"time"
)

// maxSecurityGroupsPerENI is ECS's limit on security groups of one ENI.
const maxSecurityGroupsPerENI = 5

// eniCreate is a CreateNetworkInterface request, decoded and checked for
// everything that does not depend on the state.
type eniCreate struct {
	vswitch         string
	securityGroups  []string
	typ             string
	primary         netip.Addr   // invalid: pick one
	ips             []netip.Addr // explicit secondary IPv4 addresses
	count           int          // or this many picked
	ips6            []netip.Addr
	count6          int
	tags            []tag
	deleteOnRelease bool
	sourceDestCheck bool
	queues          int
	name            string
	description     string
	resourceGroup   string
	trafficMode     string
	// hide is how long the new ENI stays out of Describe answers (a
	// consistency fault); the consistencyWindow setting applies too.
	hide time.Duration
}

// createENI creates an ENI, Available at once. The answer render makes of
// it is kept for a repeat with the same ClientToken, which gets that
// answer (a replay) instead of a second ENI.
func (w *world) createENI(r eniCreate, tok clientToken, render func(eniSnap) any) (any, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if raw, ok, err := w.replayLocked(tok); ok {
		return raw, err
	}
	v, err := w.checkCreateENILocked(r)
	if err != nil {
		return nil, err
	}
	e := w.newENILocked(r, v)
	answer := render(w.eniSnapLocked(e))
	w.rememberLocked(tok, answer)
	return answer, w.commitLocked()
}

// checkCreateENILocked refuses what ECS refuses before creating anything
// and returns the ENI's vSwitch.
func (w *world) checkCreateENILocked(r eniCreate) (*vswitch, error) {
	v := w.st.VSwitches[r.vswitch]
	if v == nil {
		return nil, apiErr(404, CodeVSwitchNotFound, "The specified VSwitchId %q is not found.", r.vswitch)
	}
	if len(r.securityGroups) > maxSecurityGroupsPerENI {
		return nil, apiErr(400, "JoinedGroupLimitExceed", "An ENI can join at most %d security groups.", maxSecurityGroupsPerENI)
	}
	for _, g := range r.securityGroups {
		notFound := apiErr(404, CodeSecurityGroupNotFound, "The specified security group %q does not exist.", g)
		if err := w.checkSecurityGroupLocked(g, v.VPCID, "vSwitch "+v.ID, notFound); err != nil {
			return nil, err
		}
	}
	if (r.count6 > 0 || len(r.ips6) > 0) && v.pool6 == nil {
		return nil, apiErr(403, CodeIPv6NotTurnOn, "IPv6 is not enabled on vSwitch %s.", v.ID)
	}
	if max := w.st.Spec.Settings.MaxENIs; max > 0 && len(w.st.ENIs) >= max {
		return nil, apiErr(403, CodeMaxENICount, "The maximum number of ENIs (%d) of the account has been reached.", max)
	}
	pick := r.explicit4()
	if err := checkClaimable4(v, pick); err != nil {
		return nil, err
	}
	if err := checkClaimable6(v, r.ips6); err != nil {
		return nil, err
	}
	need := r.count
	if !r.primary.IsValid() {
		need++
	}
	if v.pool4.available() < need+len(pick) {
		return nil, w.errExhaustedLocked(v)
	}
	return v, nil
}

// explicit4 lists the IPv4 addresses the request names: the primary (if
// set) and the secondaries.
func (r eniCreate) explicit4() []netip.Addr {
	pick := []netip.Addr{}
	if r.primary.IsValid() {
		pick = append(pick, r.primary)
	}
	return append(pick, r.ips...)
}

// checkSecurityGroupLocked checks that group g exists (else notFound)
// and is in VPC vpcID, which where (the vSwitch or ENI) is in.
func (w *world) checkSecurityGroupLocked(g, vpcID, where string, notFound error) error {
	sg := w.st.SecurityGroups[g]
	if sg == nil {
		return notFound
	}
	if sg.VPCID != vpcID {
		return apiErr(403, CodeVpcMismatch, "Security group %s is not in the VPC of %s.", g, where)
	}
	return nil
}

// newENILocked creates the ENI of a checked request: its addresses are
// claimed and it is recorded and journalled.
func (w *world) newENILocked(r eniCreate, v *vswitch) *eni {
	now := w.now()
	for _, a := range r.explicit4() {
		_ = v.pool4.claim(a)
	}
	need := r.count
	if !r.primary.IsValid() {
		need++
	}
	auto, _ := v.pool4.take(need)
	primary := r.primary
	if !primary.IsValid() {
		primary, auto = auto[0], auto[1:]
	}
	e := &eni{
		ID: w.st.newID("eni"), Name: r.name, Description: r.description, Type: r.typ, Status: ENIAvailable,
		VSwitchID: v.ID, VPCID: v.VPCID, ZoneID: v.ZoneID, MAC: w.st.newMAC(), SecurityGroups: dedupe(r.securityGroups),
		PrimaryIP: primary, Tags: r.tags, DeleteOnRelease: r.deleteOnRelease, SourceDestCheck: r.sourceDestCheck,
		ResourceGroupID: r.resourceGroup, TrafficMode: r.trafficMode, QueueNumber: r.queues, CreatedAt: now,
		VisibleAt: now.Add(w.scale(max(w.st.Spec.Settings.ConsistencyWindow.D(), r.hide))),
	}
	for _, a := range append(append([]netip.Addr{}, r.ips...), auto...) {
		e.IPv4 = append(e.IPv4, addrRec{Addr: a, At: now})
	}
	if v.pool6 != nil {
		for _, a := range r.ips6 {
			_ = v.pool6.claim(a)
			e.IPv6 = append(e.IPv6, addrRec{Addr: a, At: now})
		}
		for _, a := range v.pool6.take(r.count6) {
			e.IPv6 = append(e.IPv6, addrRec{Addr: a, At: now})
		}
	}
	w.st.ENIs[e.ID] = e
	w.st.macs[e.MAC] = e.ID
	w.dirty.eni(e.ID)
	return e
}

// errExhaustedLocked is what a dry vSwitch answers, per settings.
func (w *world) errExhaustedLocked(v *vswitch) error {
	code := w.st.Spec.Settings.ExhaustionCode
	if code == CodeQuotaPrivateIP {
		return apiErr(403, code, "The private IP address quota of vSwitch %s is exhausted.", v.ID)
	}
	return apiErr(403, CodeIPNotEnough, "The specified VSwitch %q has not enough IpAddress.", v.ID)
}

func checkClaimable4(v *vswitch, addrs []netip.Addr) error {
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

func checkClaimable6(v *vswitch, addrs []netip.Addr) error {
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

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// eniLocked looks an ENI up.
func (w *world) eniLocked(id string) (*eni, error) {
	e := w.st.ENIs[id]
	if e == nil {
		return nil, errENINotFound(id)
	}
	return e, nil
}

// changeENI runs change on ENI id under the lock and journals the ENI
// when change succeeds.
func (w *world) changeENI(id string, change func(e *eni) error) error {
	return changeOne(w, func() (*eni, error) { return w.eniLocked(id) }, change, func() { w.dirty.eni(id) })
}

// changeOne is the shape of a change to one record: under the lock, find
// it, change it, and journal it (mark) when the change succeeds.
func changeOne[T any](w *world, find func() (*T, error), change func(*T) error, mark func()) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	x, err := find()
	if err != nil {
		return err
	}
	if err := change(x); err != nil {
		return err
	}
	mark()
	return w.commitLocked()
}

// hotplugTargetLocked looks up the instance of an attach or detach. It
// is looked up after the ENI: an unknown ENI is reported before a missing
// InstanceId, the order fakecloud has always answered in.
func (w *world) hotplugTargetLocked(instID string) (*instance, error) {
	if instID == "" {
		return nil, errMissing("InstanceId")
	}
	in := w.st.Instances[instID]
	if in == nil {
		return nil, errEcsNotFound(instID)
	}
	return in, nil
}

// attachENI starts attaching an Available ENI to an instance; it is InUse
// once the attach delay has passed and the hypervisor has plugged it.
func (w *world) attachENI(eniID, instID string) error {
	return w.changeENI(eniID, func(e *eni) error {
		in, err := w.hotplugTargetLocked(instID)
		if err != nil {
			return err
		}
		if err := w.checkAttachLocked(e, in); err != nil {
			return err
		}
		e.Status, e.InstanceID, e.DeviceIndex = ENIAttaching, in.ID, freeDeviceIndex(w.st.enisOf(in.ID))
		e.StaleInstanceID, e.StaleUntil = "", time.Time{}
		e.Due = w.scheduleLocked(eniKey(e.ID), w.st.Spec.Settings.AttachDelay.D())
		return nil
	})
}

// checkAttachLocked refuses the attaches ECS refuses.
func (w *world) checkAttachLocked(e *eni, in *instance) error {
	if e.Type == ENITypePrimary {
		return apiErr(403, CodeInvalidENIType, "The primary ENI %s cannot be attached.", e.ID)
	}
	if e.Status != ENIAvailable {
		return errENIState(e.ID, ENIAvailable, e.Status)
	}
	if err := w.checkHotplugLocked(in); err != nil {
		return err
	}
	if e.VPCID != in.VPCID {
		return apiErr(403, CodeVpcMismatch, "ENI %s and instance %s are not in the same VPC.", e.ID, in.ID)
	}
	if e.ZoneID != in.ZoneID {
		return apiErr(403, CodeZoneMismatch, "ENI %s (%s) and instance %s (%s) are not in the same zone.", e.ID, e.ZoneID, in.ID, in.ZoneID)
	}
	t, _ := w.instanceTypeLocked(in.InstanceType)
	if len(w.st.enisOf(in.ID)) >= t.EniQuantity {
		return apiErr(403, CodeENIPerInstanceLimit, "The maximum number of ENIs (%d) that can be attached to instance %s (%s) has been reached.", t.EniQuantity, in.ID, in.InstanceType)
	}
	return nil
}

// checkHotplugLocked refuses attach/detach where ECS would: instances not
// Running or Stopped, and types that need Stopped while Running.
func (w *world) checkHotplugLocked(in *instance) error {
	if in.Status != StatusRunning && in.Status != StatusStopped {
		return apiErr(400, CodeInvalidEcsState, "The operation is not allowed while instance %s is %s.", in.ID, in.Status)
	}
	if t, _ := w.instanceTypeLocked(in.InstanceType); t.AttachRequiresStopped && in.Status != StatusStopped {
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

// detachENI starts detaching an InUse ENI from its instance.
func (w *world) detachENI(eniID, instID string) error {
	return w.changeENI(eniID, func(e *eni) error {
		in, err := w.hotplugTargetLocked(instID)
		if err != nil {
			return err
		}
		if e.Type == ENITypePrimary {
			return apiErr(400, CodeDetachPrimary, "The primary ENI %s cannot be detached.", e.ID)
		}
		if e.InstanceID != "" && e.InstanceID != in.ID {
			return apiErr(400, "InvalidParameter.EniNotBelongEcs", "ENI %s is not attached to instance %s.", e.ID, in.ID)
		}
		if e.Status != ENIInUse {
			return errENIState(e.ID, ENIInUse, e.Status)
		}
		if err := w.checkHotplugLocked(in); err != nil {
			return err
		}
		e.Status = ENIDetaching
		e.Due = w.scheduleLocked(eniKey(e.ID), w.st.Spec.Settings.DetachDelay.D())
		return nil
	})
}

// deleteENI starts deleting an Available secondary ENI.
func (w *world) deleteENI(id string) error {
	return w.changeENI(id, func(e *eni) error {
		if e.Type == ENITypePrimary {
			return apiErr(403, CodeInvalidENIType, "The primary ENI %s cannot be deleted.", id)
		}
		if e.Status != ENIAvailable {
			return errENIState(id, ENIAvailable, e.Status)
		}
		if x := w.eipOfAddrLocked(id); x != nil {
			// The reference does not say (fakecloud/README.md): refused.
			return apiErr(400, CodeInvalidOperation, "The ENI %s has EIP %s associated with %s; unassociate it first.", id, x.ID, x.PrivateIP)
		}
		e.Status = ENIDeleting
		e.Due = w.scheduleLocked(eniKey(id), w.st.Spec.Settings.DeleteDelay.D())
		return nil
	})
}

// eniModify is a ModifyNetworkInterfaceAttribute request; nil fields (and
// no security groups) leave the attribute as it is.
type eniModify struct {
	name, description *string
	securityGroups    []string
	deleteOnRelease   *bool
	sourceDestCheck   *bool
	queues            *int
}

// modifyENI changes the attributes of an ENI.
func (w *world) modifyENI(id string, m eniModify) error {
	return w.changeENI(id, func(e *eni) error {
		if err := w.checkModifyLocked(e, m); err != nil {
			return err
		}
		setIf(&e.Name, m.name)
		setIf(&e.Description, m.description)
		if len(m.securityGroups) > 0 {
			e.SecurityGroups = m.securityGroups
		}
		setIf(&e.DeleteOnRelease, m.deleteOnRelease)
		setIf(&e.SourceDestCheck, m.sourceDestCheck)
		setIf(&e.QueueNumber, m.queues)
		return nil
	})
}

// setIf sets *dst to *v when v is not nil.
func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// checkModifyLocked refuses the modifications ECS refuses.
func (w *world) checkModifyLocked(e *eni, m eniModify) error {
	sgs := m.securityGroups
	if e.Type == ENITypePrimary && (len(sgs) > 0 || m.deleteOnRelease != nil || m.sourceDestCheck != nil || m.queues != nil) {
		return apiErr(404, "InvalidOperation.PrimaryEniOnlySupportModifyNameAndDesc", "Primary NetworkInterface is only allowed to modify name and description.")
	}
	if len(sgs) > maxSecurityGroupsPerENI {
		return apiErr(400, "JoinedGroupLimitExceed", "An ENI can join at most %d security groups.", maxSecurityGroupsPerENI)
	}
	if len(dedupe(sgs)) != len(sgs) {
		return apiErr(404, "InvalidParameter.SecurityGroupIdRepeated", "The specified security group ids has repeated.")
	}
	for _, g := range sgs {
		notFound := apiErr(404, CodeSecurityGroupNotFound, "Specified security group not exist.")
		if err := w.checkSecurityGroupLocked(g, e.VPCID, "ENI "+e.ID, notFound); err != nil {
			return err
		}
	}
	if m.queues != nil && e.Status != ENIAvailable {
		return apiErr(403, CodeInvalidENIState, "Available status or ECS instance attached is Stopped is allowed to modify network interface queue number.")
	}
	return nil
}

// describeENI returns one ENI, unless it does not exist or is still
// hidden by eventual consistency.
func (w *world) describeENI(id string) (eniSnap, error) {
	return readOne(w, func() (*eni, error) {
		e, err := w.eniLocked(id)
		if err == nil && !w.visibleLocked(e) {
			err = errENINotFound(e.ID)
		}
		return e, err
	}, w.eniSnapLocked)
}

// visibleLocked models eventual consistency, when a world opts in: an ENI
// created through the API is missing from Describe answers until its
// VisibleAt (creation plus the consistencyWindow setting or a consistency
// fault's window; both are 0 by default, as CreateNetworkInterface is
// documented synchronous). ENIs of the world file exist from the start.
func (w *world) visibleLocked(e *eni) bool {
	return !w.now().Before(e.VisibleAt)
}

// findENIs returns the page pg of the visible ENIs that f matches,
// ordered by ID.
func (w *world) findENIs(f eniFilter, pg paging) page[eniSnap] {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := func(e *eni) bool { return f.match(e) && w.visibleLocked(e) }
	return pageLocked(w.st.ENIs, keep, func(e *eni) string { return e.ID }, pg, w.eniSnapLocked)
}

// eniFilter is what DescribeNetworkInterfaces selects by; empty fields
// match anything.
type eniFilter struct {
	vpc, vsw, instance, typ, status, name, sg, rg, primary string
	ids                                                    []string
	ips, ip6s                                              []netip.Addr
	tags                                                   []tag
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
