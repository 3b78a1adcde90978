package datapath

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// vethPair is a pod's veth: hostEnd in the node, podEnd in the pod.
type vethPair struct {
	hostEnd, podEnd netlink.Link
}

// isPeer reports whether h (in the node) and p (in the pod) are the two
// ends of one veth: each one's IFLA_LINK is the other's index.
func isPeer(h, p netlink.Link) bool {
	return h.Type() == "veth" && p.Type() == "veth" &&
		h.Attrs().ParentIndex == p.Attrs().Index && p.Attrs().ParentIndex == h.Attrs().Index
}

// lookupVeth finds an existing pair; either end may be nil, and a pair
// whose ends are not peers is reported as such.
func (e *env) lookupVeth(hostName, podName string) (vethPair, error) {
	var v vethPair
	var err error
	if v.hostEnd, err = e.host.linkByName(hostName); err != nil {
		return v, err
	}
	if v.podEnd, err = e.pod.linkByName(podName); err != nil {
		return v, err
	}
	return v, nil
}

// ensureVeth returns the veth pair hostName (node) / podName (pod),
// creating it when absent. The pod end is created directly inside the pod
// namespace, so no link named like a pod interface ever exists in the
// node. A host end that is not the peer of the pod's interface is left
// from an earlier sandbox of the same pod (the name derives from the pod)
// and is replaced.
func (e *env) ensureVeth(hostName, podName string) (vethPair, error) {
	v, err := e.lookupVeth(hostName, podName)
	if err != nil {
		return v, err
	}
	if v.hostEnd != nil && v.podEnd != nil && isPeer(v.hostEnd, v.podEnd) {
		e.s.HostVethIndex = v.hostEnd.Attrs().Index
		return v, nil
	}
	if v.podEnd != nil {
		return v, fmt.Errorf("pod already has a link %s (%s) that is not the peer of %s", podName, v.podEnd.Type(), hostName)
	}
	if v.hostEnd != nil {
		if v.hostEnd.Type() != "veth" {
			return v, fmt.Errorf("host link %s exists and is a %s, not a pod veth", hostName, v.hostEnd.Type())
		}
		if err := e.host.deleteLink(v.hostEnd); err != nil {
			return v, fmt.Errorf("replace stale host veth: %w", err)
		}
	}
	mtu := e.s.mtu()
	err = e.host.LinkAdd(&netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: hostName, MTU: mtu},
		PeerName:      podName,
		PeerMTU:       uint32(mtu),
		PeerNamespace: netlink.NsFd(int(e.podNS.Fd())),
	})
	if err != nil {
		return v, fmt.Errorf("add veth %s (host) / %s (pod): %w", hostName, podName, err)
	}
	if v, err = e.lookupVeth(hostName, podName); err != nil {
		return v, err
	}
	if v.hostEnd == nil || v.podEnd == nil {
		return v, fmt.Errorf("veth %s / %s vanished after creation", hostName, podName)
	}
	host := v.hostEnd
	e.created("veth "+hostName, func() error { return e.host.deleteLink(host) })
	e.s.HostVethIndex = host.Attrs().Index
	return v, nil
}

// requireVeth is Check's lookup: both ends must exist and be peers.
func (e *env) requireVeth(hostName, podName string) (vethPair, error) {
	v, err := e.lookupVeth(hostName, podName)
	switch {
	case err != nil:
		return v, err
	case v.podEnd == nil:
		return v, fmt.Errorf("link %s in pod: missing", podName)
	case v.hostEnd == nil:
		return v, fmt.Errorf("link %s in host: missing", hostName)
	case !isPeer(v.hostEnd, v.podEnd):
		return v, fmt.Errorf("link %s in pod: not the veth peer of %s", podName, hostName)
	}
	return v, nil
}

// podVethObjects is the pod side of a veth datapath: the interface up
// with its MTU, the pod's single addresses, the link-local gateways as
// permanent neighbours at the host end's MAC (so the node needs no
// address or proxy ARP on the veth), and the default and extra routes
// through them.
func (e *env) podVethObjects(v vethPair) []object {
	objs := e.podSysctls(v.podEnd.Attrs().Name)
	objs = append(objs, linkObj{h: e.pod, link: v.podEnd, mtu: e.s.mtu()})
	mac := v.hostEnd.Attrs().HardwareAddr
	for _, f := range e.s.families() {
		objs = append(objs,
			addrObj{h: e.pod, link: v.podEnd, prefix: f.host()},
			neighObj{h: e.pod, link: v.podEnd, ip: f.linkGW, mac: mac},
			newRoute(e.pod, defaultRoute(f), f.linkGW, v.podEnd, unix.RT_TABLE_MAIN))
		for _, dst := range e.s.ExtraRoutes {
			if f.has(dst) {
				objs = append(objs, newRoute(e.pod, dst.Masked(), f.linkGW, v.podEnd, unix.RT_TABLE_MAIN))
			}
		}
	}
	return objs
}

// hostVethObjects is the node side of a veth datapath: the host end up
// with its MTU, the node sysctls, and `podIP/32 dev <hostVeth> scope link`
// in main. extraDevs are further node links whose sysctls matter.
func (e *env) hostVethObjects(v vethPair, extraDevs ...string) []object {
	objs := []object{
		linkObj{h: e.host, link: v.hostEnd, mtu: e.s.mtu()},
		e.hostSysctls(append([]string{v.hostEnd.Attrs().Name}, extraDevs...)...),
	}
	for _, f := range e.s.families() {
		objs = append(objs, newRoute(e.host, f.host(), netip.Addr{}, v.hostEnd, unix.RT_TABLE_MAIN))
	}
	return objs
}

// bandwidthObjects limits a veth pod: ingress (into the pod) leaves the
// node through the host end, egress leaves the pod through its end.
func (e *env) bandwidthObjects(v vethPair) []object {
	return []object{
		tbfObj{h: e.host, link: v.hostEnd, rate: e.s.IngressBPS, mtu: e.s.mtu()},
		tbfObj{h: e.pod, link: v.podEnd, rate: e.s.EgressBPS, mtu: e.s.mtu()},
	}
}

// defaultRoute is 0.0.0.0/0 or ::/0.
func defaultRoute(f family) netip.Prefix {
	if f.v6 {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
}
