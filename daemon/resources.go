package daemon

import (
	"context"
	"net/netip"

	"github.com/terway-sim/terway/daemon/ipam"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// grant is what a pod is given: an address with its network facts, and
// how the store and the plugin name its kind.
type grant struct {
	ip ipam.IP
	resKind
}

// resKind is how the plugin and the store name a kind of resource.
type resKind struct {
	ipType    rpc.IPType
	storeType store.IPType
	resType   store.ResourceType
}

// resKinds are the kinds of resource pods get: a shared-ENI address, a
// whole ENI, a podCIDR address.
var resKinds = map[store.ResourceType]resKind{
	store.ResourceENIIP: {rpc.IPType_TypeENIMultiIP, store.IPTypeENIMultiIP, store.ResourceENIIP},
	store.ResourceENI:   {rpc.IPType_TypeVPCENI, store.IPTypeVPCENI, store.ResourceENI},
	store.ResourceVPCIP: {rpc.IPType_TypeVPCIP, store.IPTypeVPCIP, store.ResourceVPCIP},
}

// modeFacts is what the daemon knows of a mode's pool: the kinds of
// resource it holds (its own kind first; the store's records of them are
// restored in this order) and how metrics name its resource.
type modeFacts struct {
	kinds  []store.ResourceType
	metric string
}

var modes = map[mode.Mode]modeFacts{
	mode.ENIMultiIP: {kinds: []store.ResourceType{store.ResourceENIIP}, metric: "eniIp"},
	mode.ENIOnly:    {kinds: []store.ResourceType{store.ResourceENI}, metric: "eni"},
	// Whole ENIs for the pods that ask for one.
	mode.VPC: {kinds: []store.ResourceType{store.ResourceVPCIP, store.ResourceENI}, metric: "vpcIp"},
}

// grantOf names the kind of ip, a resource of the daemon's pool: the
// mode's own, except for the whole ENIs of VPC mode, which (unlike
// podCIDR addresses) carry an ENI ID.
func (d *Daemon) grantOf(ip ipam.IP) grant {
	t := modes[d.mode].kinds[0]
	if d.mode == mode.VPC && ip.ENIID != "" {
		t = store.ResourceENI
	}
	return grant{ip: ip, resKind: resKinds[t]}
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

// allocate gives pod its resource from the pool (idempotent per pod
// key): a whole ENI for a pod that asks for one where the pool has them.
func (d *Daemon) allocate(ctx context.Context, pod k8s.Pod) (grant, error) {
	alloc := d.pool.Allocate
	if x, ok := d.pool.(ipam.ExclusiveENIs); ok && pod.ExclusiveENI {
		alloc = x.AllocateENI
	}
	ip, err := alloc(ctx, pod.Key())
	if err != nil {
		return grant{}, err
	}
	return d.grantOf(ip), nil
}

// holds reports the grant key holds or has reserved.
func (d *Daemon) holds(key string) (grant, bool) {
	ip, ok := d.pool.Holds(key)
	if !ok {
		return grant{}, false
	}
	return d.grantOf(ip), true
}

// storeHoldings turns store records into holdings of the resources of
// the daemon's mode.
func (d *Daemon) storeHoldings(atts []store.Attachment) []ipam.Holding {
	var out []ipam.Holding
	for _, t := range modes[d.mode].kinds {
		out = append(out, holdings(atts, t)...)
	}
	return out
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

// sweep deletes our own Available ENIs, for the pools that do not do it
// in their own sync.
func (d *Daemon) sweep(ctx context.Context) error {
	s, ok := d.pool.(ipam.Sweeper)
	if !ok {
		return nil
	}
	_, err := s.Sweep(ctx)
	return err
}
