package audit

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// index is the snapshot cross-referenced for the checks.
type index struct {
	s        *snapshot
	findings []Finding
	counts   map[string]*Counts // by node name
	total    Counts
	notes    []string

	byInstance map[string]*nodeSnap
	enis       map[string]*admin.ENIView // by ID
	enisByMAC  map[string]*admin.ENIView
	attached   map[string][]*admin.ENIView // instance → ENIs attached to it
	vswitches  map[string]bool             // the lab's (those of the lab instances' VPCs)
	podSpace   []netip.Prefix
	gateways   map[netip.Addr]bool
	// live are, per node, the pods that need their network now: not
	// hostNetwork, not finished, scheduled there.
	live map[string]map[string]*corev1.Pod
}

// analyze runs every check whose sources were read.
func analyze(s *snapshot) *Report {
	ix := newIndex(s)
	ix.findings = append(ix.findings, s.errs...)
	ix.checkNodes()
	ix.checkPodsAgainstStore()
	ix.checkPool()
	ix.checkAddresses()
	ix.checkDuplicates()
	ix.checkENIs()
	ix.checkEIPs()
	for _, n := range s.nodes {
		ix.checkDatapath(n)
	}
	ix.countAll()
	r := &Report{Time: s.now, Mode: s.mode, Counts: ix.total, Findings: ix.findings, Notes: ix.notes}
	for _, n := range s.nodes {
		r.Nodes = append(r.Nodes, NodeReport{Name: n.in.Name, InstanceID: n.in.InstanceID, Counts: *ix.counts[n.in.Name]})
	}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	sortFindings(r.Findings)
	return r
}

func newIndex(s *snapshot) *index {
	ix := &index{s: s, counts: map[string]*Counts{}, byInstance: map[string]*nodeSnap{},
		enis: map[string]*admin.ENIView{}, enisByMAC: map[string]*admin.ENIView{},
		attached: map[string][]*admin.ENIView{}, vswitches: map[string]bool{}, gateways: map[netip.Addr]bool{},
		live: map[string]map[string]*corev1.Pod{}}
	for _, n := range s.nodes {
		ix.counts[n.in.Name] = &Counts{}
		ix.byInstance[n.in.InstanceID] = n
		ix.live[n.in.Name] = map[string]*corev1.Pod{}
	}
	ix.indexWorld()
	ix.indexPods()
	return ix
}

func (ix *index) indexWorld() {
	w := ix.s.world
	if w == nil {
		return
	}
	vpcs := map[string]bool{}
	for _, in := range w.Instances {
		if ix.byInstance[in.ID] != nil {
			vpcs[in.VPCID] = true
		}
	}
	for _, v := range w.VSwitches {
		if !vpcs[v.VPCID] {
			continue
		}
		ix.vswitches[v.ID] = true
		ix.podSpace = append(ix.podSpace, v.CIDR)
		if v.IPv6CIDR.IsValid() {
			ix.podSpace = append(ix.podSpace, v.IPv6CIDR)
		}
		ix.gateways[v.Gateway] = true
	}
	for i := range w.ENIs {
		e := &w.ENIs[i]
		ix.enis[e.ID] = e
		ix.enisByMAC[normMAC(e.MAC)] = e
		if e.InstanceID != "" {
			ix.attached[e.InstanceID] = append(ix.attached[e.InstanceID], e)
		}
		ix.gateways[e.Gateway] = true
		if e.IPv6Gateway.IsValid() {
			ix.gateways[e.IPv6Gateway] = true
		}
	}
}

func (ix *index) indexPods() {
	k := ix.s.kube
	if k == nil {
		return
	}
	for key, p := range k.pods {
		if live := ix.live[p.Spec.NodeName]; live != nil && networked(p) && !terminal(p) {
			live[key] = p
		}
	}
	for _, n := range k.nodes {
		ix.podSpace = append(ix.podSpace, nodePodCIDRs(n)...)
	}
}

func (ix *index) add(f Finding) { ix.findings = append(ix.findings, f) }

// inPodSpace reports whether a may be a pod address: inside a lab
// vSwitch or a node podCIDR, and not a gateway.
func (ix *index) inPodSpace(a netip.Addr) bool {
	if ix.gateways[a] {
		return false
	}
	for _, p := range ix.podSpace {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// attachmentIPs are the addresses an attachment records.
func attachmentIPs(a attachment) []netip.Addr {
	var out []netip.Addr
	for _, r := range a.Resources {
		for _, s := range []string{r.IPv4, r.IPv6} {
			if ip, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, ip) {
				out = append(out, ip)
			}
		}
	}
	return out
}

// reserved reports whether a is a sticky reservation still in force.
func (ix *index) reserved(a attachment) bool {
	return !a.StickyUntil.IsZero() && ix.s.now.Before(a.StickyUntil)
}

// holderOf returns the live pod an attachment of node n belongs to, or
// nil.
func (ix *index) holderOf(n *nodeSnap, a attachment) *corev1.Pod {
	p := ix.live[n.in.Name][a.Key()]
	if p == nil || (a.PodUID != "" && string(p.UID) != a.PodUID) || !a.StickyUntil.IsZero() {
		return nil
	}
	return p
}

// liveIPs are the addresses live pods of node n hold: their status IPs
// and what the store records for them.
func (ix *index) liveIPs(n *nodeSnap) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for key, p := range ix.live[n.in.Name] {
		for _, ip := range podIPs(p) {
			out[ip] = key
		}
	}
	if n.store != nil {
		for _, a := range n.store.atts {
			if ix.holderOf(n, a) != nil {
				for _, ip := range attachmentIPs(a) {
					out[ip] = a.Key()
				}
			}
		}
	}
	return out
}

// heldIPs are the addresses pods account for on node n: live pods' and
// every store attachment's (reservations and records of gone pods
// included: the daemon still holds those).
func (ix *index) heldIPs(n *nodeSnap) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for ip := range ix.liveIPs(n) {
		out[ip] = true
	}
	if n.store != nil {
		for _, a := range n.store.atts {
			for _, ip := range attachmentIPs(a) {
				out[ip] = true
			}
		}
	}
	return out
}

func normMAC(m string) string {
	b := []byte(m)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
