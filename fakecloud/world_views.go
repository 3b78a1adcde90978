package fakecloud

import (
	"sort"
)

// Views of the world handed to the hypervisor, the Go API and the admin
// API. They are copies: callers can keep them after the lock is released.

func (w *world) eniInfoLocked(e *eni) ENIInfo {
	v := w.st.VSwitches[e.VSwitchID]
	info := ENIInfo{
		ID: e.ID, MAC: e.MAC, Type: e.Type, DeviceIndex: e.DeviceIndex, VSwitchID: e.VSwitchID,
		CIDR: v.CIDR, Gateway: v.pool4.gateway(), PrimaryIP: e.PrimaryIP,
		IPv4: addrsOf(e.IPv4), IPv6: addrsOf(e.IPv6),
	}
	if v.pool6 != nil {
		info.IPv6CIDR, info.IPv6Gateway = v.IPv6CIDR, v.pool6.gateway()
	}
	return info
}

func (w *world) instanceInfoLocked(in *instance) InstanceInfo {
	info := InstanceInfo{ID: in.ID, Name: in.Name, InstanceType: in.InstanceType, ZoneID: in.ZoneID,
		VPCID: in.VPCID, Status: in.Status}
	for _, e := range w.st.enisOf(in.ID) {
		if e.Status == ENIInUse || e.Status == ENIDetaching {
			info.ENIs = append(info.ENIs, w.eniInfoLocked(e))
		}
	}
	return info
}

func (w *world) routeTableInfoLocked(tableID string) RouteTableInfo {
	info := RouteTableInfo{ID: tableID}
	for _, v := range w.st.VPCs {
		if v.RouteTableID == tableID {
			info.VPCID = v.ID
		}
	}
	for _, r := range w.st.Routes {
		if r.TableID != tableID || r.Type != "Custom" || r.Status != "Available" {
			continue
		}
		ri := RouteInfo{Destination: r.Destination, NextHopType: r.NextHopType, NextHopID: r.NextHopID}
		if in := w.st.Instances[r.NextHopID]; in != nil {
			if p := w.st.ENIs[in.PrimaryENI]; p != nil {
				ri.NextHopIP = p.PrimaryIP
			}
		} else if e := w.st.ENIs[r.NextHopID]; e != nil {
			ri.NextHopIP = e.PrimaryIP
		}
		info.Entries = append(info.Entries, ri)
	}
	sort.Slice(info.Entries, func(i, j int) bool {
		return info.Entries[i].Destination.String() < info.Entries[j].Destination.String()
	})
	return info
}

// eniView returns a view of one ENI.
func (w *world) eniView(id string) (ENIView, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return viewOf(w.st.ENIs[id], w.eniViewLocked)
}

// viewOf returns view(x), false when x is nil (the record does not
// exist).
func viewOf[T, V any](x *T, view func(*T) V) (V, bool) {
	if x == nil {
		var none V
		return none, false
	}
	return view(x), true
}

// eniViews returns views of all ENIs, ordered by ID.
func (w *world) eniViews() []ENIView {
	w.mu.Lock()
	defer w.mu.Unlock()
	all := paging{token: true, size: len(w.st.ENIs)} // one page holding every ENI
	return pageLocked(w.st.ENIs, func(*eni) bool { return true }, func(e *eni) string { return e.ID }, all, w.eniViewLocked).items
}

func (w *world) eniViewLocked(e *eni) ENIView {
	v := ENIView{ENIInfo: w.eniInfoLocked(e), Status: e.Status, InstanceID: e.InstanceID, VPCID: e.VPCID, ZoneID: e.ZoneID}
	if len(e.Tags) > 0 {
		v.Tags = map[string]string{}
		for _, t := range e.Tags {
			v.Tags[t.Key] = t.Value
		}
	}
	return v
}

// vswitchViews returns views of all vSwitches, ordered by ID.
func (w *world) vswitchViews() []VSwitchView {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []VSwitchView
	for _, v := range w.st.VSwitches {
		out = append(out, w.vswitchViewLocked(v))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (w *world) vswitchViewLocked(v *vswitch) VSwitchView {
	view := VSwitchView{ID: v.ID, VPCID: v.VPCID, ZoneID: v.ZoneID, CIDR: v.CIDR, IPv6CIDR: v.IPv6CIDR,
		Gateway: v.pool4.gateway(), Available: v.pool4.available()}
	if d := w.st.Drains[v.ID]; d != nil {
		view.Drained = len(d.Addrs)
	}
	return view
}

// instanceView returns a view of one instance.
func (w *world) instanceView(id string) (InstanceInfo, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return viewOf(w.st.Instances[id], w.instanceInfoLocked)
}

// instanceViews returns views of all instances, ordered by ID.
func (w *world) instanceViews() []InstanceInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []InstanceInfo
	for _, in := range w.st.Instances {
		out = append(out, w.instanceInfoLocked(in))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// worldView returns the admin view of the world.
func (w *world) worldView() WorldView {
	v := WorldView{Instances: w.instanceViews(), ENIs: w.eniViews(), VSwitches: w.vswitchViews()}
	w.mu.Lock()
	defer w.mu.Unlock()
	v.RegionID, v.AccountID = w.st.Spec.RegionID, w.st.Spec.AccountID
	for id := range w.st.keys {
		v.AccessKeys = append(v.AccessKeys, id)
	}
	sort.Strings(v.AccessKeys)
	for _, vp := range w.st.VPCs {
		v.RouteTables = append(v.RouteTables, w.routeTableInfoLocked(vp.RouteTableID))
	}
	for _, e := range w.st.EIPs {
		ev := EIPView{ID: e.ID, Address: e.Address.String(), Status: e.Status, InstanceID: e.InstanceID,
			BandwidthPackageID: e.BandwidthPackageID, Name: e.Name}
		if e.PrivateIP.IsValid() {
			ev.PrivateIP = e.PrivateIP.String()
		}
		v.EIPs = append(v.EIPs, ev)
	}
	sort.Slice(v.EIPs, func(i, j int) bool { return v.EIPs[i].ID < v.EIPs[j].ID })
	return v
}
