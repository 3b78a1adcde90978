// Package datapath builds, checks and removes the network of one pod
// interface with netlink: the links, addresses, routes, policy rules,
// neighbours, qdiscs and sysctls of both the pod's and the node's ("host")
// network namespace, for each of Terway's datapaths.
//
// Every function is idempotent and takes a Spec, which is plain data: the
// CNI plugin persists the Spec of every attachment so that DEL and GC can
// undo it even when the daemon is gone or the pod's namespace has vanished.
package datapath

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Kind names a datapath.
type Kind string

// The datapaths the plugin builds.
const (
	// PolicyRoute (ENIMultiIP, "Veth"): a veth pair, the pod's /32 with a
	// default route via 169.254.1.1, and policy rules in the node that
	// send the pod's traffic out of its ENI through a per-ENI table.
	PolicyRoute Kind = "PolicyRoute"
	// ExclusiveENI (VPCENI / ENIOnly): the ENI itself moves into the pod,
	// plus a host-peer veth for Service traffic unless disabled.
	ExclusiveENI Kind = "ExclusiveENI"
	// VPCRoute (VPC mode): a veth pair and a host route to an address of
	// the node's podCIDR; the VPC route table carries the podCIDR.
	VPCRoute Kind = "VPCRoute"
	// IPVlan (ENIMultiIP, "IPVlan"): an ipvlan L2 slave of the ENI in the
	// pod, with a host-side slave for the node's own and Service traffic.
	IPVlan Kind = "IPVlan"
	// VLAN (a trunk's member ENI): an 802.1Q sub-interface of the trunk
	// ENI in the pod, plus the host-peer veth as ExclusiveENI has.
	VLAN Kind = "VLAN"
)

// Spec is everything needed to build, check or remove one pod interface.
type Spec struct {
	Kind Kind `json:"kind"`
	// HostNetNS is the node's network namespace path; empty means the
	// namespace of the calling thread (the plugin runs in the node's).
	HostNetNS string `json:"hostNetns,omitempty"`
	// PodNetNS is the pod's network namespace path. Teardown accepts an
	// empty or vanished one, or a namespace file of another kind, and
	// then cleans the host side only.
	PodNetNS string `json:"podNetns,omitempty"`
	// IfName is the interface name inside the pod (CNI_IFNAME).
	IfName string `json:"ifName"`
	// HostVeth is the host end of the pod's veth (PolicyRoute, VPCRoute)
	// or of the host-peer veth (ExclusiveENI); see VethName.
	HostVeth string `json:"hostVeth"`
	// HostVethIndex is the ifindex of HostVeth, recorded by Setup. Every
	// sandbox of a pod gets the same veth name, so Teardown touches a host
	// link of that name only when its index matches: a late DEL (or GC)
	// of an old sandbox must not tear down the new one. 0: unknown (state
	// written before it existed), the name alone decides.
	HostVethIndex int `json:"hostVethIndex,omitempty"`
	// MTU of the pod interface and of the ENI; 0 means 1500.
	MTU int `json:"mtu,omitempty"`

	// IPv4 and IPv6 are the pod's addresses; either may be unset, not both.
	IPv4 netip.Addr `json:"ipv4,omitzero"`
	IPv6 netip.Addr `json:"ipv6,omitzero"`
	// CIDRv4 and CIDRv6 are the vSwitch CIDRs (ENI modes) or the node's
	// podCIDR (VPC mode).
	CIDRv4 netip.Prefix `json:"cidrv4,omitzero"`
	CIDRv6 netip.Prefix `json:"cidrv6,omitzero"`
	// Gatewayv4 and Gatewayv6 are the vSwitch gateways (ENI modes).
	Gatewayv4 netip.Addr `json:"gatewayv4,omitzero"`
	Gatewayv6 netip.Addr `json:"gatewayv6,omitzero"`

	// ENIMAC finds the ENI among the node's links, whatever their type
	// (PolicyRoute, ExclusiveENI, IPVlan; the trunk ENI for VLAN).
	ENIMAC string `json:"eniMac,omitempty"`
	// ENIName is the ENI's link name in the node before ExclusiveENI moved
	// it into the pod. Setup records it; Teardown restores it.
	ENIName string `json:"eniName,omitempty"`
	// VLANID is the member ENI's VLAN on the trunk (VLAN).
	VLANID int `json:"vlanId,omitempty"`

	// ServiceCIDRs and HostStackCIDRs are routed to the host through the
	// host peer (ExclusiveENI).
	ServiceCIDRs   []netip.Prefix `json:"serviceCidrs,omitempty"`
	HostStackCIDRs []netip.Prefix `json:"hostStackCidrs,omitempty"`
	// DisableHostPeer drops ExclusiveENI's host-peer veth.
	DisableHostPeer bool `json:"disableHostPeer,omitempty"`
	// ExtraRoutes are routed via the pod's gateway.
	ExtraRoutes []netip.Prefix `json:"extraRoutes,omitempty"`

	// IngressBPS and EgressBPS limit the pod's bandwidth in bytes per
	// second with tc tbf; 0 means unlimited.
	IngressBPS uint64 `json:"ingressBps,omitempty"`
	EgressBPS  uint64 `json:"egressBps,omitempty"`
}

// ErrIPVlanUnsupported is returned by ProbeIPVlan when the kernel cannot
// create ipvlan links.
var ErrIPVlanUnsupported = errors.New("kernel lacks ipvlan")

// ErrVLANUnsupported is in Setup's error when the kernel cannot create
// 802.1Q VLAN links, which a trunk member's pod needs: there is no
// fallback for it, a member ENI being a security boundary.
var ErrVLANUnsupported = errors.New("kernel lacks 802.1Q VLAN links")

// Addresses and numbers shared by the datapaths (Terway's constants).
const (
	// ToPodPriority is the priority of the host rule `to podIP lookup main`
	// (Terway's toContainerPriority). The daemon's GC (daemon/hostnet)
	// and the lab's audit find the plugin's rules by this constant, so it
	// is the one definition of the number.
	ToPodPriority = 512
	// FromPodPriority is the priority of the host rule `from podIP iif
	// <hostVeth> lookup <ENI table>` (Terway's fromContainerPriority); one
	// definition, as ToPodPriority.
	FromPodPriority = 2048
	// ENITableBase plus the ENI's ifindex is the ENI's route table.
	ENITableBase = 1000
	// DefaultMTU is used when Spec.MTU is 0.
	DefaultMTU = 1500
	// HostPeerIfName is ExclusiveENI's pod-side host-peer veth.
	HostPeerIfName = "veth1"
)

// Link-local gateways of the veth datapaths: the pod reaches them through
// a permanent neighbour pointing at the host veth's MAC, so no host
// address is needed.
var (
	linkGatewayV4 = netip.MustParseAddr("169.254.1.1")
	linkGatewayV6 = netip.MustParseAddr("fe80::1")
)

// ENITable is the policy-routing table of the ENI with ifindex index.
func ENITable(index int) int { return ENITableBase + index }

// mtu is the MTU of every link the datapath configures.
func (s *Spec) mtu() int {
	if s.MTU == 0 {
		return DefaultMTU
	}
	return s.MTU
}

// minMTU is the smallest MTU the pod's families allow.
func (s *Spec) minMTU() int {
	if s.IPv6.IsValid() {
		return 1280
	}
	return 68
}

// hostPeer reports whether ExclusiveENI or VLAN adds the host-peer veth:
// only for the pod's primary interface, as Terway does.
func (s *Spec) hostPeer() bool {
	return (s.Kind == ExclusiveENI || s.Kind == VLAN) && !s.DisableHostPeer && s.IfName == "eth0"
}

// usesVeth reports whether the pod interface is the pod end of a veth pair.
func (s *Spec) usesVeth() bool { return s.Kind == PolicyRoute || s.Kind == VPCRoute }

// SetsUpConcurrently reports whether Setups and Teardowns of different
// pods of this spec's kind may run at once on a node: the node-side
// objects of PolicyRoute and VPCRoute are the pod's own (its veth, rules
// and routes) or shared ones that concurrent Setups converge on (the ENI's
// table route and node address; TestConcurrentSetupSharedENI), which
// Teardown leaves. IPVlan's shared ipvlan link and ENI filters and the
// ENI an ExclusiveENI moves are not shown to be.
func (s *Spec) SetsUpConcurrently() bool { return s.usesVeth() }

// family is one address family of the pod with the gateways that go with
// it, so the datapaths are written once for IPv4 and IPv6.
type family struct {
	v6  bool
	pod netip.Addr
	// gw is the vSwitch gateway (ENI modes), linkGW the link-local one.
	gw, linkGW netip.Addr
	// cidr is the vSwitch's (ENI modes) or podCIDR (VPC mode), if known.
	cidr netip.Prefix
}

// nl is the netlink family constant.
func (f family) nl() int {
	if f.v6 {
		return netlinkFamilyV6
	}
	return netlinkFamilyV4
}

// host is the pod address as a single-address prefix (/32 or /128).
func (f family) host() netip.Prefix { return netip.PrefixFrom(f.pod, f.pod.BitLen()) }

// onLink is the pod address with the vSwitch's mask, for a pod that
// shares the vSwitch's L2 segment (IPVlan); the single address without
// a known vSwitch.
func (f family) onLink() netip.Prefix {
	if !f.cidr.IsValid() {
		return f.host()
	}
	return netip.PrefixFrom(f.pod, f.cidr.Bits())
}

// podPrefix is the pod's address on its interface: under the vSwitch's
// mask for the kinds on the vSwitch's L2 segment (IPVlan, VLAN), a
// single address otherwise.
func (s *Spec) podPrefix(f family) netip.Prefix {
	if s.Kind == IPVlan || s.Kind == VLAN {
		return f.onLink()
	}
	return f.host()
}

// has reports whether p belongs to this family.
func (f family) has(p netip.Prefix) bool { return p.Addr().Is6() == f.v6 }

// families lists the pod's address families, IPv4 first.
func (s *Spec) families() []family {
	var fams []family
	if s.IPv4.IsValid() {
		fams = append(fams, family{pod: s.IPv4, gw: s.Gatewayv4, linkGW: linkGatewayV4, cidr: s.CIDRv4})
	}
	if s.IPv6.IsValid() {
		fams = append(fams, family{v6: true, pod: s.IPv6, gw: s.Gatewayv6, linkGW: linkGatewayV6, cidr: s.CIDRv6})
	}
	return fams
}

// eniMAC parses ENIMAC.
func (s *Spec) eniMAC() (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s.ENIMAC)
	if err != nil {
		return nil, fmt.Errorf("ENI MAC %q: %w", s.ENIMAC, err)
	}
	return mac, nil
}

// validate rejects specs Setup and Check cannot build, before anything is
// touched.
func (s *Spec) validate() error {
	if err := s.validateBase(); err != nil {
		return err
	}
	if !s.IPv4.IsValid() && !s.IPv6.IsValid() {
		return errors.New("datapath spec: neither IPv4 nor IPv6 address")
	}
	if s.IPv4.IsValid() && !s.IPv4.Is4() {
		return fmt.Errorf("datapath spec: ipv4 %s is not an IPv4 address", s.IPv4)
	}
	if s.IPv6.IsValid() && (!s.IPv6.Is6() || s.IPv6.Is4In6()) {
		return fmt.Errorf("datapath spec: ipv6 %s is not an IPv6 address", s.IPv6)
	}
	if minMTU := s.minMTU(); s.MTU != 0 && (s.MTU < minMTU || s.MTU > 65535) {
		return fmt.Errorf("datapath spec: MTU %d out of range %d-65535", s.MTU, minMTU)
	}
	if s.Kind == VLAN && (s.VLANID < 1 || s.VLANID > 4094) {
		return fmt.Errorf("datapath spec: VLAN ID %d out of range 1-4094", s.VLANID)
	}
	if s.Kind == IPVlan {
		for _, c := range []struct {
			pod  netip.Addr
			cidr netip.Prefix
		}{{s.IPv4, s.CIDRv4}, {s.IPv6, s.CIDRv6}} {
			if c.pod.IsValid() && c.cidr.IsValid() && !c.cidr.Contains(c.pod) {
				return fmt.Errorf("datapath spec: pod address %s outside its vSwitch %s", c.pod, c.cidr)
			}
		}
	}
	if s.Kind != VPCRoute {
		if _, err := s.eniMAC(); err != nil {
			return fmt.Errorf("datapath spec: %w", err)
		}
		for _, f := range s.families() {
			if !f.gw.IsValid() || f.gw.Is6() != f.v6 {
				return fmt.Errorf("datapath spec: %s needs the vSwitch gateway of %s", s.Kind, f.pod)
			}
		}
	}
	if (s.usesVeth() || s.hostPeer()) && s.HostVeth == "" {
		return fmt.Errorf("datapath spec: %s needs hostVeth", s.Kind)
	}
	return nil
}

// validateBase is what Teardown needs: it accepts specs missing addresses
// or gateways, as long as it knows what kind of datapath to remove.
func (s *Spec) validateBase() error {
	switch s.Kind {
	case PolicyRoute, VPCRoute, ExclusiveENI, IPVlan, VLAN:
	default:
		return fmt.Errorf("datapath spec: unknown kind %q", s.Kind)
	}
	for _, n := range []struct{ what, name string }{{"ifName", s.IfName}, {"hostVeth", s.HostVeth}} {
		if len(n.name) > 15 || strings.ContainsAny(n.name, "/ \t\n:") {
			return fmt.Errorf("datapath spec: %s %q is not a valid link name", n.what, n.name)
		}
	}
	if s.IfName == "" {
		return errors.New("datapath spec: empty ifName")
	}
	return nil
}
