package fakecloud

import "slices"

// vswitchFilter is what DescribeVSwitches selects by; empty fields match
// anything.
type vswitchFilter struct{ id, vpc, zone, name string }

func (f vswitchFilter) match(v *vswitch) bool {
	return (f.id == "" || f.id == v.ID) && (f.vpc == "" || f.vpc == v.VPCID) &&
		(f.zone == "" || f.zone == v.ZoneID) && (f.name == "" || f.name == v.Name)
}

// findVSwitches returns the page pg of the vSwitches f matches, ordered
// by ID.
func (w *world) findVSwitches(f vswitchFilter, pg paging) page[vswitchSnap] {
	w.mu.Lock()
	defer w.mu.Unlock()
	return pageLocked(w.st.VSwitches, f.match, func(v *vswitch) string { return v.ID }, pg, w.vswitchSnapLocked)
}

// describeVSwitch returns one vSwitch.
func (w *world) describeVSwitch(id string) (vswitchSnap, error) {
	return readOne(w, func() (*vswitch, error) {
		if v := w.st.VSwitches[id]; v != nil {
			return v, nil
		}
		return nil, apiErr(400, CodeVSwitchNotFound, "Specified VSwitch can not found.")
	}, w.vswitchSnapLocked)
}

// readOne is the shape of a query for one record: under the lock, find
// it and copy it out with snap.
func readOne[T, S any](w *world, find func() (*T, error), snap func(*T) S) (S, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	x, err := find()
	if err != nil {
		var none S
		return none, err
	}
	return snap(x), nil
}

// vpcFilter is what DescribeVpcs selects by; empty fields match anything.
type vpcFilter struct {
	ids  []string
	name string
}

func (f vpcFilter) match(v *vpc) bool {
	return (len(f.ids) == 0 || slices.Contains(f.ids, v.ID)) && (f.name == "" || f.name == v.Name)
}

// findVPCs returns the page pg of the VPCs f matches, ordered by ID.
func (w *world) findVPCs(f vpcFilter, pg paging) page[vpcSnap] {
	w.mu.Lock()
	defer w.mu.Unlock()
	return pageLocked(w.st.VPCs, f.match, func(v *vpc) string { return v.ID }, pg, w.vpcSnapLocked)
}

// routeTableFilter is what DescribeRouteTableList selects by; empty
// fields match anything. Every table is a VPC's System table.
type routeTableFilter struct{ vpc, table, vrouter, typ string }

func (f routeTableFilter) match(v *vpc) bool {
	return (f.vpc == "" || f.vpc == v.ID) && (f.table == "" || f.table == v.RouteTableID) &&
		(f.vrouter == "" || f.vrouter == v.VRouterID) && (f.typ == "" || f.typ == "System")
}

// findRouteTables returns the page pg of the route tables f matches, as
// their VPCs, ordered by table ID.
func (w *world) findRouteTables(f routeTableFilter, pg paging) page[vpcSnap] {
	w.mu.Lock()
	defer w.mu.Unlock()
	return pageLocked(w.st.VPCs, f.match, func(v *vpc) string { return v.RouteTableID }, pg, w.vpcSnapLocked)
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
