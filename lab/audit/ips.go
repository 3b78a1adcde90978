package audit

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
)

// checkAddresses compares, per node, the addresses the cloud assigns to
// the node's ENIs with those pods, the store and the pool account for
// (leaks), and the store's addresses with the cloud's (missing).
func (ix *index) checkAddresses() {
	if ix.s.world == nil {
		return
	}
	for _, n := range ix.s.nodes {
		if ix.s.kube == nil || n.store == nil {
			continue // without pods and store every address would look leaked
		}
		held := ix.heldIPs(n)
		for _, e := range ix.attached[n.in.InstanceID] {
			ix.checkENIAddresses(n, e, held)
		}
		for _, a := range n.store.atts {
			ix.checkStoredAddresses(n, a)
		}
	}
	ix.noteUnverified()
}

// poolManaged reports whether the daemon's pool takes ip of e in: in
// ENIMultiIP mode every address of a Secondary ENI (its primary
// included), in the ENI modes only the primary of a Secondary ENI. The
// Primary ENI (eth0) and trunks are never pool ENIs (ipam Restore).
func (ix *index) poolManaged(e *admin.ENIView, ip netip.Addr) bool {
	if e.Type != admin.ENITypeSecondary {
		return false
	}
	return ix.s.mode == mode.ENIMultiIP || ip == e.PrimaryIP
}

// eniIPv4 are the IPv4 addresses of e that may be pod addresses: all but
// the primary of a Primary ENI, which is the node's own.
func eniIPv4(e *admin.ENIView) []netip.Addr {
	if e.Type == admin.ENITypePrimary {
		return slices.Clone(e.IPv4)
	}
	return append([]netip.Addr{e.PrimaryIP}, e.IPv4...)
}

// busyWith reports whether node n's daemon had cloud calls in flight that
// may touch e: pool growth, or an intent recorded for e.
func busyWith(n *nodeSnap, eniID string) bool {
	if n.pool.busy() {
		return true
	}
	if n.store == nil {
		return false
	}
	for _, in := range n.store.intents {
		if in.ENIID == eniID || in.Kind == intentCreateENI {
			return true
		}
	}
	return false
}

// checkENIAddresses finds the leaked addresses of one attached ENI; held
// are those pods and the store account for.
func (ix *index) checkENIAddresses(n *nodeSnap, e *admin.ENIView, held map[netip.Addr]bool) {
	c := ix.counts[n.in.Name]
	inFlight := e.Status != admin.ENIInUse || busyWith(n, e.ID)
	var unheld4 []netip.Addr
	for _, ip := range eniIPv4(e) {
		if held[ip] {
			continue
		}
		unheld4 = append(unheld4, ip)
		switch {
		case n.pool.has(ip):
			// an idle (or reserved, releasing) pool address
		case inFlight:
			c.InFlight++
		case n.pool == nil && ix.poolManaged(e, ip):
			c.IdleUnverified++
		default:
			ix.add(Finding{Kind: KindLeakedIP, Node: n.in.Name, Object: fmt.Sprintf("ip %s on %s", ip, e.ID),
				Detail: ix.leakDetail(n, e, ip), Sources: ix.leakSources(n)})
		}
	}
	if e.Type == admin.ENITypePrimary || inFlight {
		return // the node's own IPv6, or in flight
	}
	// The pool pairs each IPv6 address with an IPv4 one of the same ENI
	// and lists only the IPv4, so unheld IPv6 addresses beyond the unheld
	// IPv4 ones have no partner to be idle with.
	var unheld6 []netip.Addr
	for _, ip := range e.IPv6 {
		if !held[ip] {
			unheld6 = append(unheld6, ip)
		}
	}
	if len(unheld6) > len(unheld4) {
		ix.add(Finding{Kind: KindLeakedIP, Node: n.in.Name, Object: "ipv6 on " + e.ID,
			Detail: fmt.Sprintf("%d IPv6 address(es) %v held by no pod or attachment, but only %d unheld IPv4 address(es) to pair with",
				len(unheld6), unheld6, len(unheld4)),
			Sources: ix.leakSources(n)})
	}
}

func (ix *index) leakDetail(n *nodeSnap, e *admin.ENIView, ip netip.Addr) string {
	where := fmt.Sprintf("assigned to %s ENI %s attached to %s", e.Type, e.ID, n.in.InstanceID)
	if !ix.poolManaged(e, ip) {
		return where + "; held by no pod or attachment, and the daemon never pools it (" + ix.unpooledWhy(e) + ")"
	}
	return where + "; held by no pod, no store attachment, and not in the daemon's pool"
}

func (ix *index) unpooledWhy(e *admin.ENIView) string {
	if e.Type != admin.ENITypeSecondary {
		return e.Type + " ENIs are not pool ENIs"
	}
	return string(ix.s.mode) + " mode uses an ENI's primary address only"
}

func (ix *index) leakSources(n *nodeSnap) []Source {
	src := []Source{SourceCloud, SourceKube, SourceStore}
	if n.pool != nil {
		src = append(src, SourcePool)
	}
	return src
}

// checkStoredAddresses checks that the cloud has every address an
// attachment records on the node (or, for a podCIDR address, that it is
// in the node's podCIDR).
func (ix *index) checkStoredAddresses(n *nodeSnap, a attachment) {
	for _, r := range a.Resources {
		var problems []string
		switch r.Type {
		case resourceENIIP, resourceENI:
			problems = ix.missingOnENI(n, r)
		case resourceVPCIP:
			problems = ix.outsidePodCIDR(n, r)
		}
		for _, p := range problems {
			ix.add(Finding{Kind: KindMissingIP, Node: n.in.Name, Object: "attachment " + a.Key(), Detail: p,
				Sources: []Source{SourceStore, SourceCloud}})
		}
	}
}

// missingOnENI says what is wrong with an ENI resource in the cloud.
func (ix *index) missingOnENI(n *nodeSnap, r resource) []string {
	e := ix.enis[r.ENIID]
	if e == nil && r.ENIMAC != "" {
		e = ix.enisByMAC[normMAC(r.ENIMAC)]
	}
	if e == nil {
		return []string{fmt.Sprintf("store records %s %s/%s on ENI %q (%s), which the cloud does not have",
			r.Type, r.IPv4, r.IPv6, r.ENIID, r.ENIMAC)}
	}
	if e.InstanceID != n.in.InstanceID || (e.Status != admin.ENIInUse && e.Status != admin.ENIDetaching) {
		return []string{fmt.Sprintf("store records %s %s/%s on ENI %s, which the cloud has %s on %q, not on %s",
			r.Type, r.IPv4, r.IPv6, e.ID, e.Status, e.InstanceID, n.in.InstanceID)}
	}
	var out []string
	if ip, err := netip.ParseAddr(r.IPv4); err == nil && ip != e.PrimaryIP && !slices.Contains(e.IPv4, ip) {
		out = append(out, fmt.Sprintf("store records %s on ENI %s; the cloud does not assign it there%s", ip, e.ID, ix.whereIs(ip)))
	}
	if ip, err := netip.ParseAddr(r.IPv6); err == nil && !slices.Contains(e.IPv6, ip) {
		out = append(out, fmt.Sprintf("store records %s on ENI %s; the cloud does not assign it there%s", ip, e.ID, ix.whereIs(ip)))
	}
	return out
}

// whereIs says which ENI the cloud has ip on, if any.
func (ix *index) whereIs(ip netip.Addr) string {
	for _, e := range ix.s.world.ENIs {
		if e.PrimaryIP == ip || slices.Contains(e.IPv4, ip) || slices.Contains(e.IPv6, ip) {
			return fmt.Sprintf(" (it is on %s, %s, instance %q)", e.ID, e.Status, e.InstanceID)
		}
	}
	return " (no ENI has it)"
}

// outsidePodCIDR says whether a podCIDR address lies in the node's
// podCIDR.
func (ix *index) outsidePodCIDR(n *nodeSnap, r resource) []string {
	if ix.s.kube == nil {
		return nil
	}
	cidrs := nodePodCIDRs(ix.s.kube.nodes[n.in.Name])
	var out []string
	for _, s := range []string{r.IPv4, r.IPv6} {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if !slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			out = append(out, fmt.Sprintf("store records %s, outside the node's podCIDRs %v", ip, cidrs))
		}
	}
	return out
}

// checkDuplicates finds addresses two pods hold, by the API server or by
// the stores of the lab's nodes.
func (ix *index) checkDuplicates() {
	holders := map[netip.Addr][]string{}
	hold := func(ip netip.Addr, who string) {
		if !slices.Contains(holders[ip], who) {
			holders[ip] = append(holders[ip], who)
		}
	}
	for _, n := range ix.s.nodes {
		for key, p := range ix.live[n.in.Name] {
			for _, ip := range podIPs(p) {
				hold(ip, key)
			}
		}
		if n.store == nil {
			continue
		}
		for _, a := range n.store.atts {
			for _, ip := range attachmentIPs(a) {
				hold(ip, a.Key())
			}
		}
	}
	for _, ip := range sortedAddrs(holders) {
		if who := holders[ip]; len(who) > 1 {
			slices.Sort(who)
			ix.add(Finding{Kind: KindDuplicateIP, Object: "ip " + ip.String(),
				Detail:  "held by " + strings.Join(who, ", "),
				Sources: []Source{SourceKube, SourceStore}})
		}
	}
}

// noteUnverified explains idle addresses judged without a pool view.
func (ix *index) noteUnverified() {
	for _, n := range ix.s.nodes {
		if c := ix.counts[n.in.Name]; c.IdleUnverified > 0 {
			ix.notes = append(ix.notes, fmt.Sprintf(
				"%s: %d address(es) on the daemon's ENIs are held by no pod or attachment; without the daemon's pool (unreadable) "+
					"they were taken for idle pool addresses, not checked for leaks", n.in.Name, c.IdleUnverified))
		}
	}
}
