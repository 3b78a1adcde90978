package cni

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/terway-sim/terway/rpc"
)

// skipWithoutIPv6 skips when the test namespace has IPv6 off.
func skipWithoutIPv6(t *testing.T, n ns.NetNS) {
	t.Helper()
	var val []byte
	err := n.Do(func(ns.NetNS) error {
		var err error
		val, err = os.ReadFile("/proc/sys/net/ipv6/conf/all/disable_ipv6")
		return err
	})
	if err != nil {
		t.Skipf("kernel without IPv6: %v", err)
	}
	if strings.TrimSpace(string(val)) != "0" {
		t.Skipf("IPv6 disabled in the test netns (disable_ipv6=%s)", strings.TrimSpace(string(val)))
	}
}

// TestDualStack: a dual-stack answer gives the pod both addresses, the
// result lists both, and DEL removes both from the node.
func TestDualStack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	skipWithoutIPv6(t, e.node.ns)
	e.daemon.fixedAlloc(rpc.IPType_TypeENIMultiIP, func(*rpc.AllocIPRequest) *rpc.NetConf {
		nc := eniNetConf("192.168.1.15", e.node.eniMAC)
		nc.BasicInfo.PodIP.IPv6 = "fd00:192:168:1::15"
		nc.BasicInfo.PodCIDR.IPv6 = "fd00:192:168:1::/64"
		nc.BasicInfo.GatewayIP.IPv6 = "fd00:192:168:1::fffd"
		nc.ENIInfo.GatewayIP = nc.BasicInfo.GatewayIP
		return nc
	})
	p := e.newPod("dual")
	conf := e.conf("1.0.0", "")
	before := e.node.state(t)
	res, out := e.add(p, conf)
	ips := resultIPs(t, res)
	if !slices.Contains(ips, "192.168.1.15") || !slices.Contains(ips, "fd00:192:168:1::15") {
		t.Errorf("result IPs %v", ips)
	}
	if _, err := e.run("CHECK", p.args(withPrev(conf, out))); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	e.del(p, withPrev(conf, out), p.ns.Path())
	after := e.node.state(t)
	for _, a := range []string{"192.168.1.15", "fd00:192:168:1::15"} {
		if m := mentions(after, a); len(m) > 0 {
			t.Errorf("node still refers to %s:\n%s", a, strings.Join(m, "\n"))
		}
	}
	if gone := diff(before, after); len(gone) > 0 {
		t.Errorf("node lost:\n%s", strings.Join(gone, "\n"))
	}
}
