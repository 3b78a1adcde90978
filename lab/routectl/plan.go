package routectl

import (
	"net/netip"
	"slices"
)

// plan is what one sync changes in the route table.
type plan struct {
	// remove are owned entries no node asks for, or that point elsewhere.
	remove []routeEntry
	// add are podCIDRs without an entry, in address order.
	add []netip.Prefix
	// pending are owned, correct entries not Available yet.
	pending []netip.Prefix
	// blocked are entries the controller does not own that sit on a
	// podCIDR; that CIDR is left alone.
	blocked []routeEntry
}

// owned reports whether the controller manages e: a custom entry to an
// instance whose destination is inside the cluster CIDR.
func owned(e routeEntry, cluster netip.Prefix) bool {
	return e.Type == entryCustom && e.HopType == hopInstance && e.Dst.IsValid() && inside(e.Dst, cluster)
}

// planFor compares the entries a table has with the ones the nodes want.
func planFor(want map[netip.Prefix]target, have []routeEntry, cluster netip.Prefix) plan {
	var p plan
	done := map[netip.Prefix]bool{}
	for _, e := range have {
		t, wanted := want[e.Dst]
		switch {
		case owned(e, cluster) && wanted && t.Instance == e.HopID:
			done[e.Dst] = true
			if e.Status != statusReady {
				p.pending = append(p.pending, e.Dst)
			}
		case owned(e, cluster):
			p.remove = append(p.remove, e)
		case wanted:
			done[e.Dst] = true
			p.blocked = append(p.blocked, e)
		}
	}
	for dst := range want {
		if !done[dst] {
			p.add = append(p.add, dst)
		}
	}
	slices.SortFunc(p.add, netip.Prefix.Compare)
	return p
}
