package datapath

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/terway-sim/terway/internal/testnetns"
)

// TestConcurrentSetupSharedENI: many pods of one ENI set up at once (no
// lock in the test) all end up complete, the ENI's shared state exists
// once, and concurrent Teardowns leave none of the pods behind.
func TestConcurrentSetupSharedENI(t *testing.T) {
	const pods = 20
	n := newNode(t)
	specs := make([]*Spec, pods)
	nss := make([]*testnetns.NS, pods)
	for i := range specs {
		specs[i] = n.spec(PolicyRoute, i, podOpts{dual: i%2 == 0})
		nss[i] = newPod(t, specs[i])
	}
	run := func(what string, f func(*Spec) error) {
		t.Helper()
		errs := make([]error, pods)
		var wg sync.WaitGroup
		for i, s := range specs {
			wg.Go(func() { errs[i] = f(s) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s of pod %d: %v", what, i, err)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	run("Setup", func(s *Spec) error { _, err := Setup(s); return err })
	run("Check", Check)

	table := n.eniTable(t)
	d := dump(t, n.nl)
	count := func(prefix string) int {
		k := 0
		for _, l := range d {
			if strings.HasPrefix(l, prefix) {
				k++
			}
		}
		return k
	}
	for prefix, want := range map[string]int{
		"rule 512 ":  pods + pods/2,
		"rule 2048 ": pods + pods/2,
		fmt.Sprintf("route %d default via %s ", table, eniGW4): 1,
		fmt.Sprintf("route %d default via %s ", table, eniGW6): 1,
		fmt.Sprintf("addr %s %s/32", eniName, nodeIP4):         1,
		"link " + linkPrefix: 2 * pods,
	} {
		if got := count(prefix); got != want {
			t.Errorf("%d node lines start with %q, want %d", got, prefix, want)
		}
	}

	last := specs[pods-1]
	n.routePod(t, specs[0].IPv4, last.IPv4)
	udpEcho(t, n.fabric, netip.AddrPortFrom(eniGW4, 7))
	udpEcho(t, nss[pods-1], netip.AddrPortFrom(last.IPv4, 9))
	reach(t, nss[0], specs[0].IPv4, netip.AddrPortFrom(last.IPv4, 9))
	reach(t, nss[pods-1], last.IPv4, netip.AddrPortFrom(eniGW4, 7))

	run("Teardown", Teardown)
	d = dump(t, n.nl)
	requireNoLine(t, "node after Teardown", d, "rule 512 ", "rule 2048 ", "link "+linkPrefix, "dev "+linkPrefix)
}
