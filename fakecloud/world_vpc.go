package fakecloud

import "slices"

// vswitchFilter is what DescribeVSwitches selects by; empty fields match
// anything.
type vswitchFilter struct{ id, vpc, zone, name string }

// findVSwitches returns the page pg of the vSwitches f matches, ordered
// by ID.
func (w *world) findVSwitches(f vswitchFilter, pg paging) page[vswitchSnap] {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := func(v *vswitch) bool {
		return (f.id == "" || f.id == v.ID) && (f.vpc == "" || f.vpc == v.VPCID) &&
			(f.zone == "" || f.zone == v.ZoneID) && (f.name == "" || f.name == v.Name)
	}
	return pageLocked(w.st.VSwitches, keep, func(v *vswitch) string { return v.ID }, pg, w.vswitchSnapLocked)
}

// describeVSwitch returns one vSwitch.
func (w *world) describeVSwitch(id string) (vswitchSnap, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.st.VSwitches[id]
	if v == nil {
		return vswitchSnap{}, apiErr(400, CodeVSwitchNotFound, "Specified VSwitch can not found.")
	}
	return w.vswitchSnapLocked(v), nil
}

// vpcFilter is what DescribeVpcs selects by; empty fields match anything.
type vpcFilter struct {
	ids  []string
	name string
}

// findVPCs returns the page pg of the VPCs f matches, ordered by ID.
func (w *world) findVPCs(f vpcFilter, pg paging) page[vpcSnap] {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := func(v *vpc) bool {
		return (len(f.ids) == 0 || slices.Contains(f.ids, v.ID)) && (f.name == "" || f.name == v.Name)
	}
	return pageLocked(w.st.VPCs, keep, func(v *vpc) string { return v.ID }, pg, w.vpcSnapLocked)
}

// routeTableFilter is what DescribeRouteTableList selects by; empty
// fields match anything. Every table is a VPC's System table.
type routeTableFilter struct{ vpc, table, vrouter, typ string }

// findRouteTables returns the page pg of the route tables f matches, as
// their VPCs, ordered by table ID.
func (w *world) findRouteTables(f routeTableFilter, pg paging) page[vpcSnap] {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := func(v *vpc) bool {
		return (f.vpc == "" || f.vpc == v.ID) && (f.table == "" || f.table == v.RouteTableID) &&
			(f.vrouter == "" || f.vrouter == v.VRouterID) && (f.typ == "" || f.typ == "System")
	}
	return pageLocked(w.st.VPCs, keep, func(v *vpc) string { return v.RouteTableID }, pg, w.vpcSnapLocked)
}

// vpcByTableLocked returns the VPC whose route table is tableID.
func (w *world) vpcByTableLocked(tableID string) *vpc {
	for _, v := range w.st.VPCs {
		if v.RouteTableID == tableID {
			return v
		}
	}
	return nil
}
