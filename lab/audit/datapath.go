package audit

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/fakecloud/admin"
)

// linkRole is what a node link is to the audit.
type linkRole int

const (
	roleOther   linkRole = iota // lo, lab plumbing: not judged
	roleENI                     // has an ENI's MAC
	rolePodVeth                 // host end of a live pod's veth
	roleStale                   // reported as stale-veth already
)

type linkClass struct {
	role  linkRole
	owner string // rolePodVeth: the pod's key
	eni   *admin.ENIView
}

// dpCheck is the datapath check of one node.
type dpCheck struct {
	ix    *index
	n     *nodeSnap
	net   *netView
	live  map[netip.Addr]string // address → live pod key
	owned map[string]string     // expected veth name → live pod key
	self  map[netip.Addr]bool   // addresses on the node's links
	links map[int]linkClass
}

// checkDatapath judges the node namespace's pod objects against the
// node's live pods: what the plugin made for a pod that is gone is
// stale, what a live pod lacks is missing.
func (ix *index) checkDatapath(n *nodeSnap) {
	if n.net == nil {
		return
	}
	if ix.s.kube == nil {
		ix.notes = append(ix.notes, n.in.Name+": datapath not judged (no pods from the API server)")
		return
	}
	d := &dpCheck{ix: ix, n: n, net: n.net, live: ix.liveIPs(n), owned: ix.ownedVeths(n),
		self: map[netip.Addr]bool{}, links: map[int]linkClass{}}
	for _, a := range n.net.addrs {
		d.self[a.Prefix.Addr()] = true
	}
	d.classifyLinks()
	d.rules()
	d.routes()
	d.neighbours()
	d.tc()
	d.missing()
}

// ownedVeths are the host veth names the plugin gives the node's live
// pods (VethName of the pod and each interface its attachment names).
func (ix *index) ownedVeths(n *nodeSnap) map[string]string {
	ifNames := map[string][]string{}
	if n.store != nil {
		for _, a := range n.store.atts {
			if a.IfName != "" {
				ifNames[a.Key()] = append(ifNames[a.Key()], a.IfName)
			}
		}
	}
	out := map[string]string{}
	for key, p := range ix.live[n.in.Name] {
		for _, ifn := range append([]string{"eth0"}, ifNames[key]...) {
			out[datapath.VethName(ix.s.vethPrefix, p.Namespace, p.Name, ifn)] = key
		}
	}
	return out
}

// isPodAddr reports whether a may be a pod's address on this node.
func (d *dpCheck) isPodAddr(a netip.Addr) bool { return d.ix.inPodSpace(a) && !d.self[a] }

func (d *dpCheck) stale(kind Kind, object, detail string) {
	d.ix.add(Finding{Kind: kind, Node: d.n.in.Name, Object: object, Detail: detail,
		Sources: []Source{SourceNetNS, SourceKube, SourceStore}})
}

// classifyLinks sorts the node's links into ENIs, live pods' veths and
// stale ones, reporting the stale.
func (d *dpCheck) classifyLinks() {
	for _, l := range d.net.links {
		if e := d.ix.enisByMAC[l.MAC]; e != nil && l.MAC != "" {
			d.links[l.Index] = linkClass{role: roleENI, eni: e}
			d.checkENILink(l, e)
			continue
		}
		switch key, owned := d.owned[l.Name]; {
		case strings.HasPrefix(l.Name, datapath.ReapPrefix) && l.Alias == datapath.RetiredAlias:
			d.links[l.Index] = linkClass{role: roleStale}
			d.stale(KindStaleVeth, "link "+l.Name, "a veth retired by a CNI DEL that the reaper has not deleted")
		case l.Type == "veth" && owned:
			d.links[l.Index] = linkClass{role: rolePodVeth, owner: key}
			d.ix.counts[d.n.in.Name].PodVeths++
		case l.Type == "veth" && (d.looksLikePodVeth(l.Name) || d.routesPodAddr(l.Index)):
			d.links[l.Index] = linkClass{role: roleStale}
			d.stale(KindStaleVeth, "link "+l.Name, fmt.Sprintf("host veth of no live pod of the node (routes %v)", d.routedVia(l.Index)))
		default:
			d.links[l.Index] = linkClass{role: roleOther}
		}
	}
}

// checkENILink reports an ENI link the cloud does not attach to this node,
// or one that came back from a pod without a teardown.
func (d *dpCheck) checkENILink(l linkInfo, e *admin.ENIView) {
	if e.InstanceID != d.n.in.InstanceID || e.Status == admin.ENIAvailable {
		d.ix.add(Finding{Kind: KindStaleLink, Node: d.n.in.Name, Object: "link " + l.Name,
			Detail:  fmt.Sprintf("has the MAC of %s, which the cloud has %s on %q", e.ID, e.Status, e.InstanceID),
			Sources: []Source{SourceNetNS, SourceCloud}})
	}
	if strings.HasPrefix(l.Alias, datapath.ENIAliasPrefix) {
		d.ix.add(Finding{Kind: KindStaleLink, Node: d.n.in.Name, Object: "link " + l.Name,
			Detail:  fmt.Sprintf("ENI %s still carries alias %q: it left a pod without a CNI teardown", e.ID, l.Alias),
			Sources: []Source{SourceNetNS, SourceStore}})
	}
}

// looksLikePodVeth matches the plugin's naming: prefix + 11 hex digits.
func (d *dpCheck) looksLikePodVeth(name string) bool {
	rest, ok := strings.CutPrefix(name, d.ix.s.vethPrefix)
	if !ok || len(rest) != 11 {
		return false
	}
	return strings.Trim(rest, "0123456789abcdef") == ""
}

func (d *dpCheck) routedVia(index int) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range d.net.routes {
		if r.LinkIndex == index && r.Dst.IsSingleIP() && d.isPodAddr(r.Dst.Addr()) {
			out = append(out, r.Dst)
		}
	}
	return out
}

func (d *dpCheck) routesPodAddr(index int) bool { return len(d.routedVia(index)) > 0 }

// ruleAddr returns the single address a rule selects and its direction.
func ruleAddr(r ruleInfo) (netip.Addr, string) {
	switch {
	case r.Dst.IsValid() && r.Dst.IsSingleIP():
		return r.Dst.Addr(), "to"
	case r.Src.IsValid() && r.Src.IsSingleIP():
		return r.Src.Addr(), "from"
	}
	return netip.Addr{}, ""
}

func ruleText(r ruleInfo) string {
	var parts []string
	if r.Src.IsValid() {
		parts = append(parts, "from "+r.Src.String())
	}
	if r.Dst.IsValid() {
		parts = append(parts, "to "+r.Dst.String())
	}
	if r.Iif != "" {
		parts = append(parts, "iif "+r.Iif)
	}
	parts = append(parts, fmt.Sprintf("lookup %d", r.Table))
	return fmt.Sprintf("rule %d %q", r.Priority, strings.Join(parts, " "))
}

// rules reports per-pod rules (priority 512 "to", 2048 "from", or any
// rule selecting one pod-space address) of addresses no live pod holds,
// and those whose input interface is gone.
func (d *dpCheck) rules() {
	for _, r := range d.net.rules {
		ip, dir := ruleAddr(r)
		if !ip.IsValid() {
			continue
		}
		podRule := (r.Priority == datapath.ToPodPriority && dir == "to") ||
			(r.Priority == datapath.FromPodPriority && dir == "from") || d.isPodAddr(ip)
		if !podRule {
			continue
		}
		owner, ok := d.live[ip]
		switch {
		case !ok:
			d.stale(KindStaleRule, ruleText(r), fmt.Sprintf("no live pod of the node holds %s", ip))
		case r.Iif != "" && !d.net.linkNamed(r.Iif):
			d.stale(KindStaleRule, ruleText(r), fmt.Sprintf("%s is %s's, but interface %s is gone", ip, owner, r.Iif))
		}
	}
}

func (d *dpCheck) routeText(r routeInfo) string {
	dev := fmt.Sprintf("ifindex %d", r.LinkIndex)
	if l, ok := d.net.linkByIndex(r.LinkIndex); ok {
		dev = l.Name
	}
	return fmt.Sprintf("route %s dev %s table %d", r.Dst, dev, r.Table)
}

// routes reports host routes (any table but local) to single pod-space
// addresses no live pod holds, or through another pod's veth. Routes of
// stale veths go with their veth's finding.
func (d *dpCheck) routes() {
	for _, r := range d.net.routes {
		if r.Table == unix.RT_TABLE_LOCAL || r.Type != unix.RTN_UNICAST || !r.Dst.IsSingleIP() {
			continue
		}
		ip := r.Dst.Addr()
		lc := d.links[r.LinkIndex]
		if lc.role == roleStale || (!d.isPodAddr(ip) && lc.role != rolePodVeth) {
			continue
		}
		owner, ok := d.live[ip]
		switch {
		case !ok:
			d.stale(KindStaleRoute, d.routeText(r), fmt.Sprintf("no live pod of the node holds %s", ip))
		case lc.role == rolePodVeth && lc.owner != owner:
			d.stale(KindStaleRoute, d.routeText(r), fmt.Sprintf("%s is %s's but the route uses %s's veth", ip, owner, lc.owner))
		}
	}
}

// neighbours reports entries for pod-space addresses no live pod holds:
// any on a pod veth, permanent ones anywhere (the plugin makes none in
// the node; dynamic entries on ENIs are the VPC's ARP cache).
func (d *dpCheck) neighbours() {
	for _, nb := range d.net.neighbours {
		if !d.isPodAddr(nb.IP) {
			continue
		}
		lc := d.links[nb.LinkIndex]
		permanent := nb.State&netlink.NUD_PERMANENT != 0
		if lc.role == roleStale || (lc.role != rolePodVeth && !permanent) {
			continue
		}
		if _, ok := d.live[nb.IP]; ok {
			continue
		}
		dev := fmt.Sprintf("ifindex %d", nb.LinkIndex)
		if l, ok := d.net.linkByIndex(nb.LinkIndex); ok {
			dev = l.Name
		}
		d.stale(KindStaleNeighbour, fmt.Sprintf("neighbour %s dev %s", nb.IP, dev),
			fmt.Sprintf("no live pod of the node holds %s (lladdr %s, state %#x)", nb.IP, nb.MAC, nb.State))
	}
}

// plugged are qdisc types the plugin configures (tbf for bandwidth,
// ingress for the ifb redirect); the kernel's defaults are not judged.
var plugged = map[string]bool{"tbf": true, "ingress": true, "clsact": true, "htb": true}

// tc reports plugin qdiscs on ENI links (the plugin shapes ENIs only
// inside pods) and filters redirecting to a vanished link.
func (d *dpCheck) tc() {
	for _, q := range d.net.qdiscs {
		lc := d.links[q.LinkIndex]
		if !plugged[q.Type] || lc.role != roleENI {
			continue
		}
		l, _ := d.net.linkByIndex(q.LinkIndex)
		d.stale(KindStaleTC, fmt.Sprintf("qdisc %s on %s", q.Type, l.Name),
			fmt.Sprintf("ENI %s carries a qdisc the plugin only sets inside a pod", lc.eni.ID))
	}
	for _, f := range d.net.filters {
		lc := d.links[f.LinkIndex]
		if lc.role == roleStale {
			continue
		}
		l, _ := d.net.linkByIndex(f.LinkIndex)
		_, target := d.net.linkByIndex(f.RedirIndex)
		switch {
		case f.RedirIndex != 0 && !target:
			d.stale(KindStaleTC, fmt.Sprintf("filter %s on %s", f.Type, l.Name),
				fmt.Sprintf("redirects to ifindex %d, which is gone", f.RedirIndex))
		case lc.role == roleENI:
			d.stale(KindStaleTC, fmt.Sprintf("filter %s on %s", f.Type, l.Name),
				fmt.Sprintf("ENI %s carries a filter the plugin only sets inside a pod", lc.eni.ID))
		}
	}
}

// missing reports live, running pods with a veth datapath whose host
// route (and, for ENIMultiIP, rules 512 and 2048) are absent.
func (d *dpCheck) missing() {
	if d.n.store == nil {
		return
	}
	for _, a := range d.n.store.atts {
		p := d.ix.holderOf(d.n, a)
		if p == nil || !running(p) || (a.IPType != ipTypeENIMultiIP && a.IPType != ipTypeVPCIP) {
			continue
		}
		ifn := a.IfName
		if ifn == "" {
			ifn = "eth0"
		}
		veth := datapath.VethName(d.ix.s.vethPrefix, p.Namespace, p.Name, ifn)
		var lacks []string
		for _, ip := range attachmentIPs(a) {
			lacks = append(lacks, d.lacks(a.IPType, veth, ip)...)
		}
		if len(lacks) > 0 {
			d.ix.add(Finding{Kind: KindMissingDatapath, Node: d.n.in.Name, Object: "pod " + a.Key(),
				Detail:  "the node lacks " + strings.Join(lacks, ", "),
				Sources: []Source{SourceNetNS, SourceStore, SourceKube}})
		}
	}
}

// lacks lists the host objects of ip that are missing.
func (d *dpCheck) lacks(t string, veth string, ip netip.Addr) []string {
	host := netip.PrefixFrom(ip, ip.BitLen())
	var route, to, from bool
	for _, r := range d.net.routes {
		if l, ok := d.net.linkByIndex(r.LinkIndex); ok && r.Table == unix.RT_TABLE_MAIN && r.Dst == host && l.Name == veth {
			route = true
		}
	}
	for _, r := range d.net.rules {
		to = to || (r.Priority == datapath.ToPodPriority && r.Dst == host)
		from = from || (r.Priority == datapath.FromPodPriority && r.Src == host)
	}
	var out []string
	if !route {
		out = append(out, fmt.Sprintf("route %s dev %s", host, veth))
	}
	if t == ipTypeENIMultiIP && !to {
		out = append(out, fmt.Sprintf("rule %d to %s", datapath.ToPodPriority, ip))
	}
	if t == ipTypeENIMultiIP && !from {
		out = append(out, fmt.Sprintf("rule %d from %s", datapath.FromPodPriority, ip))
	}
	return out
}
