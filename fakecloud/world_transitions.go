package fakecloud

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Asynchronous halves of ECS and VPC operations. An operation sets the
// object's transitional status and Due; when Due passes, the scheduler
// fires and the object settles. Attach and detach complete only after the
// hypervisor has plugged or unplugged the device, as a guest sees the NIC
// before ECS reports InUse.

func eniKey(id string) string   { return "eni:" + id }
func routeKey(id string) string { return "route:" + id }
func eipKey(id string) string   { return "eip:" + id }

// scheduleLocked arranges for key to fire after the (scaled) delay d and
// returns the due time.
func (w *world) scheduleLocked(key string, d time.Duration) time.Time {
	due := w.now().Add(w.scale(d))
	w.sched.at(due, key)
	return due
}

// rescheduleLocked re-arms every pending transition, after a restore.
func (w *world) rescheduleLocked() {
	now := w.now()
	for _, e := range w.st.ENIs {
		switch e.Status {
		case ENIAttaching, ENIDetaching, ENIDeleting:
			if e.Due.IsZero() {
				e.Due = now // its hypervisor call was in flight
			}
			w.sched.at(e.Due, eniKey(e.ID))
		}
	}
	for _, r := range w.st.Routes {
		if r.Status == "Pending" {
			w.sched.at(r.Due, routeKey(r.ID))
		}
	}
	for _, e := range w.st.EIPs {
		if !e.Due.IsZero() {
			w.sched.at(e.Due, eipKey(e.ID))
		}
	}
}

func (w *world) fire(key string) {
	kind, id, _ := strings.Cut(key, ":")
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	switch kind {
	case "eni":
		w.settleENILocked(id, now)
	case "route":
		w.settleRouteLocked(id, now)
	case "eip":
		w.settleEIPLocked(id, now)
	}
	_ = w.commitLocked()
}

func (w *world) settleENILocked(id string, now time.Time) {
	e := w.st.ENIs[id]
	if e == nil || e.Due.IsZero() || e.Due.After(now) {
		return
	}
	e.Due = time.Time{}
	w.dirty.eni(id)
	switch e.Status {
	case ENIAttaching:
		w.pushAttachLocked(e)
	case ENIDetaching:
		w.pushDetachLocked(e)
	case ENIDeleting:
		w.removeENILocked(e)
	}
}

// pushAttachLocked asks the hypervisor to plug e in; the ENI is InUse
// once it has, or back to Available if it could not.
func (w *world) pushAttachLocked(e *eni) {
	id, inst, info := e.ID, e.InstanceID, w.eniInfoLocked(e)
	w.hooks.push(hookEvent{
		name: "ENIAttached " + id,
		call: func(ctx context.Context) error { return w.hv.ENIAttached(ctx, inst, info) },
		after: func(err error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			e := w.st.ENIs[id]
			if e == nil || e.Status != ENIAttaching || e.InstanceID != inst {
				return
			}
			if err != nil {
				w.log.Warn("attach failed in the hypervisor; ENI back to Available", "eni", id, "instance", inst, "err", err)
				e.Status, e.InstanceID, e.DeviceIndex = ENIAvailable, "", 0
			} else {
				e.Status, e.AttachedAt = ENIInUse, w.now()
			}
			w.dirty.eni(id)
			_ = w.commitLocked()
		},
	})
}

// pushDetachLocked asks the hypervisor to unplug e; the ENI is Available
// once it has returned.
func (w *world) pushDetachLocked(e *eni) {
	id, inst, info := e.ID, e.InstanceID, w.eniInfoLocked(e)
	w.hooks.push(hookEvent{
		name: "ENIDetached " + id,
		call: func(ctx context.Context) error { return w.hv.ENIDetached(ctx, inst, info) },
		after: func(error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			e := w.st.ENIs[id]
			if e == nil || e.Status != ENIDetaching {
				return
			}
			w.finishDetachLocked(e)
			_ = w.commitLocked()
		},
	})
}

// finishDetachLocked makes e Available; metadata of its former instance
// keeps listing it for the metadata lag.
func (w *world) finishDetachLocked(e *eni) {
	now := w.now()
	e.StaleInstanceID = e.InstanceID
	e.StaleUntil = now.Add(w.scale(w.st.Spec.Settings.MetadataLag.D()))
	e.Status, e.InstanceID, e.DeviceIndex, e.Due = ENIAvailable, "", 0, time.Time{}
	w.dirty.eni(e.ID)
}

// removeENILocked deletes e and returns its addresses to the vSwitch.
func (w *world) removeENILocked(e *eni) {
	v := w.st.VSwitches[e.VSwitchID]
	v.pool4.release(e.PrimaryIP)
	for _, a := range e.IPv4 {
		v.pool4.release(a.Addr)
	}
	for _, a := range e.IPv6 {
		v.pool6.release(a.Addr)
	}
	delete(w.st.ENIs, e.ID)
	delete(w.st.macs, e.MAC)
	w.dirty.eni(e.ID)
}

func (w *world) settleRouteLocked(id string, now time.Time) {
	r := w.st.Routes[id]
	if r == nil || r.Status != "Pending" || r.Due.After(now) {
		return
	}
	r.Status, r.Due = "Available", time.Time{}
	w.dirty.route(id)
	w.pushRoutesLocked(r.TableID)
}

func (w *world) settleEIPLocked(id string, now time.Time) {
	e := w.st.EIPs[id]
	if e == nil || e.Due.IsZero() || e.Due.After(now) {
		return
	}
	switch e.Status {
	case EIPAssociating:
		e.Status = EIPInUse
		defer w.pushEIPsLocked()
	case EIPUnassociating:
		e.Status, e.InstanceID, e.InstanceType, e.PrivateIP = EIPAvailable, "", "", netip.Addr{}
	}
	e.Due = time.Time{}
	w.dirty.eip(id)
}

// pushAddressesLocked tells the hypervisor the current addresses of e.
func (w *world) pushAddressesLocked(e *eni) {
	if e.InstanceID == "" || e.Status != ENIInUse {
		return
	}
	inst, info := e.InstanceID, w.eniInfoLocked(e)
	w.hooks.push(hookEvent{
		name: "AddressesChanged " + e.ID,
		call: func(ctx context.Context) error { return w.hv.AddressesChanged(ctx, inst, info) },
	})
}

// pushEIPsLocked tells the hypervisor which EIPs forward now: the InUse
// ones, in ID order.
func (w *world) pushEIPsLocked() {
	var list []EIPInfo
	for _, e := range w.st.EIPs {
		if e.Status == EIPInUse {
			list = append(list, EIPInfo{ID: e.ID, Address: e.Address, PrivateIP: e.PrivateIP})
		}
	}
	slices.SortFunc(list, func(a, b EIPInfo) int { return strings.Compare(a.ID, b.ID) })
	w.hooks.push(hookEvent{
		name: "EIPsChanged",
		call: func(ctx context.Context) error { return w.hv.EIPsChanged(ctx, list) },
	})
}

// pushRoutesLocked tells the hypervisor the current entries of a table.
func (w *world) pushRoutesLocked(tableID string) {
	info := w.routeTableInfoLocked(tableID)
	w.hooks.push(hookEvent{
		name: "RoutesChanged " + tableID,
		call: func(ctx context.Context) error { return w.hv.RoutesChanged(ctx, info) },
	})
}
