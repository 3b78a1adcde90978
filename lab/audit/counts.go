package audit

import "github.com/terway-sim/terway/fakecloud/admin"

// countAll fills each node's counts of what was read and sums them (the
// checks have counted reservations, pod veths, unverified idle and in
// flight addresses already).
func (ix *index) countAll() {
	for _, n := range ix.s.nodes {
		c := ix.counts[n.in.Name]
		ix.countCloud(n, c)
		ix.countKube(n, c)
		if s := n.store; s != nil {
			c.Attachments, c.Intents = len(s.atts), len(s.intents)
		}
		if p := n.pool; p != nil {
			c.PoolAddresses, c.PoolInflight = len(p.addrs), p.inflight
			for _, a := range p.addrs {
				switch a.State {
				case "idle":
					c.PoolIdle++
				case "inuse":
					c.PoolInUse++
				}
			}
		}
		if v := n.net; v != nil {
			c.Links, c.Addresses, c.Rules, c.Routes = len(v.links), len(v.addrs), len(v.rules), len(v.routes)
			c.Neighbours, c.Qdiscs, c.Filters = len(v.neighbours), len(v.qdiscs), len(v.filters)
		}
		ix.total.add(*c)
	}
}

func (ix *index) countCloud(n *nodeSnap, c *Counts) {
	w := ix.s.world
	if w == nil {
		return
	}
	for _, in := range w.Instances {
		if in.ID == n.in.InstanceID {
			c.Instances = 1
		}
	}
	for _, e := range ix.attached[n.in.InstanceID] {
		if e.Status != admin.ENIInUse && e.Status != admin.ENIAttaching && e.Status != admin.ENIDetaching {
			continue
		}
		c.ENIs++
		c.IPv4 += len(eniIPv4(e))
		c.IPv6 += len(e.IPv6)
	}
	for i := range w.EIPs {
		if ix.eipNode(&w.EIPs[i]) == n {
			c.EIPs++
		}
	}
}

func (ix *index) countKube(n *nodeSnap, c *Counts) {
	if ix.s.kube == nil {
		return
	}
	for _, p := range ix.s.kube.pods {
		if p.Spec.NodeName != n.in.Name || !networked(p) {
			continue
		}
		c.Pods++
		if running(p) {
			c.RunningPods++
		}
	}
}
