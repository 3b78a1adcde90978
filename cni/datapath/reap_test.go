package datapath

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
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

// TestLateTeardownSparesNewSandbox: sandbox B of a pod (same veth name,
// same sticky address) is set up before the DEL (or GC) of its old
// sandbox A arrives. Tearing A down, deferred or not, must leave B whole.
func TestLateTeardownSparesNewSandbox(t *testing.T) {
	for _, deferred := range []bool{false, true} {
		for _, kind := range []Kind{PolicyRoute, VPCRoute} {
			t.Run(fmt.Sprintf("%s/deferred=%v", kind, deferred), func(t *testing.T) {
				n := newNode(t)
				a := n.spec(kind, 0, podOpts{dual: true})
				newPod(t, a)
				setup(t, a)
				b := *a
				newPod(t, &b)
				setup(t, &b)
				if b.HostVethIndex == 0 || b.HostVethIndex == a.HostVethIndex {
					t.Fatalf("Setup recorded host veth index %d for B, %d for A", b.HostVethIndex, a.HostVethIndex)
				}
				teardown := Teardown
				if deferred {
					teardown = TeardownDeferred
				}
				if err := teardown(a); err != nil {
					t.Fatalf("late teardown of A: %v", err)
				}
				if err := Check(&b); err != nil {
					t.Fatalf("B after the late teardown of A: %v", err)
				}
				if _, err := Reap(b.HostNetNS); err != nil {
					t.Fatal(err)
				}
				if err := Check(&b); err != nil {
					t.Fatalf("B after a reap: %v", err)
				}
			})
		}
	}
}

// TestAddAgainAfterDeferredTeardown: an ADD into the same namespace
// right after a DEL (a retried sandbox setup) works before the reaper
// has run, and the reaper then leaves the new pair alone.
func TestAddAgainAfterDeferredTeardown(t *testing.T) {
	for _, kind := range []Kind{PolicyRoute, VPCRoute, ExclusiveENI} {
		t.Run(string(kind), func(t *testing.T) {
			n := newNode(t)
			s := n.spec(kind, 0, podOpts{dual: true})
			newPod(t, s)
			setup(t, s)
			if err := TeardownDeferred(s); err != nil {
				t.Fatal(err)
			}
			setup(t, s)
			if err := Check(s); err != nil {
				t.Fatalf("after DEL and ADD again: %v", err)
			}
			if got, err := Reap(s.HostNetNS); err != nil || got != 1 {
				t.Fatalf("Reap = %d, %v; want the one retired veth", got, err)
			}
			if err := Check(s); err != nil {
				t.Fatalf("after the reap: %v", err)
			}
		})
	}
}

// TestReapSparesUnmarkedLinks: a link that merely carries the prefix (an
// operator's, or another tool's) is not Reap's to delete.
func TestReapSparesUnmarkedLinks(t *testing.T) {
	n := newNode(t)
	name := ReapPrefix + "other"
	if err := n.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Fatal(err)
	}
	if got, err := Reap(n.ns.Path()); err != nil || got != 0 {
		t.Fatalf("Reap = %d, %v; want nothing deleted", got, err)
	}
	if _, err := n.nl.LinkByName(name); err != nil {
		t.Fatalf("an unmarked %s* link was deleted: %v", ReapPrefix, err)
	}
}
