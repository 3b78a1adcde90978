package datapath

import (
	"strings"
	"testing"
)

// TestTeardownDeferredThenReap: a deferred teardown leaves only a down,
// retired host veth (no rules, no routes, and its old name free for a new
// pod); Reap deletes it and the node is as before Setup, bar ENI state.
func TestTeardownDeferredThenReap(t *testing.T) {
	for _, kind := range []Kind{PolicyRoute, VPCRoute, ExclusiveENI} {
		t.Run(string(kind), func(t *testing.T) {
			n := newNode(t)
			nodeBefore := dump(t, n.nl)
			s := n.spec(kind, 0, podOpts{dual: true, ingressBPS: 1_000_000})
			newPod(t, s)
			setup(t, s)
			if err := TeardownDeferred(s); err != nil {
				t.Fatalf("TeardownDeferred: %v", err)
			}
			mid := dump(t, n.nl)
			requireNoLine(t, "node after TeardownDeferred", mid, s.HostVeth, " "+s.IPv4.String()+"/", ipFrag(s.IPv6))
			var retired []string
			for _, l := range mid {
				if strings.HasPrefix(l, "link "+ReapPrefix) && strings.Contains(l, " veth ") {
					retired = append(retired, l)
				}
			}
			if len(retired) != 1 || !strings.Contains(retired[0], " veth down ") {
				t.Fatalf("want one retired host veth, down, after TeardownDeferred: %v", retired)
			}
			if got, err := Reap(s.HostNetNS); err != nil || got != 1 {
				t.Fatalf("Reap = %d, %v; want 1 retired veth deleted", got, err)
			}
			if got, err := Reap(s.HostNetNS); err != nil || got != 0 {
				t.Fatalf("second Reap = %d, %v; want nothing left", got, err)
			}
			gone, added := diff(nodeBefore, dump(t, n.nl))
			for _, l := range append(gone, added...) {
				if !strings.Contains(l+" ", " "+eniName+" ") {
					t.Errorf("node after deferred teardown and reap differs in %q, which is not ENI state", l)
				}
			}
		})
	}
}
