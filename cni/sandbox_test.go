package cni

import (
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/rpc"
)

// TestLateDelOfOldSandbox: the pod's new sandbox (same name, so the same
// host veth name, and the same sticky address) is up when the DEL of its
// old sandbox arrives, or a GC that lists only the new one runs. The new
// sandbox must survive both.
func TestLateDelOfOldSandbox(t *testing.T) {
	t.Parallel()
	for _, viaGC := range []bool{false, true} {
		name := "late DEL"
		if viaGC {
			name = "GC listing only the new sandbox"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			multiIP(e, "192.168.1.60")
			conf := e.conf("1.1.0", "")
			old := e.newPod("web-0")
			_, oldOut := e.add(old, conf)
			fresh := &pod{ns: testnetns.ForTest(t), name: old.name, cid: old.cid + "-new", ifName: "eth0"}
			_, freshOut := e.add(fresh, conf)
			if viaGC {
				if _, err := e.run("GC", e.gcArgs([]types.GCAttachment{{ContainerID: fresh.cid, IfName: "eth0"}})); err != nil {
					t.Fatalf("GC: %v", err)
				}
			} else {
				e.del(old, withPrev(conf, oldOut), old.ns.Path())
			}
			if _, err := e.run("CHECK", fresh.args(withPrev(conf, freshOut))); err != nil {
				t.Fatalf("the new sandbox after the old one's teardown: %v", err)
			}
		})
	}
}

// TestDelWithoutNetnsReturnsExclusiveENI: a DEL without CNI_NETNS while
// the pod's namespace still exists brings the exclusive ENI back to the
// node instead of stranding it there.
func TestDelWithoutNetnsReturnsExclusiveENI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.daemon.fixedAlloc(rpc.IPType_TypeVPCENI, func(*rpc.AllocIPRequest) *rpc.NetConf { return eniNetConf("192.168.1.70", e.node.eniMAC) })
	conf := e.conf("1.0.0", "")
	p := e.newPod("exclusive")
	_, out := e.add(p, conf)
	if linkExists(t, e.node.nl, e.node.eniName) {
		t.Fatalf("ENI %s still in the node after ADD", e.node.eniName)
	}
	e.del(p, withPrev(conf, out), "")
	l, err := e.node.nl.LinkByName(e.node.eniName)
	if err != nil {
		t.Fatalf("ENI not back in the node after a DEL without netns: %v", err)
	}
	if l.Attrs().HardwareAddr.String() != e.node.eniMAC {
		t.Fatalf("%s has MAC %s, want the ENI's %s", e.node.eniName, l.Attrs().HardwareAddr, e.node.eniMAC)
	}
}
