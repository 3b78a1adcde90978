package audit

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// checkNodes compares the lab's nodes with the API server's.
func (ix *index) checkNodes() {
	if ix.s.kube == nil {
		return
	}
	for _, n := range ix.s.nodes {
		k := ix.s.kube.nodes[n.in.Name]
		switch {
		case k == nil:
			ix.add(Finding{Kind: KindNodeMismatch, Node: n.in.Name, Object: "node " + n.in.Name,
				Detail: "the API server has no such node", Sources: []Source{SourceKube}})
		case k.Spec.ProviderID != "" && !strings.HasSuffix(k.Spec.ProviderID, "."+n.in.InstanceID):
			ix.add(Finding{Kind: KindNodeMismatch, Node: n.in.Name, Object: "node " + n.in.Name,
				Detail:  fmt.Sprintf("providerID %q does not name instance %s", k.Spec.ProviderID, n.in.InstanceID),
				Sources: []Source{SourceKube}})
		}
	}
}

// checkPodsAgainstStore compares each daemon's attachments with the pods
// of its node.
func (ix *index) checkPodsAgainstStore() {
	if ix.s.kube == nil {
		return
	}
	for _, n := range ix.s.nodes {
		if n.store == nil {
			continue
		}
		have := map[string]bool{}
		for _, a := range n.store.atts {
			have[a.Key()] = true
			ix.checkAttachment(n, a)
		}
		for _, key := range slices.Sorted(maps.Keys(ix.live[n.in.Name])) {
			p := ix.live[n.in.Name][key]
			if running(p) && !have[key] {
				ix.add(Finding{Kind: KindMissingAttachment, Node: n.in.Name, Object: "pod " + key,
					Detail:  fmt.Sprintf("pod is %s with IPs %v but the store has no attachment for it", p.Status.Phase, podIPs(p)),
					Sources: []Source{SourceKube, SourceStore}})
			}
		}
	}
}

// checkAttachment judges one attachment against its pod.
func (ix *index) checkAttachment(n *nodeSnap, a attachment) {
	key := a.Key()
	p := ix.s.kube.pods[key]
	if ix.reserved(a) {
		ix.counts[n.in.Name].Reserved++
		return // a sticky reservation outlives its pod by design
	}
	why := ""
	switch {
	case p == nil:
		why = "the pod does not exist"
	case a.PodUID != "" && string(p.UID) != a.PodUID:
		why = fmt.Sprintf("the pod's UID is %s, the store's %s", p.UID, a.PodUID)
	case !networked(p):
		why = "the pod uses the host network"
	case p.Spec.NodeName != n.in.Name:
		why = fmt.Sprintf("the pod is scheduled on %q", p.Spec.NodeName)
	case terminal(p):
		why = fmt.Sprintf("the pod has finished (%s)", p.Status.Phase)
	}
	if why != "" {
		if !a.StickyUntil.IsZero() {
			why += fmt.Sprintf("; its sticky reservation expired at %s", a.StickyUntil.Format(time.RFC3339))
		}
		if !a.PodGone.IsZero() {
			why += fmt.Sprintf("; the daemon's GC saw it gone at %s", a.PodGone.Format(time.RFC3339))
		}
		ix.add(Finding{Kind: KindStoreOrphan, Node: n.in.Name, Object: "attachment " + key,
			Detail:  fmt.Sprintf("store holds %v for it but %s", attachmentIPs(a), why),
			Sources: []Source{SourceStore, SourceKube}})
		return
	}
	if got, want := podIPs(p), attachmentIPs(a); len(got) > 0 && !sameAddrs(got, want) {
		ix.add(Finding{Kind: KindIPMismatch, Node: n.in.Name, Object: "pod " + key,
			Detail:  fmt.Sprintf("pod status IPs %v, store %v", got, want),
			Sources: []Source{SourceKube, SourceStore}})
	}
}

// checkPool compares each daemon's pool with its store: an address the
// pool gives a pod must be the one the store records for it.
func (ix *index) checkPool() {
	for _, n := range ix.s.nodes {
		if n.pool == nil || n.store == nil {
			continue
		}
		recorded := map[string][]netip.Addr{}
		for _, a := range n.store.atts {
			recorded[a.Key()] = attachmentIPs(a)
		}
		for _, ip := range sortedAddrs(n.pool.addrs) {
			pa := n.pool.addrs[ip]
			if pa.Owner == "" || (pa.State != "inuse" && pa.State != "reserved") {
				continue
			}
			ips, ok := recorded[pa.Owner]
			switch {
			case !ok:
				ix.add(Finding{Kind: KindPoolMismatch, Node: n.in.Name, Object: "ip " + ip.String(),
					Detail:  fmt.Sprintf("the pool has it %s by %s, the store has no attachment for that pod", pa.State, pa.Owner),
					Sources: []Source{SourcePool, SourceStore}})
			case !slices.Contains(ips, ip):
				ix.add(Finding{Kind: KindPoolMismatch, Node: n.in.Name, Object: "ip " + ip.String(),
					Detail:  fmt.Sprintf("the pool has it %s by %s, the store records %v for that pod", pa.State, pa.Owner, ips),
					Sources: []Source{SourcePool, SourceStore}})
			}
		}
	}
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// sortedAddrs are m's addresses in order, for stable findings.
func sortedAddrs[V any](m map[netip.Addr]V) []netip.Addr {
	return slices.SortedFunc(maps.Keys(m), netip.Addr.Compare)
}
