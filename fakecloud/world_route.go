package fakecloud

import "net/netip"

// routeCreate is a CreateRouteEntry request.
type routeCreate struct {
	table       string
	destination netip.Prefix
	hopType     string // Instance or NetworkInterface
	hop         string
	name        string
	description string
}

// createRoute adds a custom entry to a route table; it is Pending until
// the route entry delay has passed. As with createENI, render's answer is
// kept for a repeat with the same ClientToken.
func (w *world) createRoute(r routeCreate, tok clientToken, render func(routeEntry) any) (any, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if raw, ok, err := w.replayLocked(tok); ok {
		return raw, err
	}
	if err := w.checkCreateRouteLocked(r); err != nil {
		return nil, err
	}
	e := &routeEntry{ID: w.st.newID("rte"), TableID: r.table, Destination: r.destination, NextHopType: r.hopType,
		NextHopID: r.hop, Name: r.name, Description: r.description, Type: "Custom", Status: "Pending", CreatedAt: w.now()}
	e.Due = w.scheduleLocked(routeKey(e.ID), w.st.Spec.Settings.RouteEntryDelay.D())
	w.st.Routes[e.ID] = e
	w.dirty.route(e.ID)
	answer := render(*e)
	w.rememberLocked(tok, answer)
	return answer, w.commitLocked()
}

// checkCreateRouteLocked refuses the entries VPC refuses: unknown tables,
// next hops outside the table's VPC, destinations already routed.
func (w *world) checkCreateRouteLocked(r routeCreate) error {
	v := w.vpcByTableLocked(r.table)
	if v == nil {
		return apiErr(404, CodeRouteTableNotFound, "Specified route table does not exist.")
	}
	switch r.hopType {
	case "Instance":
		in := w.st.Instances[r.hop]
		if in == nil || in.VPCID != v.ID {
			return apiErr(404, CodeNextHopNotFound, "Specified next hop does not exist.")
		}
	case "NetworkInterface":
		e := w.st.ENIs[r.hop]
		if e == nil {
			return apiErr(404, "InvalidNetworkInterface.NotFound", "The specified networkInterface does not exist.")
		}
		if e.VPCID != v.ID {
			return apiErr(400, "Mismatch.EniIdAndRouteTableId", "The operation is not allowed because eni and route table not in same vpc.")
		}
	}
	for _, x := range w.st.Routes {
		if x.TableID == r.table && x.Destination == r.destination {
			return apiErr(400, CodeCIDRDuplicate, "Specified CIDR block is already exists.")
		}
	}
	return nil
}

// routeDelete is a DeleteRouteEntry request: an entry by ID, or by table
// and destination (and next hop, when set).
type routeDelete struct {
	id          string
	table       string
	destination netip.Prefix
	hop         string
}

// deleteRoute removes an Available custom entry.
func (w *world) deleteRoute(r routeDelete) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.table != "" && w.vpcByTableLocked(r.table) == nil {
		return apiErr(404, CodeRouteTableNotFound, "Specified route table does not exist.")
	}
	var e *routeEntry
	for _, x := range w.st.Routes {
		if (r.id != "" && x.ID == r.id) || (r.id == "" && x.TableID == r.table && x.Destination == r.destination) {
			if r.hop != "" && x.NextHopID != r.hop {
				continue
			}
			e = x
		}
	}
	switch {
	case e == nil:
		return apiErr(400, CodeRouteEntryNotFound, "Route entry not exists.")
	case e.Type == "System":
		return apiErr(400, CodeRouteSystem, "Specified operation is denied as route entry type is system.")
	case e.Status != "Available":
		return apiErr(400, CodeRouteEntryStatus, "Some route entry status blocked this operation.")
	}
	delete(w.st.Routes, e.ID)
	w.dirty.route(e.ID)
	w.pushRoutesLocked(e.TableID)
	return w.commitLocked()
}

// routeFilter is what DescribeRouteEntryList selects by within a table;
// empty fields match anything.
type routeFilter struct{ id, name, destination, typ, hop, hopType string }

// findRoutes returns the page pg of the entries of a table that f
// matches, ordered by ID.
func (w *world) findRoutes(table string, f routeFilter, pg paging) (page[routeEntry], error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.vpcByTableLocked(table) == nil {
		return page[routeEntry]{}, apiErr(400, CodeRouteTableNotFoundList, "The specified RouteTable was not found.")
	}
	keep := func(r *routeEntry) bool { return r.TableID == table && f.match(r) }
	return pageLocked(w.st.Routes, keep, func(r *routeEntry) string { return r.ID }, pg, copyOf[routeEntry]), nil
}

func (f routeFilter) match(r *routeEntry) bool {
	return (f.id == "" || f.id == r.ID) && (f.name == "" || f.name == r.Name) &&
		(f.destination == "" || f.destination == r.Destination.String()) && (f.typ == "" || f.typ == r.Type) &&
		(f.hop == "" || f.hop == r.NextHopID) && (f.hopType == "" || f.hopType == r.NextHopType)
}
