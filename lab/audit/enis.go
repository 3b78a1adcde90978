package audit

import (
	"fmt"
	"strings"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/fakecloud/admin"
)

// checkENIs finds orphan ENIs in the lab's vSwitches, attached ENIs their
// daemon does not know, and ENIs missing from their node's namespace.
func (ix *index) checkENIs() {
	w := ix.s.world
	if w == nil {
		return
	}
	for i := range w.ENIs {
		e := &w.ENIs[i]
		if !ix.vswitches[e.VSwitchID] || e.Type == admin.ENITypePrimary {
			continue
		}
		if e.Status == admin.ENIAvailable {
			ix.total.AvailableENIs++
		}
		ix.checkOrphan(e)
	}
	for _, n := range ix.s.nodes {
		held := ix.exclusiveENIs(n)
		for _, e := range ix.attached[n.in.InstanceID] {
			ix.checkKnown(n, e, held)
			ix.checkLinked(n, e, held)
		}
	}
}

// checkOrphan reports a non-primary ENI that is Available, untagged,
// tagged for another cluster (Input.ClusterID), or tagged for an instance
// other than the one it is attached to. An
// Available ENI of a lab node whose daemon has calls in flight (being
// created or released) is skipped.
func (ix *index) checkOrphan(e *admin.ENIView) {
	var why []string
	owner := e.Tags[cloud.TagInstanceID]
	node := ""
	if n := ix.byInstance[e.InstanceID]; n != nil {
		node = n.in.Name
	} else if n := ix.byInstance[owner]; n != nil {
		node = n.in.Name
	}
	if e.Status == admin.ENIAvailable {
		if n := ix.byInstance[owner]; n != nil && (busyWith(n, e.ID) || (n.pool != nil && n.pool.enis[e.ID])) {
			ix.counts[n.in.Name].InFlight++
			return
		}
		why = append(why, "Available (attached to no instance)")
	}
	if e.Tags[cloud.TagCreator] == "" && owner == "" {
		why = append(why, fmt.Sprintf("untagged (no %q or %q tag: not created by terway)", cloud.TagCreator, cloud.TagInstanceID))
	}
	if c := e.Tags[cloud.TagClusterID]; c != "" && ix.s.clusterID != "" && c != ix.s.clusterID {
		why = append(why, fmt.Sprintf("tagged for cluster %s, not %s", c, ix.s.clusterID))
	}
	if owner != "" && e.InstanceID != "" && owner != e.InstanceID {
		why = append(why, fmt.Sprintf("tagged for instance %s but attached to %s", owner, e.InstanceID))
	}
	if len(why) == 0 {
		return
	}
	ix.add(Finding{Kind: KindOrphanENI, Node: node, Object: "eni " + e.ID,
		Detail:  fmt.Sprintf("%s ENI in %s: %s", e.Type, e.VSwitchID, strings.Join(why, "; ")),
		Sources: []Source{SourceCloud}})
}

// exclusiveENIs are the ENIs node n's store gives to pods whole, by ID and
// by MAC: they sit in the pod's namespace, not the node's.
func (ix *index) exclusiveENIs(n *nodeSnap) map[string]bool {
	out := map[string]bool{}
	if n.store == nil {
		return out
	}
	for _, a := range n.store.atts {
		for _, r := range a.Resources {
			if r.Type == resourceENI {
				out[r.ENIID] = true
				out[normMAC(r.ENIMAC)] = true
				out[normMAC(r.ID)] = true
			}
		}
	}
	return out
}

// checkKnown reports a secondary ENI attached to node n that neither the
// daemon's pool nor its store knows. It needs the pool: the store records
// ENIs only through the pods that use them.
func (ix *index) checkKnown(n *nodeSnap, e *admin.ENIView, held map[string]bool) {
	if n.pool == nil || n.store == nil || e.Type != admin.ENITypeSecondary || e.Status != admin.ENIInUse {
		return
	}
	if n.pool.enis[e.ID] || held[e.ID] || busyWith(n, e.ID) {
		return
	}
	for _, a := range n.store.atts {
		for _, r := range a.Resources {
			if r.ENIID == e.ID {
				return
			}
		}
	}
	ix.add(Finding{Kind: KindUnknownENI, Node: n.in.Name, Object: "eni " + e.ID,
		Detail:  fmt.Sprintf("the cloud has it InUse on %s; the daemon's pool and store do not know it", n.in.InstanceID),
		Sources: []Source{SourceCloud, SourcePool, SourceStore}})
}

// checkLinked reports an InUse ENI of node n that is not a link in the
// node's namespace, unless an exclusive-ENI pod holds it.
func (ix *index) checkLinked(n *nodeSnap, e *admin.ENIView, held map[string]bool) {
	if n.net == nil || e.Status != admin.ENIInUse || held[e.ID] || held[normMAC(e.MAC)] {
		return
	}
	for _, l := range n.net.links {
		if l.MAC == normMAC(e.MAC) {
			return
		}
	}
	ix.add(Finding{Kind: KindMissingENILink, Node: n.in.Name, Object: "eni " + e.ID,
		Detail: fmt.Sprintf("the cloud has %s ENI %s (%s) InUse on %s; no link in the node has its MAC and no pod holds it",
			e.Type, e.ID, e.MAC, n.in.InstanceID),
		Sources: []Source{SourceCloud, SourceNetNS, SourceStore}})
}
