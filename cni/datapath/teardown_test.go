package datapath

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terway-sim/terway/internal/testnetns"
)

// TestTeardownWithoutSetup: nothing to remove is not an error, with the
// pod namespace present, empty or vanished, and nothing is touched.
func TestTeardownWithoutSetup(t *testing.T) {
	n := newNode(t)
	for _, kind := range []Kind{PolicyRoute, VPCRoute, ExclusiveENI, IPVlan, VLAN} {
		s := n.spec(kind, 0, podOpts{dual: true})
		pod := newPod(t, s)
		ph := testnetns.Handle(t, pod.Path())
		nodeBefore, podBefore := dump(t, n.nl), dump(t, ph)
		for _, podNS := range []string{pod.Path(), "", filepath.Join(t.TempDir(), "vanished")} {
			s.PodNetNS = podNS
			if err := Teardown(s); err != nil {
				t.Errorf("%s: Teardown without Setup (pod netns %q): %v", kind, podNS, err)
			}
		}
		requireSame(t, string(kind)+": node", nodeBefore, dump(t, n.nl))
		requireSame(t, string(kind)+": pod", podBefore, dump(t, ph))
	}
}

// TestTeardownPodNSGone: the pod namespace is deleted before DEL (the
// runtime lost it); Teardown cleans the node side: veth (if the kernel
// has not destroyed it yet), host routes and rules.
func TestTeardownPodNSGone(t *testing.T) {
	for _, kind := range []Kind{PolicyRoute, VPCRoute} {
		t.Run(string(kind), func(t *testing.T) {
			n := newNode(t)
			nodeBefore := dump(t, n.nl)
			s := setUpThenLosePod(t, n, kind, podOpts{dual: true, ingressBPS: 1_000_000})
			teardownTwice(t, s)
			after := dump(t, n.nl)
			requireNoLine(t, "node after Teardown", after, s.HostVeth, " "+s.IPv4.String()+"/", ipFrag(s.IPv6))
			gone, added := diff(nodeBefore, after)
			for _, l := range append(gone, added...) {
				if !strings.Contains(l+" ", " "+eniName+" ") {
					t.Errorf("node after Teardown differs in %q, which is not ENI state", l)
				}
			}
		})
	}
}

// TestTeardownLateDEL: pod A's namespace vanished without DEL, pod B got
// the same address; A's DEL arriving late must not remove B's rules.
func TestTeardownLateDEL(t *testing.T) {
	n := newNode(t)
	a := n.spec(PolicyRoute, 0, podOpts{dual: true})
	podA := newPod(t, a)
	setup(t, a)
	if err := podA.Remove(); err != nil {
		t.Fatalf("delete pod netns: %v", err)
	}
	b := n.spec(PolicyRoute, 1, podOpts{dual: true})
	b.IPv4, b.IPv6 = a.IPv4, a.IPv6
	newPod(t, b)
	setup(t, b)
	if err := Teardown(a); err != nil {
		t.Fatalf("late Teardown of pod A: %v", err)
	}
	if err := Check(b); err != nil {
		t.Fatalf("pod B broken by pod A's late Teardown: %v", err)
	}
	if err := Teardown(b); err != nil {
		t.Fatalf("Teardown of pod B: %v", err)
	}
	requireNoLine(t, "node", dump(t, n.nl), "rule 512 ", "rule 2048 ")
}

// TestTeardownRemovesIiflessRules: Terway main writes rule 2048 without
// iif; Teardown of our pod removes that variant too.
func TestTeardownRemovesIiflessRules(t *testing.T) {
	n := newNode(t)
	s := n.spec(PolicyRoute, 0, podOpts{})
	newPod(t, s)
	setup(t, s)
	table := n.eniTable(t)
	r := newRule(nil, FromPodPriority, netip.PrefixFrom(s.IPv4, 32), netip.Prefix{}, "", table).want
	if err := n.nl.RuleAdd(&r); err != nil {
		t.Fatalf("fixture rule: %v", err)
	}
	requireLines(t, "node", dump(t, n.nl), fmt.Sprintf("rule 2048 from %s/32 to all iif  lookup %d", s.IPv4, table))
	if err := Teardown(s); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	requireNoLine(t, "node", dump(t, n.nl), "rule 512 ", "rule 2048 ")
}
