package datapath

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// ProbeIPVlan reports whether ipvlan links can be created, by trying one
// inside the pod's namespace (podNetNS) and removing it: nil when they
// can, an error wrapping ErrIPVlanUnsupported when the kernel lacks them.
// The parent is a temporary veth in the pod's namespace (ipvlan refuses
// loopback parents, which would be indistinguishable from a missing
// driver), so the node is never touched.
func ProbeIPVlan(podNetNS string) error {
	n, err := ns.GetNS(podNetNS)
	if err != nil {
		return fmt.Errorf("probe ipvlan: open pod network namespace %q: %w", podNetNS, err)
	}
	defer func() { _ = n.Close() }()
	h, err := newNLH(n, "pod")
	if err != nil {
		return fmt.Errorf("probe ipvlan: %w", err)
	}
	defer h.Close()

	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("probe ipvlan: random name: %w", err)
	}
	name := "ipvp" + hex.EncodeToString(b) // 12 characters, +"p"/"i" below
	parent := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name + "p"}, PeerName: name + "q"}
	if err := h.LinkAdd(parent); err != nil {
		return fmt.Errorf("probe ipvlan: add parent veth: %w", err)
	}
	// Deleting the parent deletes the ipvlan on it too.
	defer func() { _ = h.deleteLink(parent) }()
	p, err := h.LinkByName(parent.Name)
	if err != nil {
		return fmt.Errorf("probe ipvlan: parent veth: %w", err)
	}
	err = h.LinkAdd(&netlink.IPVlan{
		LinkAttrs: netlink.LinkAttrs{Name: name + "i", ParentIndex: p.Attrs().Index},
		Mode:      netlink.IPVLAN_MODE_L2,
	})
	if unsupported(err) {
		return fmt.Errorf("probe ipvlan: %w: %v", ErrIPVlanUnsupported, err)
	}
	if err != nil {
		return fmt.Errorf("probe ipvlan: %w", err)
	}
	return nil
}

// unsupported recognises the kernel's answers for a link kind it has no
// driver for: EOPNOTSUPP ("Unknown device type" in the extended ack).
func unsupported(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	return errors.Is(err, unix.EOPNOTSUPP) || strings.Contains(msg, "not supported") ||
		strings.Contains(msg, "unknown device type") || strings.Contains(msg, "unknown kind")
}

// IPVlan (ENIMultiIP, "IPVlan"), Terway's L2 design: the pod's interface
// is an ipvlan L2 slave of its ENI, created directly in the pod's
// namespace, with the pod's address under the vSwitch's mask and
// `default via <vSwitch gw> onlink`. Pods of one ENI reach each other
// inside the ipvlan port; everything else leaves through the ENI.
//
// The node side is one ipvlan L2 slave per ENI, ipvl_<ENI ifindex>,
// without ARP, holding the node's IP as a host-scope single address. The
// pod routes the node's IP through its interface with a permanent
// neighbour at its own MAC (every slave shares the ENI's), so ipvlan hands
// such frames to the slave that holds the address: the node side. The
// node reaches the pod by `podIP dev ipvl_<n> scope link`.
//
// Service and host-stack CIDRs must reach the node (kube-proxy), not the
// VPC: a clsact qdisc on the ENI has egress u32 filters for them that
// unset any tunnel metadata, mark the packet as addressed to this host and
// redirect it into the node-side slave's ingress, where the node's
// netfilter and routing take it.
//
// The ENI, its node-side slave and its filters are shared by the ENI's
// pods: Setup ensures them and Teardown leaves them, as PolicyRoute does
// its ENI table. The ipvlan port refuses an address that another of its
// slaves holds (EADDRINUSE), so two pods never hold one address on an
// ENI; Teardown asks the port the same way before it removes the node's
// route to an address another sandbox may hold by now.

// hostSlavePrefix starts the name of the node-side slave of an ENI.
const hostSlavePrefix = "ipvl_"

// hostSlaveName is the node-side slave of the ENI with ifindex index.
func hostSlaveName(index int) string { return fmt.Sprintf("%s%d", hostSlavePrefix, index) }

// ipvlanState is what IPVlan uses of the node: the ENI, its node-side
// slave and the node's addresses.
type ipvlanState struct {
	eniState
	slave netlink.Link
}

// setupIPVlan finds the ENI, ensures its node-side slave, then creates
// the pod's slave.
func (e *env) setupIPVlan() (*built, error) {
	st, err := e.findENI()
	if err != nil {
		return nil, err
	}
	ist := ipvlanState{eniState: st}
	if ist.slave, err = e.ensureHostSlave(st.link); err != nil {
		return nil, err
	}
	pod, err := e.ensurePodSlave(st.link)
	if err != nil {
		return nil, err
	}
	return &built{pod: pod, objects: e.ipvlanObjects(pod, ist)}, nil
}

// checkIPVlan looks up what Setup built.
func (e *env) checkIPVlan() (*built, error) {
	st, err := e.findENI()
	if err != nil {
		return nil, err
	}
	ist := ipvlanState{eniState: st}
	name := hostSlaveName(st.link.Attrs().Index)
	if ist.slave, err = e.host.linkByName(name); err != nil {
		return nil, err
	}
	if !isSlaveOf(ist.slave, st.link) {
		return nil, fmt.Errorf("link %s in host: missing or not an ipvlan of ENI %s", name, st.link.Attrs().Name)
	}
	pod, err := e.pod.linkByName(e.s.IfName)
	if err != nil {
		return nil, err
	}
	if pod == nil || pod.Type() != "ipvlan" || !bytes.Equal(pod.Attrs().HardwareAddr, st.link.Attrs().HardwareAddr) {
		return nil, fmt.Errorf("link %s in pod: missing or not an ipvlan of ENI %s", e.s.IfName, st.link.Attrs().Name)
	}
	return &built{pod: pod, objects: e.ipvlanObjects(pod, ist)}, nil
}

// isSlaveOf reports whether l is an ipvlan L2 slave of parent in the same
// namespace.
func isSlaveOf(l, parent netlink.Link) bool {
	v, ok := l.(*netlink.IPVlan)
	return ok && v.Mode == netlink.IPVLAN_MODE_L2 && l.Attrs().ParentIndex == parent.Attrs().Index
}

// ensureHostSlave returns the ENI's node-side slave, creating it (or
// replacing a link of its name that is not one: ifindexes are reused
// after an ENI is detached). It is shared, so a failed Setup leaves it.
func (e *env) ensureHostSlave(eni netlink.Link) (netlink.Link, error) {
	name := hostSlaveName(eni.Attrs().Index)
	l, err := e.host.linkByName(name)
	if err != nil {
		return nil, err
	}
	if l != nil && !isSlaveOf(l, eni) {
		if err := e.host.deleteLink(l); err != nil {
			return nil, fmt.Errorf("replace stale %s: %w", name, err)
		}
		l = nil
	}
	if l == nil {
		err := e.host.LinkAdd(&netlink.IPVlan{
			LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: eni.Attrs().Index, MTU: e.s.mtu()},
			Mode:      netlink.IPVLAN_MODE_L2,
		})
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("add ipvlan %s on ENI %s: %w", name, eni.Attrs().Name, err)
		}
		if l, err = e.host.linkByName(name); err != nil {
			return nil, err
		}
		if l == nil {
			return nil, fmt.Errorf("ipvlan %s vanished after creation", name)
		}
	}
	return l, nil
}

// ensurePodSlave returns the pod's slave, creating it in the pod's
// namespace (see createInPod).
func (e *env) ensurePodSlave(eni netlink.Link) (netlink.Link, error) {
	ours := func(l netlink.Link) bool {
		return l.Type() == "ipvlan" && bytes.Equal(l.Attrs().HardwareAddr, eni.Attrs().HardwareAddr)
	}
	return e.createInPod(ours, "an ipvlan of ENI "+eni.Attrs().Name, func(name string) netlink.Link {
		return &netlink.IPVlan{
			LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: eni.Attrs().Index, MTU: e.s.mtu(),
				Namespace: netlink.NsFd(int(e.podNS.Fd()))},
			Mode: netlink.IPVLAN_MODE_L2,
		}
	})
}

// ipvlanObjects is the whole IPVlan datapath: the pod's slave with its
// address, routes and the node's neighbour; the ENI and its node-side
// slave with the node's addresses and the routes to the pod; the Service
// redirect; bandwidth (egress on the pod's slave, ingress through an ifb
// in the pod, as ExclusiveENI).
func (e *env) ipvlanObjects(pod netlink.Link, st ipvlanState) []object {
	mac := st.link.Attrs().HardwareAddr
	objs := e.podSysctls(e.s.IfName)
	objs = append(objs, linkObj{h: e.pod, link: pod, mtu: e.s.mtu(), mac: mac})
	for _, f := range e.s.families() {
		objs = append(objs,
			addrObj{h: e.pod, link: pod, prefix: e.s.podPrefix(f)},
			newRoute(e.pod, defaultRoute(f), f.gw, pod, unix.RT_TABLE_MAIN))
		for _, dst := range e.s.ExtraRoutes {
			if f.has(dst) {
				objs = append(objs, newRoute(e.pod, dst.Masked(), f.gw, pod, unix.RT_TABLE_MAIN))
			}
		}
		for _, ip := range st.nodeIPs {
			if ip.Is6() == f.v6 {
				objs = append(objs,
					newRoute(e.pod, netip.PrefixFrom(ip, ip.BitLen()), netip.Addr{}, pod, unix.RT_TABLE_MAIN),
					neighObj{h: e.pod, link: pod, ip: ip, mac: mac})
			}
		}
	}
	objs = append(objs,
		linkObj{h: e.host, link: st.link, mtu: e.s.mtu()},
		linkObj{h: e.host, link: st.slave, mtu: e.s.mtu()},
		noARPObj{h: e.host, link: st.slave},
		e.hostSysctls(st.slave.Attrs().Name, st.link.Attrs().Name))
	for _, ip := range st.nodeIPs {
		// IPv6 takes an address's scope from its type, whatever asked.
		scope := netlink.SCOPE_HOST
		if ip.Is6() {
			scope = netlink.SCOPE_UNIVERSE
		}
		objs = append(objs, addrObj{h: e.host, link: st.slave, prefix: netip.PrefixFrom(ip, ip.BitLen()),
			noPrefixRoute: true, scope: scope})
	}
	for _, f := range e.s.families() {
		objs = append(objs, newRoute(e.host, f.host(), netip.Addr{}, st.slave, unix.RT_TABLE_MAIN))
	}
	cidrs := append(append([]netip.Prefix(nil), e.s.ServiceCIDRs...), e.s.HostStackCIDRs...)
	return append(objs,
		hostRedirect{h: e.host, eni: st.link, to: st.slave, cidrs: cidrs},
		tbfObj{h: e.pod, link: pod, rate: e.s.EgressBPS, mtu: e.s.mtu()},
		ingressShaper{h: e.pod, dev: pod, ifb: ifbName(e.s.IfName), created: e.created, rate: e.s.IngressBPS, mtu: e.s.mtu()})
}

// noARPObj is the NOARP flag of the node-side slave: the node resolves
// nothing on it (its neighbours are the ENI's own MAC, which ipvlan
// delivers by address), and answers no ARP from the pods for the ENI's
// addresses.
type noARPObj struct {
	h    *nlh
	link netlink.Link
}

func (o noARPObj) String() string {
	return fmt.Sprintf("flag NOARP of %s in %s", o.link.Attrs().Name, o.h.where)
}

func (o noARPObj) noARP() (bool, error) {
	l, err := o.h.LinkByIndex(o.link.Attrs().Index)
	if err != nil {
		return false, failed(o, "read", err)
	}
	return l.Attrs().RawFlags&unix.IFF_NOARP != 0, nil
}

func (o noARPObj) ensure() error {
	ok, err := o.noARP()
	if err != nil || ok {
		return err
	}
	if err := o.h.LinkSetARPOff(o.link); err != nil {
		return failed(o, "set", err)
	}
	return nil
}

func (o noARPObj) check() error {
	ok, err := o.noARP()
	switch {
	case err != nil:
		return err
	case !ok:
		return broken(o, "not set")
	}
	return nil
}

// teardownIPVlan deletes the pod's slave (and its ifb) and the node's
// routes to the pod's addresses, unless another slave of the ENI holds
// the address by now (a newer sandbox: the route is then its route).
func (e *env) teardownIPVlan() error {
	var errs []error
	if e.pod != nil {
		errs = append(errs, e.deletePodLinks("ipvlan"))
	}
	for _, f := range e.s.families() {
		errs = append(errs, e.deleteSlaveRoutes(f))
	}
	return errors.Join(errs...)
}

// deleteSlaveRoutes removes `podIP dev ipvl_<n>` from main, for every
// node-side slave, unless the slave's port says the address is in use.
func (e *env) deleteSlaveRoutes(f family) error {
	routes, err := e.host.tableRoutes(f.nl(), unix.RT_TABLE_MAIN)
	if err != nil {
		return fmt.Errorf("list host routes: %w", err)
	}
	var errs []error
	for _, r := range routes {
		if nlsafe.Prefix(r.Dst) != f.host() {
			continue
		}
		l, err := e.host.LinkByIndex(r.LinkIndex)
		if err != nil || l.Type() != "ipvlan" || !strings.HasPrefix(l.Attrs().Name, hostSlavePrefix) {
			continue
		}
		held, err := e.heldByPort(l, f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if held {
			continue
		}
		if err := e.host.RouteDel(&r); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("delete route %s dev %s: %w", f.host(), l.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}

// heldByPort asks the ipvlan port of slave whether one of its slaves holds
// the pod's address: adding it to slave fails with EADDRINUSE then. When
// the add succeeds nobody does, and the address is removed again.
func (e *env) heldByPort(slave netlink.Link, f family) (bool, error) {
	a := &netlink.Addr{IPNet: nlsafe.IPNet(f.host()), Scope: int(netlink.SCOPE_HOST)}
	if f.v6 {
		a.Scope, a.Flags = int(netlink.SCOPE_UNIVERSE), unix.IFA_F_NODAD|unix.IFA_F_NOPREFIXROUTE
	}
	err := e.host.AddrAdd(slave, a)
	switch {
	case errors.Is(err, unix.EADDRINUSE):
		return true, nil
	case errors.Is(err, unix.EEXIST):
		// The node-side slave holds it itself: only a node address can
		// be there, and the route is not a pod's then.
		return true, nil
	case err != nil:
		return false, fmt.Errorf("ask the ipvlan port of %s about %s: %w", slave.Attrs().Name, f.pod, err)
	}
	if err := e.host.AddrDel(slave, a); err != nil && !gone(err) {
		return false, fmt.Errorf("remove probe address %s from %s: %w", f.pod, slave.Attrs().Name, err)
	}
	return false, nil
}
