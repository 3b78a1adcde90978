package cni

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/rpc"
)

// needLinkKind skips, saying why, on a kernel that cannot create links of
// kind (ipvlan, vlan), asking iproute2 in a namespace of the test's own:
// make test-kernel runs these tests in a VM whose kernel can.
func needLinkKind(t *testing.T, kind string) {
	t.Helper()
	if ok, why := kernelHas(t, kind); !ok {
		t.Skipf("this kernel lacks %s (%s): make test-kernel runs this test in a VM whose kernel has it", kind, why)
	}
}

// kernelHas reports whether this kernel can create links of kind, and
// iproute2's answer when it cannot.
func kernelHas(t *testing.T, kind string) (bool, string) {
	t.Helper()
	n := testnetns.ForTest(t)
	ip := func(args ...string) ([]byte, error) {
		return exec.Command("nsenter", append([]string{"--net=" + n.Path(), "ip"}, args...)...).CombinedOutput()
	}
	if out, err := ip("link", "add", "twcp0", "type", "veth", "peer", "name", "twcp1"); err != nil {
		t.Fatalf("oracle: add veth: %v: %s", err, out)
	}
	args := []string{"link", "add", "link", "twcp0", "name", "twcp2", "type", kind}
	if kind == "vlan" {
		args = append(args, "id", "7")
	}
	out, err := ip(args...)
	if err == nil {
		return true, ""
	}
	if msg := strings.ToLower(string(out)); strings.Contains(msg, "unknown device type") || strings.Contains(msg, "not supported") {
		return false, strings.TrimSpace(string(out))
	}
	t.Fatalf("oracle: ip link add type %s: %v: %s", kind, err, out)
	return false, ""
}

// TestIPVlanPod: with eniip_virtual_type IPVlan on a kernel that has
// ipvlan (the plugin's own probe), an ENIMultiIP pod gets the IPVlan
// datapath and no fallback event; CHECK passes; DEL leaves the node as it
// was but for the ENI's shared state (its node-side slave and qdisc).
func TestIPVlanPod(t *testing.T) {
	t.Parallel()
	needLinkKind(t, "ipvlan")
	e := newEnv(t)
	e.probe = datapath.ProbeIPVlan
	multiIP(e, "192.168.1.41")
	before := e.node.state(t)
	p := e.newPod("ipvlan-pod")
	conf := e.conf("1.1.0", `,"eniip_virtual_type":"IPVlan"`)
	_, out := e.add(p, conf)
	e.wantState(p, datapath.IPVlan)
	link := podLink(t, p)
	if link.Type() != "ipvlan" || link.Attrs().HardwareAddr.String() != e.node.eniMAC {
		t.Errorf("pod eth0 is a %s with MAC %s, want an ipvlan with the ENI's %s", link.Type(), link.Attrs().HardwareAddr, e.node.eniMAC)
	}
	if _, _, events, _ := e.daemon.snapshot(); len(events) != 0 {
		t.Errorf("events %v, want none: there is no fallback", events)
	}
	if _, err := e.run("CHECK", p.args(withPrev(conf, out))); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	e.del(p, conf, p.ns.Path())
	for _, l := range diff(e.node.state(t), before) {
		if !strings.Contains(l, "ipvl_") && !strings.Contains(l, e.node.eniName) {
			t.Errorf("node kept after DEL: %s", l)
		}
	}
	if m := mentions(e.node.state(t), "192.168.1.41"); len(m) > 0 {
		t.Errorf("node still refers to the pod address: %v", m)
	}
}

// TestTrunkMemberPod: a VPCENI answer naming a trunk member (Trunk, Vid)
// gets the VLAN datapath on the trunk the MAC names, with the member's
// VLAN ID recorded in the state file; CHECK passes; DEL leaves the node as
// it was.
func TestTrunkMemberPod(t *testing.T) {
	t.Parallel()
	needLinkKind(t, "vlan")
	e := newEnv(t)
	e.daemon.fixedAlloc(rpc.IPType_TypeVPCENI, func(*rpc.AllocIPRequest) *rpc.NetConf {
		nc := eniNetConf("192.168.5.10", e.node.eniMAC)
		nc.BasicInfo.PodCIDR.IPv4 = "192.168.5.0/24"
		nc.BasicInfo.GatewayIP.IPv4 = "192.168.5.253"
		nc.ENIInfo.Trunk, nc.ENIInfo.Vid = true, 100
		return nc
	})
	before := e.node.state(t)
	p := e.newPod("member")
	conf := e.conf("1.1.0", "")
	_, out := e.add(p, conf)
	att := e.wantState(p, datapath.VLAN)
	if att.Spec.VLANID != 100 {
		t.Errorf("state VLAN ID %d, want 100", att.Spec.VLANID)
	}
	link := podLink(t, p)
	if v, ok := link.(*netlink.Vlan); !ok || v.VlanId != 100 {
		t.Errorf("pod eth0 is a %s, want VLAN 100 of the trunk", link.Type())
	}
	if _, err := e.run("CHECK", p.args(withPrev(conf, out))); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	e.del(p, conf, p.ns.Path())
	if kept := diff(e.node.state(t), before); len(kept) > 0 {
		t.Errorf("node kept after DEL:\n%s", strings.Join(kept, "\n"))
	}
}

// podLink is the pod's eth0.
func podLink(t *testing.T, p *pod) netlink.Link {
	t.Helper()
	h := testnetns.Handle(t, p.ns.Path())
	l, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatalf("pod eth0: %v", err)
	}
	return l
}

// TestTrunkMemberPodWithoutVLAN: on a kernel without 802.1Q a trunk
// member's ADD fails with an error saying so and a VLANUnsupported pod
// event, rolls back (the address is released, nothing is left on the
// node), and never falls back to another datapath.
func TestTrunkMemberPodWithoutVLAN(t *testing.T) {
	t.Parallel()
	if ok, _ := kernelHas(t, "vlan"); ok {
		t.Skip("this kernel has 802.1Q VLAN links: TestTrunkMemberPod covers it (make test-kernel)")
	}
	e := newEnv(t)
	e.daemon.fixedAlloc(rpc.IPType_TypeVPCENI, func(*rpc.AllocIPRequest) *rpc.NetConf {
		nc := eniNetConf("192.168.5.10", e.node.eniMAC)
		nc.ENIInfo.Trunk, nc.ENIInfo.Vid = true, 100
		return nc
	})
	before := e.node.state(t)
	p := e.newPod("member")
	_, err := e.run("ADD", p.args(e.conf("1.1.0", "")))
	if err == nil || !strings.Contains(err.Error(), "802.1Q") {
		t.Fatalf("ADD of a member pod on a kernel without 802.1Q: %v, want an error naming 802.1Q", err)
	}
	_, releases, events, _ := e.daemon.snapshot()
	if len(releases) != 1 || !strings.HasPrefix(releases[0].Reason, "roll back ip for error: ") {
		t.Errorf("releases %v, want one rollback", releases)
	}
	if len(events) != 1 || events[0].Reason != "VLANUnsupported" || events[0].EventType != rpc.EventType_EventTypeWarning {
		t.Errorf("events %v, want one VLANUnsupported warning", events)
	}
	if kept := diff(e.node.state(t), before); len(kept) > 0 {
		t.Errorf("node kept after the failed ADD:\n%s", strings.Join(kept, "\n"))
	}
}
