package datapath

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// built is a datapath's links and the objects that complete it.
type built struct {
	// veth is the pod's veth (PolicyRoute, VPCRoute) or the host peer
	// (ExclusiveENI; zero without one).
	veth vethPair
	// pod is the pod interface when it is not veth.podEnd (the ENI).
	pod     netlink.Link
	objects []object
}

// podLink is the interface named IfName in the pod.
func (b *built) podLink() netlink.Link {
	if b.pod != nil {
		return b.pod
	}
	return b.veth.podEnd
}

// Setup builds the interface described by s, in both namespaces, and
// returns it as a CNI result (interfaces, IPs with their gateway, routes).
// It is idempotent: every object is compared first and only added or
// replaced when missing or different, so running it again changes nothing
// and repairs what is broken. Concurrent Setups of pods sharing an ENI are
// safe: they only touch the ENI's shared state with idempotent operations.
// On failure it removes what it created for this pod (not the shared ENI
// state) and, for ExclusiveENI, returns the ENI to the node. For
// ExclusiveENI it records the ENI's host name in s.ENIName.
func Setup(s *Spec) (res *current.Result, err error) {
	e, err := openEnv(s, true)
	if err != nil {
		return nil, err
	}
	defer e.close()
	defer func() {
		if err != nil {
			e.rollback()
			err = fmt.Errorf("set up %s datapath for %s: %w", s.Kind, s.IfName, err)
		}
	}()
	b, err := e.walk(kindLinks[s.Kind].setup, object.ensure)
	if err != nil {
		return nil, err
	}
	return e.result(b)
}

// kindLinks are, per kind (openEnv refuses any other), how Setup makes a
// datapath's links and how Check finds them.
var kindLinks = map[Kind]struct{ setup, check func(*env) (*built, error) }{
	PolicyRoute:  {(*env).setupPolicyRoute, (*env).checkPolicyRoute},
	VPCRoute:     {(*env).setupVPCRoute, (*env).checkVPCRoute},
	ExclusiveENI: {(*env).setupExclusiveENI, (*env).checkExclusiveENI},
	IPVlan:       {(*env).setupIPVlan, (*env).checkIPVlan},
	VLAN:         {(*env).setupVLAN, (*env).checkVLAN},
}

// walk gets the datapath's links through links, then passes every object
// to do (ensure or check), stopping at the first error.
func (e *env) walk(links func(*env) (*built, error), do func(object) error) (*built, error) {
	b, err := links(e)
	if err != nil {
		return nil, err
	}
	for _, o := range b.objects {
		if err := do(o); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// result describes the built interface the CNI way.
func (e *env) result(b *built) (*current.Result, error) {
	pod, err := e.pod.LinkByIndex(b.podLink().Attrs().Index)
	if err != nil {
		return nil, fmt.Errorf("read link %s in pod: %w", e.s.IfName, err)
	}
	r := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	if b.veth.hostEnd != nil {
		r.Interfaces = append(r.Interfaces, &current.Interface{
			Name: b.veth.hostEnd.Attrs().Name,
			Mac:  b.veth.hostEnd.Attrs().HardwareAddr.String(),
		})
	}
	podIndex := len(r.Interfaces)
	r.Interfaces = append(r.Interfaces, &current.Interface{
		Name:    pod.Attrs().Name,
		Mac:     pod.Attrs().HardwareAddr.String(),
		Sandbox: e.s.PodNetNS,
	})
	if b.pod != nil && b.veth.podEnd != nil {
		r.Interfaces = append(r.Interfaces, &current.Interface{
			Name:    b.veth.podEnd.Attrs().Name,
			Mac:     b.veth.podEnd.Attrs().HardwareAddr.String(),
			Sandbox: e.s.PodNetNS,
		})
	}
	for _, f := range e.s.families() {
		gw := f.linkGW
		if e.s.Kind != PolicyRoute && e.s.Kind != VPCRoute {
			gw = f.gw
		}
		addr := e.s.podPrefix(f)
		r.IPs = append(r.IPs, &current.IPConfig{
			Interface: current.Int(podIndex),
			Address:   *nlsafe.IPNet(addr),
			Gateway:   gw.AsSlice(),
		})
		r.Routes = append(r.Routes, cniRoute(defaultRoute(f), gw))
		for _, dst := range e.s.ExtraRoutes {
			if f.has(dst) {
				r.Routes = append(r.Routes, cniRoute(dst.Masked(), gw))
			}
		}
	}
	return r, nil
}

func cniRoute(dst netip.Prefix, gw netip.Addr) *types.Route {
	return &types.Route{Dst: *nlsafe.IPNet(dst), GW: net.IP(gw.AsSlice())}
}
