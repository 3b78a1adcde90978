package datapath

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// VLAN (a trunk's member ENI): the pod's interface is an 802.1Q
// sub-interface of the node's trunk ENI, tagged with the member ENI's
// VLAN ID, so the VPC delivers the member's traffic to the trunk and tells
// it apart by tag. It is created directly in the pod's namespace under
// IfName (Terway creates `<trunk>.<vid>` and moves it; the result is the
// same link), see createInPod. Inside the pod it is
// as ExclusiveENI's ENI: the pod's address under the vSwitch's mask,
// `default via <vSwitch gw> onlink`, the host-peer veth for Service and
// host-stack traffic, bandwidth on the sub-interface and an ifb.
//
// The trunk itself stays in the node, up with the pod MTU, shared by its
// members' pods; Teardown leaves it.

// setupVLAN finds the trunk, creates the pod's sub-interface, then the
// host peer.
func (e *env) setupVLAN() (*built, error) {
	trunk, err := e.findTrunk()
	if err != nil {
		return nil, err
	}
	sub, err := e.ensureVLAN(trunk)
	if err != nil {
		return nil, err
	}
	return e.vlan(trunk, sub, e.ensureVeth)
}

// checkVLAN looks up what Setup built.
func (e *env) checkVLAN() (*built, error) {
	trunk, err := e.findTrunk()
	if err != nil {
		return nil, err
	}
	sub, err := e.pod.linkByName(e.s.IfName)
	if err != nil {
		return nil, err
	}
	if !e.isMemberVLAN(sub) {
		return nil, fmt.Errorf("link %s in pod: missing or not VLAN %d of trunk %s", e.s.IfName, e.s.VLANID, trunk.Attrs().Name)
	}
	return e.vlan(trunk, sub, e.requireVeth)
}

// vlan gets the host peer through veth (made or only found) and lists
// the objects: the trunk, then the pod's side as ExclusiveENI's.
func (e *env) vlan(trunk, sub netlink.Link, veth func(hostName, podName string) (vethPair, error)) (*built, error) {
	b := &built{pod: sub}
	if e.s.hostPeer() {
		v, err := veth(e.s.HostVeth, HostPeerIfName)
		if err != nil {
			return nil, fmt.Errorf("host peer: %w", err)
		}
		b.veth = v
	}
	b.objects = append([]object{linkObj{h: e.host, link: trunk, mtu: e.s.mtu()}},
		e.exclusiveObjects(sub, b.veth, trunk.Attrs().HardwareAddr)...)
	return b, nil
}

// findTrunk looks the trunk ENI up by MAC among the node's links.
func (e *env) findTrunk() (netlink.Link, error) {
	mac, err := e.s.eniMAC()
	if err != nil {
		return nil, err
	}
	l, err := e.host.linkByMAC(mac)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, fmt.Errorf("trunk ENI %s: no link with this MAC in host", mac)
	}
	return l, nil
}

// isMemberVLAN reports whether l is the pod's sub-interface: a VLAN link
// with the member's ID.
func (e *env) isMemberVLAN(l netlink.Link) bool {
	v, ok := l.(*netlink.Vlan)
	return ok && v.VlanId == e.s.VLANID
}

// ensureVLAN returns the pod's sub-interface, creating it in the pod
// (see createInPod).
func (e *env) ensureVLAN(trunk netlink.Link) (netlink.Link, error) {
	return e.createInPod(e.isMemberVLAN, fmt.Sprintf("VLAN %d of trunk %s", e.s.VLANID, trunk.Attrs().Name), func(name string) netlink.Link {
		return &netlink.Vlan{
			LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: trunk.Attrs().Index, MTU: e.s.mtu(),
				Namespace: netlink.NsFd(int(e.podNS.Fd()))},
			VlanId: e.s.VLANID,
		}
	})
}

// teardownVLAN deletes the host peer, and in the pod the sub-interface
// and its ifb (the namespace's end deletes them too).
func (e *env) teardownVLAN() error {
	errs := []error{e.deleteVeth(e.s.HostVeth, HostPeerIfName)}
	if e.pod != nil {
		errs = append(errs, e.deletePodLinks("vlan"))
	}
	return errors.Join(errs...)
}
