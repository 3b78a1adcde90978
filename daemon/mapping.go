package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	"github.com/terway-sim/terway/daemon/hostnet"
	"github.com/terway-sim/terway/daemon/ipam"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// mappingView is what the three-way mapping compares: the daemon's own
// view (store and pool), the remote one (what instance metadata shows
// attached to the node) and the pods.
type mappingView struct {
	atts   []store.Attachment
	addrs  []ipam.Address
	remote map[netip.Addr]string // address → MAC, from metadata
	pods   map[string]k8s.Pod
	host   map[netip.Addr]hostnet.Entry // nil without a host handle
}

func (d *Daemon) readMappingView(ctx context.Context) (*mappingView, error) {
	v := &mappingView{addrs: d.pool.Addresses(), remote: map[netip.Addr]string{}, pods: map[string]k8s.Pod{}}
	var err error
	if v.atts, err = d.store.List(); err != nil {
		return nil, err
	}
	pods, err := d.kube.Pods()
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		v.pods[p.Key()] = p
	}
	macs, err := d.node.Metadata.MACs(ctx)
	if err != nil {
		return nil, fmt.Errorf("read attached ENIs from metadata: %w", err)
	}
	for _, mac := range macs {
		ips, err := d.node.Metadata.IPv4s(ctx, mac)
		if err != nil {
			return nil, fmt.Errorf("read addresses of ENI %s from metadata: %w", mac, err)
		}
		for _, ip := range ips {
			v.remote[ip] = mac
		}
	}
	if d.host != nil {
		if v.host, err = d.host.PodAddresses(); err != nil {
			return nil, fmt.Errorf("read host rules and routes: %w", err)
		}
	}
	return v, nil
}

// addressID names a pool address the way the store names resources.
func (d *Daemon) addressID(ip ipam.IP) string {
	switch {
	case ip.ENIID == "":
		return ip.IPv4.String()
	case d.mode == mode.ENIMultiIP:
		return ip.ID()
	}
	return ip.MAC
}

// onENI reports whether metadata shows ip on its ENI (podCIDR addresses
// have no ENI and are always there).
func (v *mappingView) onENI(ip ipam.IP) bool {
	return ip.MAC == "" || v.remote[ip.IPv4] == ip.MAC
}

// Mapping compares store, pool, metadata, pods and (with a host handle)
// the host's rules and routes, and marks every resource Normal (valid),
// Idle, or Error (broken) with a reason.
func (d *Daemon) Mapping(ctx context.Context) ([]*rpc.PodResourceMapping, error) {
	v, err := d.readMappingView(ctx)
	if err != nil {
		return nil, err
	}
	out := d.podMappings(v)
	inStore := map[string]bool{}
	for _, a := range v.atts {
		inStore[a.Key()] = true
	}
	held := map[netip.Addr]bool{}
	for _, a := range v.addrs {
		held[a.IP.IPv4] = a.Owner != ""
		m := &rpc.PodResourceMapping{PodName: a.Owner, FactoryResourceName: d.addressID(a.IP)}
		switch {
		case a.Owner != "" && inStore[a.Owner]:
			continue // reported with its pod
		case isHeldOwner(a.Owner):
			m.Type, m.Reason = rpc.ResourceMappingType_MappingTypeNormal,
				"held for a pod no record names (a host route or a restored claim shows it configured); released once nothing does"
		case a.Owner != "":
			m.Type, m.Reason = rpc.ResourceMappingType_MappingTypeError, "the pool holds an address for a pod the store does not know"
		case !v.onENI(a.IP):
			m.Type, m.Reason = rpc.ResourceMappingType_MappingTypeError, "idle address that metadata does not show on its ENI"
		default:
			m.Type = rpc.ResourceMappingType_MappingTypeIdle
		}
		out = append(out, m)
	}
	for ip, e := range v.host {
		if held[ip] || len(e.Rules) == 0 {
			continue // a pod's, or not a pod route (gateways)
		}
		out = append(out, &rpc.PodResourceMapping{Type: rpc.ResourceMappingType_MappingTypeError, ResourceName: ip.String(),
			Reason: "host rules or routes for an address no pod holds"})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PodName != out[j].PodName {
			return out[i].PodName < out[j].PodName
		}
		return out[i].FactoryResourceName+out[i].ResourceName < out[j].FactoryResourceName+out[j].ResourceName
	})
	return out, nil
}

// podMappings checks each store record against the pool, metadata and
// its pod.
func (d *Daemon) podMappings(v *mappingView) []*rpc.PodResourceMapping {
	var out []*rpc.PodResourceMapping
	for _, a := range v.atts {
		key := a.Key()
		m := &rpc.PodResourceMapping{PodName: key, Type: rpc.ResourceMappingType_MappingTypeError}
		if len(a.Resources) > 0 {
			m.ResourceName = a.Resources[0].ID
		}
		g, ok := d.holds(key)
		if ok {
			m.FactoryResourceName = g.resourceID()
		}
		p, alive := v.pods[key]
		alive = alive && p.Alive()
		switch {
		case !ok:
			m.Reason = "the pool does not hold the pod's address"
		case m.FactoryResourceName != m.ResourceName:
			m.Reason = "the pool holds another address for the pod"
		case !v.onENI(g.ip):
			m.Reason = "metadata does not show the address on its ENI"
		case !alive && a.StickyUntil.IsZero():
			m.Reason = "the pod is gone; GC will release its address"
		default:
			m.Type = rpc.ResourceMappingType_MappingTypeNormal
		}
		out = append(out, m)
		if e, ok := a.EIP(); ok {
			out = append(out, eipMapping(key, e))
		}
	}
	return out
}

// eipMapping is a pod's EIP as a mapping row: the allocation ID, and the
// public address with the pod address it is bound to.
func eipMapping(pod string, e store.Resource) *rpc.PodResourceMapping {
	who := "the user's (pod-eip-instanceid)"
	if e.EIP.Owned {
		who = "allocated by the daemon"
	}
	return &rpc.PodResourceMapping{PodName: pod, Type: rpc.ResourceMappingType_MappingTypeNormal, ResourceName: e.ID,
		FactoryResourceName: e.EIP.Address + " -> " + e.EIP.PrivateIP,
		Reason:              fmt.Sprintf("EIP %s, %s", e.EIP.Address, who)}
}
