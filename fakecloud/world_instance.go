package fakecloud

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// instanceTypes returns the types in use named in want and of the
// families in families (empty: all), ordered by ID.
func (w *world) instanceTypes(want, families []string) []InstanceType {
	w.mu.Lock()
	var types []InstanceType
	for _, t := range w.st.types {
		if (len(want) == 0 || slices.Contains(want, t.InstanceTypeID)) &&
			(len(families) == 0 || slices.Contains(families, t.InstanceTypeFamily)) {
			types = append(types, t)
		}
	}
	w.mu.Unlock()
	sort.Slice(types, func(i, j int) bool { return types[i].InstanceTypeID < types[j].InstanceTypeID })
	return types
}

// instanceFilter is what DescribeInstances selects by; empty fields match
// anything.
type instanceFilter struct {
	ids, ips                    []string
	status, vpc, vsw, zone, typ string
}

// findInstances returns the page pg of the instances f matches, ordered
// by ID, each with its ENIs.
func (w *world) findInstances(f instanceFilter, pg paging) page[instanceSnap] {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := func(in *instance) bool {
		prim := w.st.ENIs[in.PrimaryENI]
		return (len(f.ids) == 0 || slices.Contains(f.ids, in.ID)) &&
			(len(f.ips) == 0 || (prim != nil && slices.Contains(f.ips, prim.PrimaryIP.String()))) &&
			(f.status == "" || f.status == in.Status) && (f.vpc == "" || f.vpc == in.VPCID) &&
			(f.vsw == "" || f.vsw == in.VSwitchID) && (f.zone == "" || f.zone == in.ZoneID) &&
			(f.typ == "" || f.typ == in.InstanceType)
	}
	snap := func(in *instance) instanceSnap { return w.instanceSnapLocked(in, true) }
	return pageLocked(w.st.Instances, keep, func(in *instance) string { return in.ID }, pg, snap)
}

// describeInstance returns one instance, without its ENIs.
func (w *world) describeInstance(id string) (instanceSnap, error) {
	return readOne(w, func() (*instance, error) { return w.instanceLocked(id) }, func(in *instance) instanceSnap {
		return w.instanceSnapLocked(in, false)
	})
}

// instanceLocked looks an instance up.
func (w *world) instanceLocked(id string) (*instance, error) {
	in := w.st.Instances[id]
	if in == nil {
		return nil, apiErr(404, CodeInstanceNotFound, "The specified InstanceId does not exist.")
	}
	return in, nil
}

// setInstanceStatus moves an instance from status from to status to and
// tells the hypervisor.
func (w *world) setInstanceStatus(id, from, to string) error {
	return w.changeInstance(id, func(in *instance) error {
		if in.Status != from {
			return apiErr(403, "IncorrectInstanceStatus", "The current status of the resource does not support this operation: %s is %s.", id, in.Status)
		}
		in.Status = to
		if to == StatusRunning {
			w.pushInstanceLocked("InstanceStarted", in, w.hv.InstanceStarted)
		} else {
			w.pushInstanceLocked("InstanceStopped", in, w.hv.InstanceStopped)
		}
		return nil
	})
}

// changeInstance runs change on instance id under the lock and journals
// the instance when change succeeds.
func (w *world) changeInstance(id string, change func(in *instance) error) error {
	return changeOne(w, func() (*instance, error) { return w.instanceLocked(id) }, change, func() { w.dirty.instance(id) })
}

// pushInstanceLocked queues an instance event for the hypervisor.
func (w *world) pushInstanceLocked(event string, in *instance, call func(context.Context, InstanceInfo) error) {
	info := w.instanceInfoLocked(in)
	w.hooks.push(hookEvent{name: event + " " + in.ID, call: func(ctx context.Context) error { return call(ctx, info) }})
}

// releaseInstance releases an instance as ECS does: secondary ENIs are
// detached to Available, or deleted when DeleteOnRelease is set; the
// primary ENI is deleted with the instance, and so are route entries
// whose next hop it was.
func (w *world) releaseInstance(id string) error {
	return w.changeInstance(id, func(in *instance) error {
		info := w.instanceInfoLocked(in)
		for _, e := range w.st.enisOf(id) {
			if e.Type == ENITypePrimary || e.DeleteOnRelease {
				w.removeENILocked(e)
				continue
			}
			e.Status, e.InstanceID, e.DeviceIndex, e.Due = ENIAvailable, "", 0, time.Time{}
			e.StaleInstanceID, e.StaleUntil = "", time.Time{}
			w.dirty.eni(e.ID)
		}
		w.removeRoutesViaLocked(id)
		if p := w.st.ENIs[in.PrimaryENI]; p != nil {
			w.removeENILocked(p)
		}
		for a, iid := range w.st.byIP {
			if iid == id {
				delete(w.st.byIP, a)
			}
		}
		delete(w.st.Instances, id)
		w.hooks.push(hookEvent{name: "InstanceReleased " + id, call: func(ctx context.Context) error { return w.hv.InstanceReleased(ctx, info) }})
		return nil
	})
}

// removeRoutesViaLocked deletes the route entries whose next hop is id.
func (w *world) removeRoutesViaLocked(id string) {
	for rid, r := range w.st.Routes {
		if r.NextHopID == id {
			delete(w.st.Routes, rid)
			w.dirty.route(rid)
			w.pushRoutesLocked(r.TableID)
		}
	}
}

// addInstance creates a running (or stopped) instance with its primary
// ENI, as RunInstances would; the hypervisor is told it started.
func (w *world) addInstance(spec InstanceSpec) (InstanceInfo, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if spec.ID == "" {
		spec.ID = "i-" + strings.TrimPrefix(w.st.newID("x"), "x-")
	}
	if _, ok := w.st.types[spec.InstanceType]; !ok {
		return InstanceInfo{}, fmt.Errorf("unknown instance type %q", spec.InstanceType)
	}
	for _, g := range spec.SecurityGroupIDs {
		if w.st.SecurityGroups[g] == nil {
			return InstanceInfo{}, fmt.Errorf("unknown security group %q", g)
		}
	}
	if len(spec.SecurityGroupIDs) == 0 {
		return InstanceInfo{}, fmt.Errorf("instance %s needs at least one security group", spec.ID)
	}
	if err := w.st.addInstance(spec, w.now()); err != nil {
		return InstanceInfo{}, err
	}
	in := w.st.Instances[spec.ID]
	w.dirty.instance(in.ID)
	w.dirty.eni(in.PrimaryENI)
	if in.Status == StatusRunning {
		w.pushInstanceLocked("InstanceStarted", in, w.hv.InstanceStarted)
	}
	return w.instanceInfoLocked(in), w.commitLocked()
}

// resync tells the hypervisor the whole current state: every running
// instance with its ENIs and every route table.
func (w *world) resync() {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.st.Instances))
	for id := range w.st.Instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if in := w.st.Instances[id]; in.Status == StatusRunning {
			w.pushInstanceLocked("InstanceStarted", in, w.hv.InstanceStarted)
		}
	}
	for _, v := range w.st.VPCs {
		w.pushRoutesLocked(v.RouteTableID)
	}
	w.pushEIPsLocked()
}
