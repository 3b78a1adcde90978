package cni

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"cniVersion":"0.3.1","name":"terway","type":"terway"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.VirtualType != VirtualVeth || c.MTU != 1500 || c.VethPrefix != "cali" || c.SocketPath != "/var/run/eni/eni.socket" ||
		c.StateDir != "/var/lib/cni/terway" || c.LogFile != "" || c.Debug || c.DisableHostPeer {
		t.Errorf("defaults: %+v", c)
	}
}

// TestParseConfigTerway: a Terway-rendered config is accepted unchanged;
// keys not implemented are listed for the log.
func TestParseConfigTerway(t *testing.T) {
	raw := `{"cniVersion":"1.0.0","name":"terway","type":"terway","capabilities":{"bandwidth":true},
		"eniip_virtual_type":"IPVLAN","host_stack_cidrs":["169.254.20.10/32","10.1.2.3/16"],"disable_host_peer":true,
		"mtu":9000,"veth_prefix":"tw","debug":true,"ip_stack":"ipv4","vlan_strip_type":"filter","bandwidth_mode":"tc",
		"enable_network_priority":false,"symmetric_routing_config":{"interface":"eth0"},"network_policy_provider":"ebpf",
		"cilium_args":"","auto_mtu":false,"runtimeConfig":{"bandwidth":{"ingressRate":1}},"args":{"cni":{"x":1}},
		"dns":{"nameservers":["10.96.0.10"]},"ipam":{},"cni.dev/valid-attachments":[],"cni.dev/attachments":[]}`
	c, err := ParseConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	wantStack := []netip.Prefix{netip.MustParsePrefix("169.254.20.10/32"), netip.MustParsePrefix("10.1.0.0/16")}
	if c.VirtualType != VirtualIPVlan || !slices.Equal(c.HostStack, wantStack) || !c.DisableHostPeer || c.MTU != 9000 ||
		c.VethPrefix != "tw" || !c.Debug || !slices.Equal(c.Net.DNS.Nameservers, []string{"10.96.0.10"}) {
		t.Errorf("parsed %+v", c)
	}
	wantIgnored := []string{"auto_mtu", "bandwidth_mode", "cilium_args", "enable_network_priority", "ip_stack",
		"network_policy_provider", "symmetric_routing_config", "vlan_strip_type"}
	if !slices.Equal(c.Ignored, wantIgnored) {
		t.Errorf("ignored %v, want %v", c.Ignored, wantIgnored)
	}
	for in, want := range map[string]VirtualType{"veth": VirtualVeth, "Veth": VirtualVeth, "IPVlan": VirtualIPVlan, "DataPathV2": VirtualDatapathV2} {
		c, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"n","type":"terway","eniip_virtual_type":"` + in + `"}`))
		if err != nil || c.VirtualType != want {
			t.Errorf("eniip_virtual_type %q: %v %v, want %v", in, c, err, want)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	base := `"cniVersion":"1.0.0","name":"terway","type":"terway"`
	tests := []struct {
		raw    string
		code   uint
		msgHas []string
	}{
		{`{` + base, types.ErrDecodingFailure, nil},
		{`null`, types.ErrDecodingFailure, nil},
		{`{` + base + `,"foo":[1,2]}`, types.ErrUnsupportedField, []string{`"foo"`, "[1,2]"}},
		{`{` + base + `,"Mtu":1500}`, types.ErrUnsupportedField, []string{`"Mtu"`, "1500"}},
		{`{"cniVersion":"0.3.0","name":"n","type":"terway"}`, types.ErrIncompatibleCNIVersion, nil},
		{`{"name":"n","type":"terway"}`, types.ErrIncompatibleCNIVersion, nil},
		{`{"cniVersion":"1.0.0","type":"terway"}`, types.ErrInvalidNetworkConfig, []string{"name"}},
		{`{` + base + `,"mtu":100}`, types.ErrInvalidNetworkConfig, []string{"mtu 100"}},
		{`{` + base + `,"mtu":-1}`, types.ErrInvalidNetworkConfig, []string{"mtu"}},
		{`{` + base + `,"mtu":"1500"}`, types.ErrInvalidNetworkConfig, nil},
		{`{` + base + `,"host_stack_cidrs":["10.0.0.1"]}`, types.ErrInvalidNetworkConfig, []string{"10.0.0.1"}},
		{`{` + base + `,"host_stack_cidrs":"10.0.0.0/8"}`, types.ErrInvalidNetworkConfig, nil},
		{`{` + base + `,"eniip_virtual_type":"vlan"}`, types.ErrInvalidNetworkConfig, []string{"vlan"}},
		{`{` + base + `,"veth_prefix":"toolong"}`, types.ErrInvalidNetworkConfig, []string{"toolong"}},
		{`{` + base + `,"veth_prefix":"a/b"}`, types.ErrInvalidNetworkConfig, nil},
		{`{` + base + `,"state_dir":"relative"}`, types.ErrInvalidNetworkConfig, []string{"state_dir"}},
		{`{` + base + `,"log_file":"x.log"}`, types.ErrInvalidNetworkConfig, []string{"log_file"}},
		{`{` + base + `,"disable_host_peer":"yes"}`, types.ErrInvalidNetworkConfig, nil},
		{`{` + base + `,"prevResult":{"cniVersion":"1.0.0","ips":[{"address":"bogus"}]}}`, types.ErrInvalidNetworkConfig, []string{"prevResult"}},
	}
	for _, tc := range tests {
		_, err := ParseConfig([]byte(tc.raw))
		var e *types.Error
		if !asCNI(err, &e) || e.Code != tc.code {
			t.Errorf("%s: error %v, want code %d", tc.raw, err, tc.code)
			continue
		}
		for _, s := range tc.msgHas {
			if !strings.Contains(e.Msg, s) {
				t.Errorf("%s: message %q lacks %q", tc.raw, e.Msg, s)
			}
		}
	}
}

// TestParseConfigPrevResult: prevResult of every version parses.
func TestParseConfigPrevResult(t *testing.T) {
	for _, v := range SupportedVersions {
		raw := `{"cniVersion":"` + v + `","name":"n","type":"terway","prevResult":{"cniVersion":"` + v +
			`","ips":[{"version":"4","address":"192.168.1.5/32"}]}}`
		c, err := ParseConfig([]byte(raw))
		if err != nil || c.Net.PrevResult == nil {
			t.Errorf("%s: %v, prevResult %v", v, err, c)
		}
	}
}

func TestParsePodID(t *testing.T) {
	p, err := parsePodID("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u;FOO=bar", "cid")
	if err != nil || p != (PodID{Namespace: "ns", Name: "web", InfraContainerID: "abc"}) {
		t.Errorf("got %+v %v", p, err)
	}
	p, err = parsePodID("K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web", "cid")
	if err != nil || p.InfraContainerID != "cid" {
		t.Errorf("infra container ID fallback: %+v %v", p, err)
	}
	if p, err := parsePodID("", "cid"); err != nil || p.Known() || p.InfraContainerID != "cid" {
		t.Errorf("empty CNI_ARGS: %+v %v", p, err)
	}
	var e *types.Error
	if _, err := parsePodID("K8S_POD_NAME=web;FOO=bar", "cid"); !asCNI(err, &e) || e.Code != types.ErrInvalidEnvironmentVariables {
		t.Errorf("unknown key without IgnoreUnknown: %v", err)
	}
	if _, err := parsePodID("K8S_POD_NAME", "cid"); !asCNI(err, &e) || e.Code != types.ErrInvalidEnvironmentVariables {
		t.Errorf("malformed CNI_ARGS: %v", err)
	}
}
