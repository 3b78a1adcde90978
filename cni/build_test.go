package cni

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/rpc"
)

func asCNI(err error, e **types.Error) bool { return errors.As(err, e) }

func testConfig(t *testing.T, extra string) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"terway","type":"terway"` + extra + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSelectKind(t *testing.T) {
	missing := func() error { return fmt.Errorf("probe: %w", datapath.ErrIPVlanUnsupported) }
	tests := []struct {
		ipType   rpc.IPType
		eni      *rpc.ENIInfo
		vt       VirtualType
		probe    func() error
		kind     datapath.Kind
		fallback string
	}{
		{rpc.IPType_TypeENIMultiIP, nil, VirtualVeth, nil, datapath.PolicyRoute, ""},
		{rpc.IPType_TypeENIMultiIP, nil, VirtualIPVlan, missing, datapath.PolicyRoute, "kernel lacks ipvlan"},
		{rpc.IPType_TypeENIMultiIP, nil, VirtualIPVlan, func() error { return nil }, datapath.IPVlan, ""},
		{rpc.IPType_TypeENIMultiIP, nil, VirtualIPVlan, func() error { return errors.New("netns gone") }, datapath.PolicyRoute, "netns gone"},
		{rpc.IPType_TypeENIMultiIP, nil, VirtualDatapathV2, nil, datapath.PolicyRoute, "datapathv2"},
		{rpc.IPType_TypeVPCENI, nil, VirtualIPVlan, nil, datapath.ExclusiveENI, ""},
		{rpc.IPType_TypeVPCENI, &rpc.ENIInfo{Trunk: true, Vid: 100}, VirtualVeth, nil, datapath.VLAN, ""},
		{rpc.IPType_TypeVPCENI, &rpc.ENIInfo{Trunk: true}, VirtualVeth, nil, datapath.ExclusiveENI, ""},
		{rpc.IPType_TypeVPCIP, nil, VirtualIPVlan, nil, datapath.VPCRoute, ""},
	}
	for _, tc := range tests {
		probed := false
		probe := func() error {
			probed = true
			if tc.probe == nil {
				t.Errorf("%v/%s: probe called", tc.ipType, tc.vt)
				return nil
			}
			return tc.probe()
		}
		kind, fb, err := SelectKind(tc.ipType, tc.eni, tc.vt, probe)
		if err != nil || kind != tc.kind {
			t.Errorf("%v/%s: %s %v, want %s", tc.ipType, tc.vt, kind, err, tc.kind)
		}
		switch {
		case tc.fallback == "" && fb != nil:
			t.Errorf("%v/%s: fallback %+v", tc.ipType, tc.vt, fb)
		case tc.fallback != "" && (fb == nil || !strings.Contains(fb.Message(), tc.fallback)):
			t.Errorf("%v/%s: fallback %+v, want one saying %q", tc.ipType, tc.vt, fb, tc.fallback)
		}
		if tc.probe != nil && !probed {
			t.Errorf("%v/%s: probe not called", tc.ipType, tc.vt)
		}
	}
	if _, _, err := SelectKind(rpc.IPType(7), nil, VirtualVeth, nil); err == nil {
		t.Error("unknown IPType accepted")
	}
}

func TestBuildSpec(t *testing.T) {
	c := testConfig(t, `,"host_stack_cidrs":["169.254.20.10/32"],"disable_host_peer":true,"mtu":9000`)
	nc := eniNetConf("192.168.1.10", "02:AB:CD:00:00:01")
	nc.BasicInfo.PodIP.IPv6 = "fd00:192:168:1::a"
	nc.BasicInfo.PodCIDR.IPv6 = "fd00:192:168:1::/64"
	nc.BasicInfo.GatewayIP.IPv6 = "fd00:192:168:1::fffd"
	nc.BasicInfo.ServiceCIDR.IPv6 = "fd00:96::/112"
	nc.ExtraRoutes = []*rpc.Route{{Dst: "100.100.100.200/32"}}
	nc.Pod = &rpc.Pod{Ingress: 1000, Egress: 2000}
	pod := PodID{Namespace: "default", Name: "web"}
	s, err := BuildSpec(SpecInput{Config: c, Kind: datapath.PolicyRoute, NetConf: nc, Pod: pod, HostNetNS: "/host", PodNetNS: "/pod", IfName: "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	want := datapath.Spec{
		Kind: datapath.PolicyRoute, HostNetNS: "/host", PodNetNS: "/pod", IfName: "eth0",
		HostVeth: datapath.VethName("cali", "default", "web", ""), MTU: 9000,
		IPv4: netip.MustParseAddr("192.168.1.10"), IPv6: netip.MustParseAddr("fd00:192:168:1::a"),
		CIDRv4: netip.MustParsePrefix("192.168.1.0/24"), CIDRv6: netip.MustParsePrefix("fd00:192:168:1::/64"),
		Gatewayv4: netip.MustParseAddr("192.168.1.253"), Gatewayv6: netip.MustParseAddr("fd00:192:168:1::fffd"),
		ENIMAC:          "02:ab:cd:00:00:01",
		ServiceCIDRs:    []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/112")},
		HostStackCIDRs:  []netip.Prefix{netip.MustParsePrefix("169.254.20.10/32")},
		DisableHostPeer: true,
		ExtraRoutes:     []netip.Prefix{netip.MustParsePrefix("100.100.100.200/32")},
		IngressBPS:      1000, EgressBPS: 2000,
	}
	if fmt.Sprintf("%+v", *s) != fmt.Sprintf("%+v", want) {
		t.Errorf("spec\n got %+v\nwant %+v", *s, want)
	}
	if !strings.HasPrefix(s.HostVeth, "cali") || len(s.HostVeth) != 15 {
		t.Errorf("host veth %q", s.HostVeth)
	}

	bad := []struct {
		name string
		kind datapath.Kind
		edit func(nc *rpc.NetConf)
	}{
		{"no address", datapath.VPCRoute, func(nc *rpc.NetConf) { nc.BasicInfo.PodIP = &rpc.IPSet{} }},
		{"address not IPv4", datapath.VPCRoute, func(nc *rpc.NetConf) { nc.BasicInfo.PodIP.IPv4 = "fd00::1" }},
		{"address with prefix", datapath.VPCRoute, func(nc *rpc.NetConf) { nc.BasicInfo.PodIP.IPv4 = "192.168.1.10/24" }},
		{"bad CIDR", datapath.VPCRoute, func(nc *rpc.NetConf) { nc.BasicInfo.PodCIDR.IPv4 = "192.168.1.0" }},
		{"bad service CIDR", datapath.VPCRoute, func(nc *rpc.NetConf) { nc.BasicInfo.ServiceCIDR.IPv4 = "x" }},
		{"bad MAC", datapath.PolicyRoute, func(nc *rpc.NetConf) { nc.ENIInfo.MAC = "zz" }},
		{"no MAC for PolicyRoute", datapath.PolicyRoute, func(nc *rpc.NetConf) { nc.ENIInfo = nil }},
		{"no MAC for ExclusiveENI", datapath.ExclusiveENI, func(nc *rpc.NetConf) { nc.ENIInfo.MAC = "" }},
		{"no BasicInfo", datapath.VPCRoute, func(nc *rpc.NetConf) { nc.BasicInfo = nil }},
	}
	for _, tc := range bad {
		nc := eniNetConf("192.168.1.10", "02:ab:cd:00:00:01")
		tc.edit(nc)
		if _, err := BuildSpec(SpecInput{Config: c, Kind: tc.kind, NetConf: nc, Pod: pod, IfName: "eth0"}); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}

	// VPC mode: no ENI; the gateway falls back to ENIInfo's when
	// BasicInfo has none.
	s, err = BuildSpec(SpecInput{Config: c, Kind: datapath.VPCRoute, NetConf: vpcNetConf("172.20.1.5"), Pod: pod, IfName: "eth1"})
	if err != nil || s.ENIMAC != "" || s.Gatewayv4 != netip.MustParseAddr("169.254.1.1") || s.HostVeth != datapath.VethName("cali", "default", "web", "eth1") {
		t.Errorf("VPC spec %+v %v", s, err)
	}
	nc = eniNetConf("192.168.1.10", "02:ab:cd:00:00:01")
	nc.BasicInfo.GatewayIP = nil
	s, err = BuildSpec(SpecInput{Config: c, Kind: datapath.PolicyRoute, NetConf: nc, Pod: pod, IfName: "eth0"})
	if err != nil || s.Gatewayv4 != netip.MustParseAddr("192.168.1.253") {
		t.Errorf("gateway from ENIInfo: %+v %v", s, err)
	}
}

func TestPickNetConf(t *testing.T) {
	def, eth1 := &rpc.NetConf{}, &rpc.NetConf{IfName: "eth1"}
	ncs := []*rpc.NetConf{eth1, def}
	if nc, err := pickNetConf(ncs, "eth1"); err != nil || nc != eth1 {
		t.Errorf("eth1: %v %v", nc, err)
	}
	if nc, err := pickNetConf(ncs, "eth0"); err != nil || nc != def {
		t.Errorf("eth0: %v %v", nc, err)
	}
	if _, err := pickNetConf([]*rpc.NetConf{eth1}, "eth0"); err == nil {
		t.Error("no NetConf for eth0 accepted")
	}
	if !slices.Equal(SupportedVersions, []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}) {
		t.Errorf("SupportedVersions %v", SupportedVersions)
	}
}

// TestFallbackTwin: a DEL without its state file, for a pod whose config
// asks for IPVlan, tears down both what IPVlan and what its PolicyRoute
// fallback build; with the state file, or another config, only the one.
func TestFallbackTwin(t *testing.T) {
	for _, tc := range []struct {
		vt     VirtualType
		kind   datapath.Kind
		source string
		want   datapath.Kind
	}{
		{VirtualIPVlan, datapath.IPVlan, "daemon record", datapath.PolicyRoute},
		{VirtualIPVlan, datapath.PolicyRoute, "prevResult", datapath.IPVlan},
		{VirtualIPVlan, datapath.IPVlan, "state file", ""},
		{VirtualVeth, datapath.PolicyRoute, "daemon record", ""},
		{VirtualIPVlan, datapath.ExclusiveENI, "daemon record", ""},
	} {
		inv := &invocation{conf: &Config{VirtualType: tc.vt}}
		twin := inv.fallbackTwin(datapath.Spec{Kind: tc.kind}, tc.source)
		var got datapath.Kind
		if twin != nil {
			got = twin.Kind
		}
		if got != tc.want {
			t.Errorf("%s pod from %s with %s: twin %q, want %q", tc.kind, tc.source, tc.vt, got, tc.want)
		}
	}
}
