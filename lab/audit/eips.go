package audit

import (
	"fmt"
	"strings"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/fakecloud/admin"
)

// EIPs, the fifth kind of resource the audit checks: an EIP the cloud
// binds to an address of a lab node's ENI, or that a node's daemon
// allocated (named "terway-<instance ID>"), must be one that node's store
// records; an EIP a store records must exist and bind the record's pod
// address; no EIP is recorded twice.

// resourceEIP is the daemon's resource type of a pod's EIP.
const resourceEIP = "eip"

// eipAllocating is the intent kind of an EIP allocation in flight
// (daemon/cloud).
const eipAllocating = cloud.IntentAllocateEIP

func (ix *index) checkEIPs() {
	w := ix.s.world
	if w == nil {
		return
	}
	byID := map[string]*admin.EIPView{}
	for i := range w.EIPs {
		byID[w.EIPs[i].ID] = &w.EIPs[i]
	}
	recorded := map[string]string{} // EIP ID → node/pod
	for _, n := range ix.s.nodes {
		if n.store == nil {
			continue
		}
		for _, a := range n.store.atts {
			for _, r := range a.Resources {
				if r.Type != resourceEIP {
					continue
				}
				who := n.in.Name + "/" + a.Key()
				if other, dup := recorded[r.ID]; dup {
					ix.add(Finding{Kind: KindDuplicateEIP, Node: n.in.Name, Object: "eip " + r.ID,
						Detail: fmt.Sprintf("recorded for %s and %s", other, who), Sources: []Source{SourceStore}})
				}
				recorded[r.ID] = who
				ix.checkRecordedEIP(n, a, r, byID[r.ID])
			}
		}
	}
	for _, e := range w.EIPs {
		n := ix.eipNode(&e)
		if n == nil || n.store == nil || recorded[e.ID] != "" {
			continue
		}
		if busyAllocatingEIP(n) {
			ix.counts[n.in.Name].InFlight++
			continue
		}
		ix.add(Finding{Kind: KindLeakedEIP, Node: n.in.Name, Object: "eip " + e.ID + " " + e.Address,
			Detail: fmt.Sprintf("%s (name %q) on %s %s, but no attachment of the node records it", e.Status, e.Name,
				e.InstanceID, e.PrivateIP), Sources: []Source{SourceCloud, SourceStore}})
	}
}

// checkRecordedEIP compares a record's EIP with the cloud's.
func (ix *index) checkRecordedEIP(n *nodeSnap, a attachment, r resource, e *admin.EIPView) {
	object := "eip " + r.ID + " of " + a.Key()
	if e == nil {
		ix.add(Finding{Kind: KindMissingEIP, Node: n.in.Name, Object: object,
			Detail: "the store records it; the cloud has no such EIP", Sources: []Source{SourceStore, SourceCloud}})
		return
	}
	podIP := ""
	for _, x := range a.Resources {
		if x.Type != resourceEIP && x.IPv4 != "" {
			podIP = x.IPv4
			break
		}
	}
	bound := e.Status == admin.EIPInUse || e.Status == admin.EIPAssociating
	if !bound || e.InstanceID != r.ENIID || (podIP != "" && e.PrivateIP != podIP) {
		ix.add(Finding{Kind: KindEIPMismatch, Node: n.in.Name, Object: object,
			Detail: fmt.Sprintf("the store binds it to %s on %s; the cloud has it %s on %s %s", podIP, r.ENIID,
				e.Status, e.InstanceID, e.PrivateIP), Sources: []Source{SourceStore, SourceCloud}})
	}
}

// eipNode is the lab node an EIP belongs to: the one whose daemon
// allocated it (its name), else the one an ENI it is bound to is
// attached to.
func (ix *index) eipNode(e *admin.EIPView) *nodeSnap {
	if inst, ok := strings.CutPrefix(e.Name, "terway-"); ok {
		if n := ix.byInstance[inst]; n != nil {
			return n
		}
	}
	if eni := ix.enis[e.InstanceID]; eni != nil {
		return ix.byInstance[eni.InstanceID]
	}
	return nil
}

// busyAllocatingEIP reports whether n's daemon has an EIP allocation in
// flight (its record not written yet).
func busyAllocatingEIP(n *nodeSnap) bool {
	for _, in := range n.store.intents {
		if in.Kind == eipAllocating {
			return true
		}
	}
	return false
}
