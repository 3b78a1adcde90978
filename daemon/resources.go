package daemon

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/terway-sim/terway/daemon/ipam"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// grant is what a pod is given: an address with its network facts, and
// how the store and the plugin name its kind.
type grant struct {
	ip        ipam.IP
	ipType    rpc.IPType
	storeType store.IPType
	resType   store.ResourceType
}

// resourceID is the store's ID of a grant: the ENI's MAC for a whole ENI,
// "<mac>.<ip>" for a shared-ENI address, the address for a podCIDR one.
func (g grant) resourceID() string {
	switch g.resType {
	case store.ResourceENI:
		return g.ip.MAC
	case store.ResourceVPCIP:
		return g.ip.IPv4.String()
	}
	return g.ip.ID()
}

// manager is the mode's resource manager.
type manager interface {
	// allocate gives pod its resource (idempotent per pod key).
	allocate(ctx context.Context, pod k8s.Pod) (grant, error)
	// release frees key's resource, keeping it reserved until until.
	release(key string, until time.Time)
	holds(key string) (grant, bool)
	// reassign moves what from holds to to, in use, in one step.
	reassign(from, to string) bool
	owners() []string
	// restore rebuilds state from the cloud, then marks what holdings
	// say is held.
	restore(ctx context.Context, holdings []ipam.Holding) (ipam.RestoreReport, error)
	// storeHoldings turns store records into holdings of this mode's
	// resources.
	storeHoldings(atts []store.Attachment) []ipam.Holding
	// run serves the pool until ctx ends and its cloud calls have
	// returned; close ends a pool that never ran (idempotent).
	run(ctx context.Context)
	close()
	stats() ipam.Stats
	starved() bool
	sweep(ctx context.Context) error
	addresses() []ipam.Address
	// kind names the pool's resource in metrics.
	kind() string
}

// holdings turns store records of type t into pool holdings.
func holdings(atts []store.Attachment, t store.ResourceType) []ipam.Holding {
	var out []ipam.Holding
	for _, a := range atts {
		for _, r := range a.Resources {
			if r.Type != t {
				continue
			}
			h := ipam.Holding{Owner: a.Key(), ENIID: r.ENIID, ReservedUntil: a.StickyUntil}
			h.IPv4, _ = netip.ParseAddr(r.IPv4)
			h.IPv6, _ = netip.ParseAddr(r.IPv6)
			out = append(out, h)
		}
	}
	return out
}

// multiIPManager serves ENIMultiIP mode from the shared-ENI pool.
type multiIPManager struct{ pool *ipam.MultiIP }

func (m multiIPManager) grant(ip ipam.IP) grant {
	return grant{ip: ip, ipType: rpc.IPType_TypeENIMultiIP, storeType: store.IPTypeENIMultiIP, resType: store.ResourceENIIP}
}

func (m multiIPManager) allocate(ctx context.Context, pod k8s.Pod) (grant, error) {
	ip, err := m.pool.Allocate(ctx, pod.Key())
	return m.grant(ip), err
}
func (m multiIPManager) release(key string, until time.Time) { m.pool.Release(key, until) }
func (m multiIPManager) holds(key string) (grant, bool) {
	ip, ok := m.pool.Holds(key)
	return m.grant(ip), ok
}
func (m multiIPManager) owners() []string              { return m.pool.Owners() }
func (m multiIPManager) reassign(from, to string) bool { return m.pool.Reassign(from, to) }
func (m multiIPManager) restore(ctx context.Context, hs []ipam.Holding) (ipam.RestoreReport, error) {
	return m.pool.Restore(ctx, hs)
}
func (m multiIPManager) storeHoldings(atts []store.Attachment) []ipam.Holding {
	return holdings(atts, store.ResourceENIIP)
}
func (m multiIPManager) run(ctx context.Context)   { m.pool.Run(ctx) }
func (m multiIPManager) close()                    { m.pool.Close() }
func (m multiIPManager) stats() ipam.Stats         { return m.pool.Stats() }
func (m multiIPManager) starved() bool             { return m.pool.Starved() }
func (m multiIPManager) addresses() []ipam.Address { return m.pool.Addresses() }
func (m multiIPManager) kind() string              { return "eniIp" }
func (m multiIPManager) sweep(ctx context.Context) error {
	_, err := m.pool.Sweep(ctx)
	return err
}

// eniManager serves ENIOnly mode: a whole ENI per pod.
type eniManager struct{ pool *ipam.ENIPool }

func eniGrant(ip ipam.IP) grant {
	return grant{ip: ip, ipType: rpc.IPType_TypeVPCENI, storeType: store.IPTypeVPCENI, resType: store.ResourceENI}
}

func (m eniManager) allocate(ctx context.Context, pod k8s.Pod) (grant, error) {
	ip, err := m.pool.Allocate(ctx, pod.Key())
	return eniGrant(ip), err
}
func (m eniManager) release(key string, until time.Time) { m.pool.Release(key, until) }
func (m eniManager) holds(key string) (grant, bool) {
	ip, ok := m.pool.Holds(key)
	return eniGrant(ip), ok
}
func (m eniManager) owners() []string              { return m.pool.Owners() }
func (m eniManager) reassign(from, to string) bool { return m.pool.Reassign(from, to) }
func (m eniManager) restore(ctx context.Context, hs []ipam.Holding) (ipam.RestoreReport, error) {
	return m.pool.Restore(ctx, hs)
}
func (m eniManager) storeHoldings(atts []store.Attachment) []ipam.Holding {
	return holdings(atts, store.ResourceENI)
}
func (m eniManager) run(ctx context.Context)         { m.pool.Run(ctx) }
func (m eniManager) close()                          { m.pool.Close() }
func (m eniManager) stats() ipam.Stats               { return m.pool.Stats() }
func (m eniManager) starved() bool                   { return m.pool.Starved() }
func (m eniManager) addresses() []ipam.Address       { return m.pool.Addresses() }
func (m eniManager) kind() string                    { return "eni" }
func (m eniManager) sweep(ctx context.Context) error { return nil }

// vpcManager serves VPC mode: an address of the node podCIDR, or a whole
// ENI for pods that ask for one (annotation k8s.aliyun.com/ENI or the
// aliyun/eni resource).
type vpcManager struct {
	cidr *ipam.PodCIDR
	enis *ipam.ENIPool // nil when the instance type has no secondary ENI
}

func vpcGrant(ip ipam.IP) grant {
	return grant{ip: ip, ipType: rpc.IPType_TypeVPCIP, storeType: store.IPTypeVPCIP, resType: store.ResourceVPCIP}
}

// errNoExclusiveENI is returned to pods asking for an ENI the node cannot
// give.
var errNoExclusiveENI = errors.New("this node has no ENIs for exclusive-ENI pods")

func (m vpcManager) allocate(ctx context.Context, pod k8s.Pod) (grant, error) {
	if pod.ExclusiveENI {
		if m.enis == nil {
			return grant{}, errNoExclusiveENI
		}
		ip, err := m.enis.Allocate(ctx, pod.Key())
		return eniGrant(ip), err
	}
	ip, err := m.cidr.Allocate(pod.Key())
	return vpcGrant(ip), err
}

func (m vpcManager) release(key string, until time.Time) {
	m.cidr.Release(key, until)
	if m.enis != nil {
		m.enis.Release(key, until)
	}
}

func (m vpcManager) holds(key string) (grant, bool) {
	if ip, ok := m.cidr.Holds(key); ok {
		return vpcGrant(ip), true
	}
	if m.enis != nil {
		if ip, ok := m.enis.Holds(key); ok {
			return eniGrant(ip), true
		}
	}
	return grant{}, false
}

func (m vpcManager) reassign(from, to string) bool {
	return m.cidr.Reassign(from, to) || (m.enis != nil && m.enis.Reassign(from, to))
}

func (m vpcManager) owners() []string {
	out := m.cidr.Owners()
	if m.enis != nil {
		out = append(out, m.enis.Owners()...)
	}
	return out
}

func (m vpcManager) storeHoldings(atts []store.Attachment) []ipam.Holding {
	return append(holdings(atts, store.ResourceVPCIP), holdings(atts, store.ResourceENI)...)
}

// restore gives the podCIDR the holdings of its addresses and the ENI
// pool the others (exclusive-ENI pods).
func (m vpcManager) restore(ctx context.Context, hs []ipam.Holding) (ipam.RestoreReport, error) {
	var inCIDR, other []ipam.Holding
	for _, h := range hs {
		if m.cidr.Contains(h.IPv4) {
			inCIDR = append(inCIDR, h)
		} else {
			other = append(other, h)
		}
	}
	rep := ipam.RestoreReport{Broken: m.cidr.Restore(inCIDR)}
	if m.enis == nil {
		for _, h := range other {
			if !h.Optional {
				rep.Broken = append(rep.Broken, h)
			}
		}
	}
	if m.enis != nil {
		r, err := m.enis.Restore(ctx, other)
		if err != nil {
			return rep, err
		}
		rep.ENIs, rep.Swept = r.ENIs, r.Swept
		rep.Broken = append(rep.Broken, r.Broken...)
	}
	return rep, nil
}

func (m vpcManager) run(ctx context.Context) {
	if m.enis != nil {
		m.enis.Run(ctx)
		return
	}
	<-ctx.Done()
}

func (m vpcManager) close() {
	if m.enis != nil {
		m.enis.Close()
	}
}

func (m vpcManager) stats() ipam.Stats {
	st := ipam.Stats{Total: m.cidr.Size()}
	st.InUse = len(m.cidr.Owners())
	st.Idle = st.Total - st.InUse
	if m.enis != nil {
		e := m.enis.Stats()
		st.ENIs = e.ENIs
	}
	return st
}

func (m vpcManager) starved() bool {
	return m.enis != nil && m.enis.Starved()
}

func (m vpcManager) kind() string                    { return "vpcIp" }
func (m vpcManager) sweep(ctx context.Context) error { return nil }

func (m vpcManager) addresses() []ipam.Address {
	var out []ipam.Address
	for _, o := range m.cidr.Owners() {
		ip, _ := m.cidr.Holds(o)
		out = append(out, ipam.Address{IP: ip, State: "inuse", Owner: o})
	}
	if m.enis != nil {
		out = append(out, m.enis.Addresses()...)
	}
	return out
}
