package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
)

// eniOf finds the ENI fakecloud holds addr on.
func (e *env) eniOf(addr netip.Addr) (eni fakecloud.ENIView, primary bool) {
	for _, v := range e.cloud.ENIs() {
		if v.PrimaryIP == addr {
			return v, true
		}
		if slices.Contains(v.IPv4, addr) {
			return v, false
		}
	}
	return fakecloud.ENIView{}, false
}

type datapathCase struct {
	name  string
	mode  mode.Mode
	vtype string
}

var datapathCases = []datapathCase{
	{"PolicyRoute", mode.ENIMultiIP, "Veth"},
	{"IPVlan", mode.ENIMultiIP, "IPVlan"},
	{"IPVlanFallsBackToPolicyRoute", mode.ENIMultiIP, "IPVlan"},
	{"ExclusiveENI", mode.ENIOnly, ""},
	{"VPCRoute", mode.VPC, ""},
}

// ipvlan reports whether a case's pods get the IPVlan datapath: it asks
// for it and the kernel has ipvlan. Each IPVlan case runs only on the
// kernel it is about, saying why otherwise: make test-kernel runs the
// IPVlan one in a VM whose kernel has ipvlan.
func (c datapathCase) ipvlan(t *testing.T) bool {
	t.Helper()
	if c.vtype != "IPVlan" {
		return false
	}
	has := kernelHasIPVlan(t)
	switch {
	case c.name == "IPVlan" && !has:
		t.Skip("this kernel lacks ipvlan: make test-kernel runs the IPVlan case in a VM whose kernel has it")
	case c.name != "IPVlan" && has:
		t.Skip("this kernel has ipvlan: there is no fallback to PolicyRoute to test")
	}
	return has
}

// kernelHasIPVlan probes in a namespace of the test's own.
func kernelHasIPVlan(t *testing.T) bool {
	t.Helper()
	n := testnetns.ForTest(t)
	err := datapath.ProbeIPVlan(n.Path())
	if err != nil && !errors.Is(err, datapath.ErrIPVlanUnsupported) {
		t.Fatalf("probe ipvlan: %v", err)
	}
	return err == nil
}

// twoNodes starts node-1 and node-2 (different vSwitches, so traffic
// between them is routed by the fabric) for a datapath case.
func twoNodes(t *testing.T, c datapathCase) (*env, *node, *node) {
	c.ipvlan(t)
	e := newEnv(t)
	o1 := nodeOpts{mode: c.mode, vtype: c.vtype}
	o2 := o1
	if c.mode == mode.VPC {
		o1.podCIDR, o2.podCIDR = "172.20.1.0/24", "172.20.2.0/24"
		e.route(o1.podCIDR, instanceID(1))
		e.route(o2.podCIDR, instanceID(2))
	}
	return e, e.node(1, o1), e.node(2, o2)
}

// TestDatapathsAcrossSpecVersions runs every datapath under every spec
// version the way a runtime does, and checks the kernel, the traffic, CHECK,
// DEL (twice, the second without netns) and that nothing is left.
func TestDatapathsAcrossSpecVersions(t *testing.T) {
	for _, c := range datapathCases {
		t.Run(c.name, func(t *testing.T) {
			e, n1, n2 := twoNodes(t, c)
			before1, before2 := n1.hostState(), n2.hostState()
			for _, v := range specVersions {
				tag := strings.ReplaceAll(v, ".", "")
				a, b, r := n1.newPod("a"+tag, nil), n1.newPod("b"+tag, nil), n2.newPod("r"+tag, nil)
				for _, p := range []*pod{a, b, r} {
					p.mustAdd(v)
				}
				for _, p := range []*pod{a, b, r} {
					verifyKernel(t, c, p, v)
				}
				for _, link := range [][2]*pod{{a, b}, {b, a}, {a, r}, {r, a}} {
					to := link[1].serve()
					if err := link[0].dial(to, netip.Addr{}); err != nil {
						t.Fatalf("%s: %s -> %s (%s): %v\n%s", v, link[0].name, link[1].name, to, err, e.dump(n1, n2))
					}
				}
				gw := netip.MustParseAddr("192.168.0.253")
				if err := a.reaches(gw); err != nil {
					t.Fatalf("%s: pod %s -> vSwitch gateway %s: %v", v, a.name, gw, err)
				}
				if v != "0.3.1" { // CHECK came with 0.4.0
					for _, p := range []*pod{a, b, r} {
						if err := p.check(v); err != nil {
							t.Fatalf("%s: CHECK %s right after ADD: %v\n%s", v, p.name, err, p.n.pluginLog())
						}
					}
				}
				cni, list := n1.cni(v)
				info, err := cni.GetVersionInfo(ctxT(t), "terway")
				if err != nil || !slices.Contains(info.SupportedVersions(), v) {
					t.Fatalf("%s: VERSION = %v, %v", v, info, err)
				}
				if v == "1.1.0" {
					if err := cni.GetStatusNetworkList(ctxT(t), list); err != nil {
						t.Fatalf("STATUS: %v", err)
					}
					// GC listing both pods of node-1 as valid removes nothing.
					valid := []types.GCAttachment{{ContainerID: a.cid, IfName: "eth0"}, {ContainerID: b.cid, IfName: "eth0"}}
					if err := cni.GCNetworkList(ctxT(t), list, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
						t.Fatalf("GC: %v", err)
					}
					for _, p := range []*pod{a, b} {
						if err := p.check(v); err != nil {
							t.Fatalf("CHECK %s after a GC that lists it: %v", p.name, err)
						}
					}
				}
				if v == "1.1.0" && c.mode != mode.VPC {
					// One-way UDP, so that no missing return path can
					// pass for the fabric's anti-spoofing: the pod's own
					// address arrives, an address nobody was assigned not.
					spoofed := netip.MustParseAddr("192.168.0.250")
					if err := a.addToPod(spoofed); err != nil {
						t.Fatal(err)
					}
					sink := r.sink()
					// A round sends from the unassigned address, then from
					// the pod's own. Rounds until one of its own arrives
					// (the path works); then the own datagram of one more
					// round arriving means its spoofed one, sent before on
					// the same path, had every chance to.
					round := func() {
						for _, src := range []netip.Addr{spoofed, a.ip} {
							if err := a.sendUDP(sink.addr, src); err != nil {
								t.Fatalf("send from %s: %v", src, err)
							}
						}
					}
					testwait.Until(t, settleWithin, "datagrams from the pod's own address", func() bool {
						round()
						return sink.count(a.ip) > 0
					})
					own := sink.count(a.ip)
					round()
					testwait.Until(t, settleWithin, "the last round's datagram from the pod's own address", func() bool {
						return sink.count(a.ip) > own
					})
					if n := sink.count(spoofed); n > 0 {
						t.Fatalf("the fabric forwarded %d datagrams from unassigned source %s", n, spoofed)
					}
				}
				for _, p := range []*pod{a, b, r} {
					p.mustDel(v)
					if err := p.del(v, false); err != nil {
						t.Fatalf("%s: second DEL of %s without netns: %v", v, p.name, err)
					}
				}
				for _, n := range []*node{n1, n2} {
					assertClean(t, n, a.ip, b.ip, r.ip)
				}
			}
			for _, x := range []struct {
				n      *node
				before hostState
			}{{n1, before1}, {n2, before2}} {
				after := x.n.hostState()
				if !slices.Equal(after.rules, x.before.rules) {
					t.Errorf("%s rules before %v, after %v", x.n.name, x.before.rules, after.rules)
				}
			}
			if c.vtype == "IPVlan" && !c.ipvlan(t) {
				assertEvent(t, n1, "a110", "VirtualModeChanged")
			}
			_ = e
		})
	}
}

// verifyKernel checks the essentials of each datapath in the real kernel;
// the datapath package's own tests check every object in detail.
func verifyKernel(t *testing.T, c datapathCase, p *pod, v string) {
	t.Helper()
	mac, addrs, err := p.podLink()
	if err != nil {
		t.Fatalf("%s: pod %s eth0: %v", v, p.name, err)
	}
	want := p.ip.String() + "/32"
	if c.ipvlan(t) {
		want = p.ip.String() + "/24" // the default world's vSwitches
	}
	if !slices.Contains(addrs, want) {
		t.Fatalf("%s: pod %s eth0 addresses %v, want %s", v, p.name, addrs, want)
	}
	hs := p.n.hostState()
	eni, primary := p.n.e.eniOf(p.ip)
	eniMAC := strings.ToLower(eni.MAC)
	switch {
	case c.ipvlan(t):
		// An ipvlan slave of the ENI holding the address (its MAC), and
		// the node's route to the pod through the ENI's node-side slave.
		if eniMAC == "" || eni.DeviceIndex == 0 || eni.InstanceID != p.n.id || mac != eniMAC {
			t.Fatalf("%s: pod %s eth0 MAC %s, want that of the secondary ENI holding %s: %+v", v, p.name, mac, p.ip, eni)
		}
		if !hs.has(p.ip.String() + "/32 dev ipvl_") {
			t.Fatalf("%s: node %s has no route to %s through an ipvl_ link: %v", v, p.n.name, p.ip, hs.routes)
		}
	case c.mode == mode.ENIMultiIP:
		// Like Terway, ENIMultiIP hands out every address of a secondary
		// ENI, its primary one included, but never the node's own ENI.
		if eniMAC == "" || eni.DeviceIndex == 0 || eni.InstanceID != p.n.id {
			t.Fatalf("%s: %s is not an address of a secondary ENI of %s: %+v", v, p.ip, p.n.id, eni)
		}
		for _, want := range []string{"512 to " + p.ip.String() + "/32", "2048 from " + p.ip.String() + "/32", p.ip.String() + "/32 dev cali"} {
			if !hs.has(want) {
				t.Fatalf("%s: node %s lacks %q for pod %s\nrules %v\nroutes %v", v, p.n.name, want, p.name, hs.rules, hs.routes)
			}
		}
		if _, ok := hs.macs[eniMAC]; !ok {
			t.Fatalf("%s: ENI %s not in node %s", v, eniMAC, p.n.name)
		}
	case c.mode == mode.ENIOnly:
		if eniMAC == "" || !primary || mac != eniMAC {
			t.Fatalf("%s: pod %s eth0 MAC %s, want the ENI holding %s as primary (%s)", v, p.name, mac, p.ip, eniMAC)
		}
		if name, ok := hs.macs[eniMAC]; ok {
			t.Fatalf("%s: the ENI of pod %s is still in the node as %s", v, p.name, name)
		}
		if !hs.has(p.ip.String() + "/32 dev cali") {
			t.Fatalf("%s: no host-peer route to %s: %v", v, p.ip, hs.routes)
		}
	case c.mode == mode.VPC:
		if !netip.MustParsePrefix(p.n.podCIDR).Contains(p.ip) {
			t.Fatalf("%s: VPC pod %s got %s outside %s", v, p.name, p.ip, p.n.podCIDR)
		}
		if !hs.has(p.ip.String() + "/32 dev cali") {
			t.Fatalf("%s: no host route to %s: %v", v, p.ip, hs.routes)
		}
	}
}

// assertClean checks that nothing of the given pods is left on the node
// and that the daemon holds nothing for any pod.
func assertClean(t *testing.T, n *node, ips ...netip.Addr) {
	t.Helper()
	assertHostClean(t, n, ips...)
	maps, err := n.d.Mapping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.PodName != "" {
			t.Fatalf("daemon on %s still maps pod %s to %s", n.name, m.PodName, m.ResourceName)
		}
	}
}

// assertHostClean checks the node's namespace and the plugin's state.
func assertHostClean(t *testing.T, n *node, ips ...netip.Addr) {
	t.Helper()
	hs := n.hostState()
	if left := append(hs.podRelated(ips...), hs.veths()...); len(left) > 0 {
		t.Fatalf("node %s keeps pod state after DEL: %v", n.name, left)
	}
	// The host veths a DEL retired are deleted by its reaper, after the
	// DEL answered.
	testwait.For(t, settleWithin, "retired host veths reaped on "+n.name, func() error {
		if r := n.hostState().retired(); len(r) > 0 {
			return fmt.Errorf("still there: %v", r)
		}
		return nil
	})
	if files := n.stateFiles(); len(files) > 0 {
		t.Fatalf("node %s keeps plugin state files after DEL: %v", n.name, files)
	}
	if n.mode == mode.ENIOnly {
		// Every exclusive ENI is back in the node, under its ethN name.
		for _, v := range n.e.cloud.ENIs() {
			if v.InstanceID != n.id || v.Status != "InUse" {
				continue
			}
			name, ok := hs.macs[strings.ToLower(v.MAC)]
			if !ok || name != fmt.Sprintf("eth%d", v.DeviceIndex) {
				t.Fatalf("ENI %s (%s, device %d) in node %s as %q (present %v)", v.ID, v.MAC, v.DeviceIndex, n.name, name, ok)
			}
		}
	}
}

// assertEvent waits for a pod event with the reason.
func assertEvent(t *testing.T, n *node, podName, reason string) {
	t.Helper()
	testwait.For(t, settleWithin, "event "+reason+" on "+podName, func() error {
		evs, err := n.kube.CoreV1().Events("e2e").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Name == podName {
				if ev.Reason == reason {
					return nil
				}
				seen = append(seen, ev.Reason+": "+ev.Message)
			}
		}
		return fmt.Errorf("events of %s: %v", podName, seen)
	})
}

var _ corev1.Pod
