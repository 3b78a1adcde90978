package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/terway-sim/terway/cni"
	"github.com/terway-sim/terway/daemon/hostnet"
	"github.com/terway-sim/terway/daemon/ipam"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// The sources a restore reads what every pod holds from. The store is the
// daemon's own memory; the others are the node's truth, which survives
// the store: what the API server says each pod has (status.podIPs and the
// pod-ips annotation), the plugin's attachment records, and the host's
// per-pod routes.
const (
	sourceStore      = "store"
	sourceAPI        = "apiserver"
	sourceAnnotation = "annotation"
	sourcePlugin     = "plugin"
	sourceHost       = "host"
)

// sourceRank orders the sources by how current their word on an address
// is: what the kubelet reported for a live pod (status.podIPs) beats a
// plugin record, which beats the store (which may be an older copy),
// which beats the pod-ips annotation (the daemon's own, written after the
// store and never cleared on release).
var sourceRank = map[string]int{sourceAPI: 4, sourcePlugin: 3, sourceStore: 2, sourceAnnotation: 1, sourceHost: 0}

// heldPrefix starts the pool owner of an address some source shows as
// held by a pod the restore cannot name (a host route, or a claim that
// lost to a stronger one while the API server could not be read). Pod
// keys always contain a "/", these never do.
const heldPrefix = "held:"

func heldOwner(a netip.Addr) string { return heldPrefix + a.String() }

func isHeldOwner(owner string) bool { return strings.HasPrefix(owner, heldPrefix) }

// claim is one source's word that an address is configured for a pod.
type claim struct {
	owner      string // pod key; "" when the source cannot name the pod
	source     string
	ipv4, ipv6 netip.Addr
	// What a plugin record adds: the sandbox the address was set up in.
	containerID, netns, ifName string
}

// truth is what the sources other than the store say, gathered once at
// start.
type truth struct {
	// apiRead: the API server's pods were read (the informer synced).
	apiRead bool
	alive   map[string]k8s.Pod // live pods of this node by key (apiRead)
	claims  []claim
	// unreadable lists sources that could not be read, with why.
	unreadable []string
}

// gatherTruth reads every source it can reach besides the store.
func (d *Daemon) gatherTruth() truth {
	t := truth{apiRead: d.kube.Synced(), alive: map[string]k8s.Pod{}}
	if t.apiRead {
		pods, err := d.kube.Pods()
		if err != nil {
			t.apiRead = false
			t.unreadable = append(t.unreadable, fmt.Sprintf("%s: %v", sourceAPI, err))
		}
		for _, p := range pods {
			if !p.Alive() {
				continue
			}
			t.alive[p.Key()] = p
			if c, ok := addrClaim(p.Key(), sourceAPI, p.IPs); ok {
				t.claims = append(t.claims, c)
			}
			if c, ok := addrClaim(p.Key(), sourceAnnotation, p.AnnotatedIPs); ok {
				t.claims = append(t.claims, c)
			}
		}
	} else {
		t.unreadable = append(t.unreadable, sourceAPI+": the pod informer has not synced")
	}
	recs, errs := cni.ReadRecords(d.cfg.CNIStateDir)
	for _, err := range errs {
		d.log.Warn("restore: a plugin attachment record cannot be read", "dir", d.cfg.CNIStateDir, "err", err)
	}
	for _, r := range recs {
		if r.Namespace == "" || r.Name == "" || !r.IPv4.IsValid() && !r.IPv6.IsValid() {
			continue
		}
		t.claims = append(t.claims, claim{owner: r.Namespace + "/" + r.Name, source: sourcePlugin, ipv4: r.IPv4, ipv6: r.IPv6,
			containerID: r.ContainerID, netns: r.NetNS, ifName: r.IfName})
	}
	if d.host != nil {
		addrs, err := d.host.PodAddresses()
		if err != nil {
			t.unreadable = append(t.unreadable, fmt.Sprintf("%s: %v", sourceHost, err))
		}
		for ip, e := range addrs {
			if liveRoute(e) && ip.Is4() {
				t.claims = append(t.claims, claim{source: sourceHost, ipv4: ip})
			}
		}
	}
	return t
}

// addrClaim turns a pod's address list into a claim (first IPv4, first
// IPv6).
func addrClaim(owner, source string, ips []netip.Addr) (claim, bool) {
	c := claim{owner: owner, source: source}
	for _, a := range ips {
		switch {
		case a.Is4() && !c.ipv4.IsValid():
			c.ipv4 = a
		case a.Is6() && !c.ipv6.IsValid():
			c.ipv6 = a
		}
	}
	return c, c.ipv4.IsValid()
}

// restorePlan is what the restore hands the pool, and what it learned.
type restorePlan struct {
	holdings []ipam.Holding
	// rebuilt are pods whose holding came from the node's truth, not the
	// store, with the claim that decided it and every source that showed
	// it.
	rebuilt map[string]claim
	sources map[string][]string
	// dropped are store records a stronger source contradicted.
	dropped []store.Attachment
	// bySource counts the rebuilt holdings each source showed.
	bySource map[string]int
}

// plan decides, address by address, who holds what. Every address any
// source shows as held stays held: a live pod's own word (API server, then
// plugin record) beats the store, which may be an older copy; a claim that
// loses (the address is another pod's, or its pod holds another one) and
// an address only the host's routes show keep the address under a
// placeholder owner, which GC releases once no source shows it any more.
func plan(atts []store.Attachment, t truth, storeHoldings func([]store.Attachment) []ipam.Holding) restorePlan {
	p := restorePlan{rebuilt: map[string]claim{}, sources: map[string][]string{}, bySource: map[string]int{}}
	claims := slices.Clone(t.claims)
	stored := map[string]ipam.Holding{}
	var records []store.Attachment
	for _, a := range atts {
		for _, h := range storeHoldings([]store.Attachment{a}) {
			stored[a.Key()] = h
			records = append(records, a)
			claims = append(claims, claim{owner: a.Key(), source: sourceStore, ipv4: h.IPv4, ipv6: h.IPv6})
		}
	}
	if t.apiRead {
		// A record of a pod that is gone is no evidence: GC releases it.
		claims = slices.DeleteFunc(claims, func(c claim) bool {
			_, ok := t.alive[c.owner]
			return c.source == sourcePlugin && !ok
		})
	}
	sort.SliceStable(claims, func(i, j int) bool { return sourceRank[claims[i].source] > sourceRank[claims[j].source] })
	holder := map[netip.Addr]string{} // address -> owner (placeholder included)
	addrOf := map[string]netip.Addr{} // pod -> the address it holds
	var losers []claim
	for _, c := range claims {
		switch h, taken := holder[c.ipv4]; {
		case c.owner == "":
			losers = append(losers, c)
		case taken && h == c.owner:
		case taken, addrOf[c.owner].IsValid():
			losers = append(losers, c)
		default:
			holder[c.ipv4], addrOf[c.owner] = c.owner, c.ipv4
		}
	}
	for owner, ip := range addrOf {
		h, inStore := stored[owner]
		if inStore && h.IPv4 == ip {
			p.holdings = append(p.holdings, h) // the store's own record, with its ENI and reservation
			continue
		}
		var c claim
		for _, x := range claims {
			if x.owner == owner && x.ipv4 == ip {
				if !c.ipv4.IsValid() || (c.containerID == "" && x.containerID != "") {
					c = x
				}
				p.bySource[x.source]++
				p.sources[owner] = append(p.sources[owner], x.source)
			}
		}
		p.rebuilt[owner] = c
		p.holdings = append(p.holdings, ipam.Holding{Owner: owner, IPv4: c.ipv4, IPv6: c.ipv6})
	}
	for _, a := range records {
		if addrOf[a.Key()] != stored[a.Key()].IPv4 {
			p.dropped = append(p.dropped, a) // another address, or another pod's
		}
	}
	for _, c := range losers {
		if _, taken := holder[c.ipv4]; !taken {
			holder[c.ipv4] = heldOwner(c.ipv4)
			p.holdings = append(p.holdings, ipam.Holding{Owner: heldOwner(c.ipv4), IPv4: c.ipv4, Optional: true})
		}
	}
	sort.Slice(p.holdings, func(i, j int) bool { return p.holdings[i].IPv4.Less(p.holdings[j].IPv4) })
	return p
}

// liveRoute reports whether a host entry routes to a link that exists: a
// pod's veth (or host peer). Rules alone, or routes through a link that
// is gone, are leftovers of a pod that is gone.
func liveRoute(e hostnet.Entry) bool {
	for _, r := range e.Routes {
		if r.LinkName != "" {
			return true
		}
	}
	return false
}

// restore rebuilds the pool at start from the cloud, metadata, the store
// and the node's truth (the API server's pods, the plugin's records, the
// host's routes), so that an address configured in a running pod is never
// handed to another pod or returned to the cloud, whatever happened to the
// store. Intents left by a daemon that was killed are dropped afterwards:
// the orphan sweep removed ENIs it created and the adoption of attached
// addresses took in what it assigned.
func (d *Daemon) restore(ctx context.Context) error {
	atts, err := d.trustedRecords()
	if err != nil {
		return err
	}
	t := d.gatherTruth()
	for _, u := range t.unreadable {
		d.log.Warn("restore: a source of the node's truth could not be read; what the others show as held stays held", "source", u)
	}
	pl := plan(atts, t, d.storeHoldings)
	for _, a := range pl.dropped {
		d.log.Warn("restore: a store record contradicted by the node's truth is dropped", "pod", a.Key(), "resources", a.Resources)
		if err := d.store.Delete(a.PodNamespace, a.PodName); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	rep, err := d.pool.Restore(ctx, pl.holdings)
	if err != nil {
		return err
	}
	for _, b := range rep.Broken {
		msg := fmt.Sprintf("pod %s held %s on %s, which is no longer attached to this node", b.Owner, b.IPv4, b.ENIID)
		d.log.Warn(msg)
		d.kube.NodeEvent(k8s.Warning, "ResourceInvalid", msg)
	}
	if err := d.recordRebuilt(pl, t, rep.Broken); err != nil {
		return err
	}
	d.apiRead.Store(t.apiRead)
	intents, err := d.store.ListIntents()
	if err != nil {
		return err
	}
	for _, in := range intents {
		if err := d.store.DeleteIntent(in.Key); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	d.log.Info("restored", "enis", rep.ENIs, "addresses", rep.Addresses, "held", len(pl.holdings), "rebuilt", len(pl.rebuilt),
		"broken", len(rep.Broken), "orphansDeleted", len(rep.Swept), "intentsDropped", len(intents), "apiServerRead", t.apiRead)
	return nil
}

// trustedRecords returns the store's attachments if the store belongs to
// this instance. A store another instance wrote (a copied disk, a moved
// file) describes another node's pods: its records are dropped, and the
// node's truth alone says what is held.
func (d *Daemon) trustedRecords() ([]store.Attachment, error) {
	atts, err := d.store.List()
	if err != nil {
		return nil, err
	}
	me := d.node.Instance.ID
	if owner := d.store.Instance(); owner != "" && owner != me {
		d.log.Warn("restore: the store belongs to another instance; its records are dropped and rebuilt from the node's truth",
			"store", d.store.Path(), "storeInstance", owner, "instance", me, "records", len(atts))
		d.kube.NodeEvent(k8s.Warning, "StoreOfAnotherInstance", fmt.Sprintf(
			"store %s was written on instance %s, not %s: %d records dropped, rebuilt from the node's truth", d.store.Path(), owner, me, len(atts)))
		for _, a := range atts {
			if err := d.store.Delete(a.PodNamespace, a.PodName); err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
		}
		atts = nil
	}
	if err := d.store.SetInstance(me); err != nil {
		return nil, err
	}
	return atts, nil
}

// recordRebuilt writes a store record for every pod whose holding came
// from the node's truth, so that DEL, GC and a retried ADD find it, and
// says so at WARN and in a node event with the count per source.
func (d *Daemon) recordRebuilt(pl restorePlan, t truth, broken []ipam.Holding) error {
	if len(pl.rebuilt) == 0 {
		return nil
	}
	isBroken := map[string]bool{}
	for _, b := range broken {
		isBroken[b.Owner] = true
	}
	n := 0
	for owner, c := range pl.rebuilt {
		g, ok := d.holds(owner)
		if !ok || isBroken[owner] {
			continue
		}
		pod, alive := t.alive[owner]
		if !alive {
			ns, name, _ := strings.Cut(owner, "/")
			pod = k8s.Pod{Namespace: ns, Name: name}
		}
		reply := &rpc.AllocIPReply{Success: true, IPType: g.ipType, IPv4: true, IPv6: g.ip.IPv6.IsValid(),
			NetConfs: []*rpc.NetConf{d.netConf(g.ip, pod)}}
		req := &rpc.AllocIPRequest{K8SPodNamespace: pod.Namespace, K8SPodName: pod.Name, K8SPodInfraContainerId: c.containerID,
			Netns: c.netns, IfName: c.ifName}
		if err := d.record(pod, req, g, reply, d.foundEIP(g)); err != nil {
			return fmt.Errorf("restore: record the rebuilt holding of %s: %w", owner, err)
		}
		n++
		d.log.Warn("restore: a pod's address was rebuilt from the node's truth (the store did not have it)",
			"pod", owner, "ip", g.ip.IPv4, "sources", pl.sources[owner])
	}
	counts := make([]string, 0, len(pl.bySource))
	for _, s := range []string{sourceAPI, sourceAnnotation, sourcePlugin, sourceHost, sourceStore} {
		if c := pl.bySource[s]; c > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", s, c))
		}
	}
	msg := fmt.Sprintf("restored %d pod addresses the store did not have from the node's truth (%s)", n, strings.Join(counts, ", "))
	d.log.Warn(msg)
	d.kube.NodeEvent(k8s.Warning, "StoreRebuilt", msg)
	return nil
}

// waitForAPI marks the API server read once the pod informer syncs after
// a start without it; until then GC releases nothing.
func (d *Daemon) waitForAPI(ctx context.Context) {
	if d.apiRead.Load() {
		return
	}
	t := d.clock.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if d.kube.Synced() {
				d.apiRead.Store(true)
				d.log.Info("the API server has been read: GC may release what the node's truth no longer shows as held")
				return
			}
		}
	}
}

// stillHeld lists the addresses the node's truth shows as held now: live
// pods' addresses as the kubelet reports them, the plugin's records of
// live pods, and host routes to a live link. GC keeps a placeholder holding while its address is in it.
func (d *Daemon) stillHeld(live map[string]k8s.Pod) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, p := range live {
		if p.Alive() { // status.podIPs: the annotation is not cleared on release
			for _, a := range p.IPs {
				out[a] = true
			}
		}
	}
	recs, _ := cni.ReadRecords(d.cfg.CNIStateDir)
	for _, r := range recs {
		if p, ok := live[r.Namespace+"/"+r.Name]; ok && p.Alive() {
			out[r.IPv4] = true
		}
	}
	if d.host != nil {
		addrs, err := d.host.PodAddresses()
		if err != nil {
			// Unknown: keep everything held rather than guess.
			for _, o := range d.pool.Owners() {
				if ip, err := netip.ParseAddr(strings.TrimPrefix(o, heldPrefix)); err == nil {
					out[ip] = true
				}
			}
		}
		for ip, e := range addrs {
			if liveRoute(e) {
				out[ip] = true
			}
		}
	}
	return out
}
