package e2e

import (
	"net/netip"
	"slices"
	"testing"
)

// TestDualStack: with ip_stack dual the daemon returns an IPv6 address
// too; the plugin puts both on the pod and IPv6 works across the fabric.
func TestDualStack(t *testing.T) {
	e := newEnv(t)
	o := nodeOpts{conf: map[string]any{"ip_stack": "dual"}}
	n1, n2 := e.node(1, o), e.node(3, o) // ecs.g6.2xlarge (node-2) has 1 IPv6 per ENI
	a, b, r := n1.newPod("a6", nil), n1.newPod("b6", nil), n2.newPod("r6", nil)
	for _, p := range []*pod{a, b, r} {
		p.mustAdd("1.0.0")
		if !p.ip6.IsValid() || !netip.MustParsePrefix("fd00:192:168::/56").Contains(p.ip6) {
			t.Fatalf("pod %s got IPv6 %v in %+v", p.name, p.ip6, p.result)
		}
		_, addrs, err := p.podLink()
		if err != nil || !slices.Contains(addrs, p.ip6.String()+"/128") || !slices.Contains(addrs, p.ip.String()+"/32") {
			t.Fatalf("pod %s eth0 addresses %v (%v), want %s/32 and %s/128", p.name, addrs, err, p.ip, p.ip6)
		}
		if err := p.check("1.0.0"); err != nil {
			t.Fatalf("CHECK %s: %v", p.name, err)
		}
	}
	for _, link := range [][2]*pod{{a, b}, {a, r}, {r, a}} {
		to := link[1].serveOn(link[1].ip6)
		if err := link[0].dial(to, netip.Addr{}); err != nil {
			t.Fatalf("IPv6 %s -> %s (%s): %v\n%s", link[0].name, link[1].name, to, err, e.dump(n1, n2))
		}
	}
	for _, p := range []*pod{a, b, r} {
		p.mustDel("1.0.0")
	}
	assertClean(t, n1, a.ip, b.ip, a.ip6, b.ip6)
	assertClean(t, n2, r.ip, r.ip6)
}
