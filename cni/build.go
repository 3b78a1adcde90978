package cni

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/rpc"
)

// Fallback explains why a pod did not get the datapath its config asked
// for; the plugin reports it as a VirtualModeChanged pod event.
type Fallback struct {
	Requested VirtualType
	Reason    string
}

// SelectKind picks the datapath for the daemon's IPType, its ENIInfo and
// the config's eniip_virtual_type, as Terway's plugin does: TypeVPCENI →
// ExclusiveENI, or VLAN when the ENI is a trunk's member (Trunk with a
// Vid); TypeVPCIP → VPCRoute; TypeENIMultiIP → PolicyRoute, or IPVlan
// when asked for and probe (nil: the kernel can do ipvlan) agrees. A pod
// that asked for IPVlan on a kernel without it, or for datapathv2 (not
// built here), gets PolicyRoute and a non-nil Fallback saying why.
func SelectKind(ipType rpc.IPType, eni *rpc.ENIInfo, vt VirtualType, probe func() error) (datapath.Kind, *Fallback, error) {
	switch ipType {
	case rpc.IPType_TypeVPCENI:
		if eni.GetTrunk() && eni.GetVid() != 0 {
			return datapath.VLAN, nil, nil
		}
		return datapath.ExclusiveENI, nil, nil
	case rpc.IPType_TypeVPCIP:
		return datapath.VPCRoute, nil, nil
	case rpc.IPType_TypeENIMultiIP:
	default:
		return "", nil, fmt.Errorf("daemon answered unknown IPType %d", ipType)
	}
	switch vt {
	case VirtualIPVlan:
		err := probe()
		if err == nil {
			return datapath.IPVlan, nil, nil
		}
		reason := "ipvlan probe failed (" + err.Error() + ")"
		if errors.Is(err, datapath.ErrIPVlanUnsupported) {
			reason = "the kernel lacks ipvlan (" + err.Error() + ")"
		}
		return datapath.PolicyRoute, &Fallback{Requested: vt, Reason: reason}, nil
	case VirtualDatapathV2:
		return datapath.PolicyRoute, &Fallback{Requested: vt, Reason: "the datapathv2 (Cilium eBPF) datapath is not built into this plugin"}, nil
	}
	return datapath.PolicyRoute, nil, nil
}

// Message is the pod event's text.
func (f *Fallback) Message() string {
	return fmt.Sprintf("eniip_virtual_type %s requested but %s; using veth policy routing (Veth) instead", f.Requested, f.Reason)
}

// SpecInput is what BuildSpec turns into a datapath.Spec.
type SpecInput struct {
	Config    *Config
	Kind      datapath.Kind
	NetConf   *rpc.NetConf
	Pod       PodID
	HostNetNS string // "" in production: the plugin runs in the node's
	PodNetNS  string
	IfName    string
}

// BuildSpec turns the daemon's answer for one pod interface into the
// datapath's Spec.
func BuildSpec(in SpecInput) (*datapath.Spec, error) {
	nc, c := in.NetConf, in.Config
	if nc == nil || nc.BasicInfo == nil || nc.BasicInfo.PodIP == nil {
		return nil, errors.New("daemon answer without the pod's address")
	}
	b := nc.BasicInfo
	s := &datapath.Spec{
		Kind:            in.Kind,
		HostNetNS:       in.HostNetNS,
		PodNetNS:        in.PodNetNS,
		IfName:          in.IfName,
		HostVeth:        hostVethName(c.VethPrefix, in.Pod, in.IfName),
		MTU:             c.MTU,
		HostStackCIDRs:  c.HostStack,
		DisableHostPeer: c.DisableHostPeer,
	}
	var err error
	if s.IPv4, err = parseAddr("pod IPv4", b.PodIP.GetIPv4(), true); err != nil {
		return nil, err
	}
	if s.IPv6, err = parseAddr("pod IPv6", b.PodIP.GetIPv6(), false); err != nil {
		return nil, err
	}
	if !s.IPv4.IsValid() && !s.IPv6.IsValid() {
		return nil, errors.New("daemon answer without the pod's address")
	}
	if s.CIDRv4, err = parsePrefix("pod CIDR", b.PodCIDR.GetIPv4(), 4); err != nil {
		return nil, err
	}
	if s.CIDRv6, err = parsePrefix("pod CIDR", b.PodCIDR.GetIPv6(), 6); err != nil {
		return nil, err
	}
	gw := b.GatewayIP
	if gw.GetIPv4() == "" && gw.GetIPv6() == "" && nc.ENIInfo != nil {
		gw = nc.ENIInfo.GatewayIP
	}
	if s.Gatewayv4, err = parseAddr("gateway", gw.GetIPv4(), true); err != nil {
		return nil, err
	}
	if s.Gatewayv6, err = parseAddr("gateway", gw.GetIPv6(), false); err != nil {
		return nil, err
	}
	for _, svc := range []string{b.ServiceCIDR.GetIPv4(), b.ServiceCIDR.GetIPv6()} {
		ps, err := parsePrefixList("service CIDR", svc)
		if err != nil {
			return nil, err
		}
		s.ServiceCIDRs = append(s.ServiceCIDRs, ps...)
	}
	for _, r := range nc.ExtraRoutes {
		p, err := parsePrefix("extra route", r.GetDst(), 0)
		if err != nil {
			return nil, err
		}
		if p.IsValid() {
			s.ExtraRoutes = append(s.ExtraRoutes, p)
		}
	}
	if nc.Pod != nil {
		s.IngressBPS, s.EgressBPS = nc.Pod.Ingress, nc.Pod.Egress
	}
	if mac := nc.ENIInfo.GetMAC(); mac != "" {
		hw, err := net.ParseMAC(mac)
		if err != nil {
			return nil, fmt.Errorf("daemon answered ENI MAC %q: %w", mac, err)
		}
		s.ENIMAC = hw.String()
	}
	if s.Kind != datapath.VPCRoute && s.ENIMAC == "" {
		return nil, fmt.Errorf("daemon answer for a %s pod without the ENI's MAC", s.Kind)
	}
	if s.Kind == datapath.VLAN {
		s.VLANID = int(nc.ENIInfo.GetVid())
	}
	return s, nil
}

// hostVethName is the host-side veth of a pod interface (Terway's name).
func hostVethName(prefix string, pod PodID, ifName string) string {
	return datapath.VethName(prefix, pod.Namespace, pod.Name, ifName)
}

// pickNetConf selects the daemon's NetConf for ifName: the one named so,
// else the unnamed (default) one.
func pickNetConf(ncs []*rpc.NetConf, ifName string) (*rpc.NetConf, error) {
	var def *rpc.NetConf
	for _, nc := range ncs {
		switch nc.GetIfName() {
		case ifName:
			return nc, nil
		case "":
			if def == nil {
				def = nc
			}
		}
	}
	if def == nil {
		return nil, fmt.Errorf("daemon answer has no network for interface %s", ifName)
	}
	return def, nil
}

func parseAddr(what, s string, v4 bool) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Is4() != v4 || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("daemon answered %s %q: not an %s address", what, s, family(v4))
	}
	return a, nil
}

// parsePrefix reads a prefix of family fam (4, 6, or 0 for either).
func parsePrefix(what, s string, fam int) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("daemon answered %s %q: %w", what, s, err)
	}
	if (fam == 4 && !p.Addr().Is4()) || (fam == 6 && p.Addr().Is4()) {
		return netip.Prefix{}, fmt.Errorf("daemon answered %s %q: not an IPv%d prefix", what, s, fam)
	}
	return p.Masked(), nil
}

// parsePrefixList reads a comma-separated list of prefixes of any family.
func parsePrefixList(what, s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("daemon answered %s %q: %w", what, f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func family(v4 bool) string {
	if v4 {
		return "IPv4"
	}
	return "IPv6"
}
