package datapath

import (
	"net/netip"
	"strings"
	"testing"
)

// TestSpecValidation: specs that cannot be built fail before anything is
// touched (no namespace is even opened: the paths do not exist).
func TestSpecValidation(t *testing.T) {
	good := func() *Spec {
		return &Spec{
			Kind: PolicyRoute, HostNetNS: "/nonexistent/host", PodNetNS: "/nonexistent/pod",
			IfName: "eth0", HostVeth: "dpt0123456789a", IPv4: netip.MustParseAddr("192.168.1.10"),
			Gatewayv4: eniGW4, ENIMAC: "02:00:00:00:00:01",
		}
	}
	for _, tc := range []struct {
		name string
		mut  func(*Spec)
		want string
	}{
		{"kind", func(s *Spec) { s.Kind = "Macvlan" }, "unknown kind"},
		{"VLAN without ID", func(s *Spec) { s.Kind = VLAN }, "VLAN ID 0 out of range"},
		{"VLAN ID", func(s *Spec) { s.Kind, s.VLANID = VLAN, 4095 }, "VLAN ID 4095 out of range"},
		{"IPVlan outside vSwitch", func(s *Spec) { s.Kind, s.CIDRv4 = IPVlan, netip.MustParsePrefix("10.0.0.0/24") }, "outside its vSwitch"},
		{"IPVlan without MAC", func(s *Spec) { s.Kind, s.ENIMAC = IPVlan, "" }, "ENI MAC"},
		{"no address", func(s *Spec) { s.IPv4 = netip.Addr{} }, "neither IPv4 nor IPv6"},
		{"v6 as v4", func(s *Spec) { s.IPv4 = netip.MustParseAddr("fd00::1") }, "not an IPv4 address"},
		{"no gateway", func(s *Spec) { s.Gatewayv4 = netip.Addr{} }, "gateway"},
		{"v6 without gateway", func(s *Spec) { s.IPv6 = netip.MustParseAddr("fd00::1") }, "gateway of fd00::1"},
		{"bad MAC", func(s *Spec) { s.ENIMAC = "zz" }, "ENI MAC"},
		{"no host veth", func(s *Spec) { s.HostVeth = "" }, "needs hostVeth"},
		{"long name", func(s *Spec) { s.HostVeth = "dpt0123456789abcdef" }, "not a valid link name"},
		{"no ifName", func(s *Spec) { s.IfName = "" }, "empty ifName"},
		{"MTU", func(s *Spec) { s.MTU = 70000 }, "MTU"},
	} {
		s := good()
		tc.mut(s)
		_, err := Setup(s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Setup = %v, want an error containing %q", tc.name, err, tc.want)
		}
		if err := Check(s); err == nil {
			t.Errorf("%s: Check accepted the spec", tc.name)
		}
	}
	if _, err := Setup(good()); err == nil || !strings.Contains(err.Error(), "/nonexistent/host") {
		t.Errorf("Setup with a missing host netns = %v, want an error naming it", err)
	}
	if err := Teardown(&Spec{Kind: "nope", IfName: "eth0"}); err == nil {
		t.Error("Teardown accepted an unknown kind")
	}
}

// TestCheckWithoutPodNS: Check needs the pod's namespace.
func TestCheckWithoutPodNS(t *testing.T) {
	n := newNode(t)
	s := n.spec(VPCRoute, 0, podOpts{})
	s.PodNetNS = t.TempDir() + "/gone"
	if err := Check(s); err == nil || !strings.Contains(err.Error(), "pod network namespace") {
		t.Errorf("Check without pod netns = %v, want an error about it", err)
	}
}
