package hostnet

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/internal/testnetns"
)

var testFamilies = []family{ipv4, ipv6}

func TestOpenNonexistentPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-netns")
	h, err := Open(path)
	if err == nil {
		h.Close()
		t.Fatalf("Open(%s) succeeded", path)
	}
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open(%s) = %v, want a not-exist error naming the path", path, err)
	}
}

func TestOpenNotANamespace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := Open(path)
	if err == nil {
		h.Close()
		t.Fatalf("Open(%s) succeeded on a regular file", path)
	}
	if !strings.Contains(err.Error(), "not a namespace file") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open(%s) = %v, want a 'not a namespace file' error naming the path", path, err)
	}
}

func TestRelease(t *testing.T) {
	forFamilies(t, func(t *testing.T, fam family, w *world, h *Host) {
		before := w.state(t)
		gone := w.involving(before, 0)
		if len(gone) != 6 || len(w.involving(before, 1)) != 4 {
			t.Fatalf("fixture: pod 0 has %v, pod 1 has %v", sortedKeys(gone), sortedKeys(w.involving(before, 1)))
		}

		rm, err := h.Release(fam.pods[0])
		if err != nil || rm != (Removed{Rules: 4, Routes: 2}) {
			t.Fatalf("Release(%s) = %v, %v; want 4 rules, 2 routes, nil", fam.pods[0], rm, err)
		}
		want := difference(before, gone)
		assertState(t, w, want)
		assertDefaultRules(t, w.state(t))

		for _, ip := range []netip.Addr{fam.pods[0], fam.other} {
			rm, err = h.Release(ip)
			if err != nil || rm != (Removed{}) {
				t.Fatalf("Release(%s) with nothing left = %v, %v; want zero, nil", ip, rm, err)
			}
		}
		assertState(t, w, want)
	})
}

func TestPodAddresses(t *testing.T) {
	forFamilies(t, func(t *testing.T, fam family, w *world, h *Host) {
		want := map[netip.Addr]Entry{fam.pods[0]: w.entry(0), fam.pods[1]: w.entry(1)}
		assertPodAddresses(t, h, want)

		if _, err := h.Release(fam.pods[0]); err != nil {
			t.Fatalf("Release(%s): %v", fam.pods[0], err)
		}
		delete(want, fam.pods[0])
		assertPodAddresses(t, h, want)
	})
}

func TestEmptyNamespace(t *testing.T) {
	t.Parallel()
	n := testnetns.ForTest(t)
	h := openHost(t, n.Path())
	got, err := h.PodAddresses()
	if err != nil || len(got) != 0 {
		t.Fatalf("PodAddresses on an empty netns = %v, %v; want empty, nil", got, err)
	}
	for _, ip := range []netip.Addr{ipv4.pods[0], ipv6.pods[0], netip.MustParseAddr("::ffff:192.168.1.10")} {
		if rm, err := h.Release(ip); err != nil || rm != (Removed{}) {
			t.Fatalf("Release(%s) on an empty netns = %v, %v; want zero, nil", ip, rm, err)
		}
	}
	if _, err := h.Release(netip.Addr{}); err == nil {
		t.Fatal("Release(zero Addr) succeeded, want an error")
	}
	w := &world{fam: ipv4, nl: testnetns.Handle(t, n.Path())}
	assertDefaultRules(t, w.state(t))
}

func TestClosedHost(t *testing.T) {
	t.Parallel()
	n := testnetns.ForTest(t)
	h, err := Open(n.Path())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	h.Close()
	h.Close()
	if _, err := h.Release(ipv4.pods[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("Release after Close = %v, want ErrClosed", err)
	}
	if _, err := h.PodAddresses(); !errors.Is(err, ErrClosed) {
		t.Fatalf("PodAddresses after Close = %v, want ErrClosed", err)
	}
}

// TestConcurrentUse runs releases and listings at once (for -race) and
// checks every entry is removed exactly once.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ipv4)
	h := openHost(t, w.nsPath)
	before := w.state(t)
	var mu sync.Mutex
	var total Removed
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			if i%3 == 2 {
				if _, err := h.PodAddresses(); err != nil {
					t.Errorf("PodAddresses: %v", err)
				}
				return
			}
			rm, err := h.Release(ipv4.pods[i%2])
			if err != nil {
				t.Errorf("Release: %v", err)
			}
			mu.Lock()
			total.Rules += rm.Rules
			total.Routes += rm.Routes
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != (Removed{Rules: 6, Routes: 4}) {
		t.Fatalf("concurrent releases removed %v, want 6 rules, 4 routes", total)
	}
	assertState(t, w, difference(difference(before, w.involving(before, 0)), w.involving(before, 1)))
}

// TestDeleteAlreadyGone covers the race with a CNI DEL that removes an entry
// between GC's listing and its delete: that is success, not an error.
func TestDeleteAlreadyGone(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ipv4)
	rule := netlink.NewRule()
	rule.Family, rule.Priority, rule.Dst, rule.Table = netlink.FAMILY_V4, datapath.ToPodPriority, w.host(0), unix.RT_TABLE_MAIN
	route := &netlink.Route{Dst: w.host(0), LinkIndex: w.veths[0].Attrs().Index, Table: unix.RT_TABLE_MAIN, Scope: netlink.SCOPE_LINK}
	for _, want := range []bool{true, false} {
		if deleted, err := deleteRule(w.nl, rule); deleted != want || err != nil {
			t.Fatalf("deleteRule = %v, %v; want %v, nil", deleted, err, want)
		}
		if deleted, err := deleteRoute(w.nl, route); deleted != want || err != nil {
			t.Fatalf("deleteRoute = %v, %v; want %v, nil", deleted, err, want)
		}
	}
}

// entry is what PodAddresses must report for pod i of the fixture.
func (w *world) entry(i int) Entry {
	veth, eni := w.veths[i].Attrs(), w.eni.Attrs()
	e := Entry{
		Routes: []RouteInfo{
			{Table: unix.RT_TABLE_MAIN, LinkIndex: veth.Index, LinkName: veth.Name},
			{Table: eniTable, LinkIndex: eni.Index, LinkName: eni.Name},
		},
		Rules: []RuleInfo{
			{Priority: datapath.ToPodPriority, Table: unix.RT_TABLE_MAIN, Direction: DirTo},
			{Priority: datapath.FromPodPriority, Table: eniTable, Direction: DirFrom, IifName: veth.Name},
		},
	}
	if i == 0 {
		e.Rules = append(e.Rules, RuleInfo{Priority: datapath.FromPodPriority, Table: eniTable, Direction: DirFrom})
	}
	return normalize(e)
}

// normalize orders an entry's slices so entries compare independently of
// dump order.
func normalize(e Entry) Entry {
	sort.Slice(e.Routes, func(a, b int) bool { return e.Routes[a].Table < e.Routes[b].Table })
	sort.Slice(e.Rules, func(a, b int) bool {
		ra, rb := e.Rules[a], e.Rules[b]
		if ra.Priority != rb.Priority {
			return ra.Priority < rb.Priority
		}
		return ra.IifName < rb.IifName
	})
	return e
}

func assertPodAddresses(t *testing.T, h *Host, want map[netip.Addr]Entry) {
	t.Helper()
	got, err := h.PodAddresses()
	if err != nil {
		t.Fatalf("PodAddresses: %v", err)
	}
	for ip, e := range got {
		got[ip] = normalize(e)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PodAddresses:\n got %+v\nwant %+v", got, want)
	}
}

func assertState(t *testing.T, w *world, want map[string]bool) {
	t.Helper()
	got := w.state(t)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("namespace state:\n got %q\nwant %q", sortedKeys(got), sortedKeys(want))
	}
}

// assertDefaultRules checks the kernel's local and main rules are present.
func assertDefaultRules(t *testing.T, s map[string]bool) {
	t.Helper()
	for _, prio := range []string{"rule 0 ", "rule 32766 "} {
		found := false
		for k := range s {
			found = found || strings.HasPrefix(k, prio)
		}
		if !found {
			t.Fatalf("default rule %q missing: %q", prio, sortedKeys(s))
		}
	}
}

func difference(a, b map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		if !b[k] {
			out[k] = true
		}
	}
	return out
}
