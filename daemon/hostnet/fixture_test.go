package hostnet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
)

// linkPrefix starts every link name the tests create, so TestMain can prove
// none of them ever appeared in the root namespace.
const linkPrefix = "hnt"

// eniTable is the per-ENI route table of the fixture (1000 + ENI index).
const eniTable = 1001

// TestMain compares the root namespace's rules, routes and links before and
// after the tests: they must run entirely inside namespaces they created.
func TestMain(m *testing.M) {
	os.Exit(testnetns.GuardRoot("hostnet", m.Run, linkPrefix))
}

// openHost opens the Host under test and closes it at test end.
func openHost(t *testing.T, nsPath string) *Host {
	t.Helper()
	h, err := Open(nsPath)
	if err != nil {
		t.Fatalf("Open(%s): %v", nsPath, err)
	}
	t.Cleanup(h.Close)
	return h
}

// family is one address family's fixture addresses. The pod addresses are
// chosen so one is a textual prefix of the other (.10 / .100), to catch
// matching by string.
type family struct {
	name   string
	nl     int
	bits   int
	pods   [2]netip.Addr
	subnet netip.Prefix
	// other is a pod address with nothing on the host.
	other netip.Addr
}

var (
	ipv4 = family{
		name: "ipv4", nl: netlink.FAMILY_V4, bits: 32,
		pods:   [2]netip.Addr{netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("192.168.1.100")},
		subnet: netip.MustParsePrefix("192.168.1.0/24"),
		other:  netip.MustParseAddr("192.168.1.99"),
	}
	ipv6 = family{
		name: "ipv6", nl: netlink.FAMILY_V6, bits: 128,
		pods:   [2]netip.Addr{netip.MustParseAddr("fd00:192:168::a"), netip.MustParseAddr("fd00:192:168::a0")},
		subnet: netip.MustParsePrefix("fd00:192:168::/64"),
		other:  netip.MustParseAddr("fd00:192:168::99"),
	}
)

// world is a node namespace with two pods wired the PolicyRoute way: per
// pod a host veth with `podIP/32 dev hostVeth scope link` in main and in
// the ENI table, rules `512: to podIP lookup main` and `2048: from podIP iif
// hostVeth lookup 1001`. Pod 0 also has `2048: from podIP lookup 1001`
// (main's iif-less variant) and `1000: to podIP lookup 1001` (any priority
// must go). Decoys that must survive every release: the vSwitch subnet rule
// and route, and the ENI table's default route.
type world struct {
	fam    family
	nsPath string
	nl     *nlsafe.Handle
	eni    netlink.Link
	veths  [2]netlink.Link
}

// newWorld builds the fixture in a fresh namespace; it skips IPv6 when the
// namespace has IPv6 disabled.
func newWorld(t *testing.T, fam family) *world {
	t.Helper()
	n := testnetns.ForTest(t)
	w := &world{fam: fam, nsPath: n.Path(), nl: testnetns.Handle(t, n.Path())}
	tag := randomTag(t)
	w.eni = w.addVeth(t, tag+"e")
	for i := range w.veths {
		w.veths[i] = w.addVeth(t, fmt.Sprintf("%sp%d", tag, i))
	}
	if fam.nl == netlink.FAMILY_V6 {
		skipWithoutIPv6(t, n, w.eni.Attrs().Name)
	}
	w.addDecoys(t)
	for i := range w.veths {
		w.addPod(t, i)
	}
	w.addRule(t, &netlink.Rule{Priority: datapath.FromPodPriority, Src: w.host(0), Table: eniTable})
	w.addRule(t, &netlink.Rule{Priority: 1000, Dst: w.host(0), Table: eniTable})
	return w
}

// randomTag makes link names unique across parallel tests and packages.
func randomTag(t *testing.T) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return linkPrefix + hex.EncodeToString(b)
}

// addVeth creates a veth pair with both ends in the test namespace, up, and
// returns the end named name.
func (w *world) addVeth(t *testing.T, name string) netlink.Link {
	t.Helper()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "x"}
	if err := w.nl.LinkAdd(veth); err != nil {
		t.Fatalf("add veth %s: %v", name, err)
	}
	for _, n := range []string{name, name + "x"} {
		l, err := w.nl.LinkByName(n)
		if err != nil {
			t.Fatalf("link %s: %v", n, err)
		}
		if err := w.nl.LinkSetUp(l); err != nil {
			t.Fatalf("set %s up: %v", n, err)
		}
	}
	l, err := w.nl.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return l
}

// skipWithoutIPv6 skips when the kernel or the namespace has IPv6 off.
func skipWithoutIPv6(t *testing.T, n ns.NetNS, link string) {
	t.Helper()
	var val []byte
	err := n.Do(func(ns.NetNS) error {
		var err error
		val, err = os.ReadFile("/proc/sys/net/ipv6/conf/" + link + "/disable_ipv6")
		return err
	})
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("kernel without IPv6: %v", err)
	}
	if err != nil {
		t.Fatalf("read disable_ipv6 in test netns: %v", err)
	}
	if strings.TrimSpace(string(val)) != "0" {
		t.Skipf("IPv6 disabled in the test netns (net.ipv6.conf.%s.disable_ipv6=%s)", link, strings.TrimSpace(string(val)))
	}
}

// host is pod i's single-address prefix.
func (w *world) host(i int) *net.IPNet {
	return nlsafe.IPNet(netip.PrefixFrom(w.fam.pods[i], w.fam.bits))
}

// addPod wires pod i.
func (w *world) addPod(t *testing.T, i int) {
	t.Helper()
	veth := w.veths[i]
	w.addRoute(t, &netlink.Route{Dst: w.host(i), LinkIndex: veth.Attrs().Index, Scope: netlink.SCOPE_LINK})
	w.addRoute(t, &netlink.Route{Dst: w.host(i), LinkIndex: w.eni.Attrs().Index, Scope: netlink.SCOPE_LINK, Table: eniTable})
	w.addRule(t, &netlink.Rule{Priority: datapath.ToPodPriority, Dst: w.host(i), Table: unix.RT_TABLE_MAIN})
	w.addRule(t, &netlink.Rule{Priority: datapath.FromPodPriority, Src: w.host(i), IifName: veth.Attrs().Name, Table: eniTable})
}

// addDecoys adds state that shares the pods' subnet or table but belongs to
// no single pod.
func (w *world) addDecoys(t *testing.T) {
	t.Helper()
	eni := w.eni.Attrs().Index
	w.addRoute(t, &netlink.Route{Dst: nlsafe.IPNet(w.fam.subnet), LinkIndex: eni, Scope: netlink.SCOPE_LINK, Table: eniTable})
	w.addRoute(t, &netlink.Route{Dst: nlsafe.IPNet(netip.PrefixFrom(w.fam.pods[0], 0).Masked()), LinkIndex: eni, Scope: netlink.SCOPE_LINK, Table: eniTable})
	w.addRule(t, &netlink.Rule{Priority: datapath.FromPodPriority, Src: nlsafe.IPNet(w.fam.subnet), Table: eniTable})
}

func (w *world) addRoute(t *testing.T, r *netlink.Route) {
	t.Helper()
	if err := w.nl.RouteAdd(r); err != nil {
		t.Fatalf("add route %s table %d: %v", r.Dst, r.Table, err)
	}
}

func (w *world) addRule(t *testing.T, r *netlink.Rule) {
	t.Helper()
	full := netlink.NewRule()
	full.Family = w.fam.nl
	full.Priority, full.Src, full.Dst, full.IifName, full.Table = r.Priority, r.Src, r.Dst, r.IifName, r.Table
	if err := w.nl.RuleAdd(full); err != nil {
		t.Fatalf("add %s: %v", full, err)
	}
}

// state is the namespace's rules and non-kernel routes of the fixture's
// family as comparable strings. Kernel routes (link-local, local table) are
// left out: IPv6 adds them asynchronously after a link comes up.
func (w *world) state(t *testing.T) map[string]bool {
	t.Helper()
	rules, err := w.nl.RuleList(w.fam.nl)
	if err != nil {
		t.Fatalf("list rules: %v", err)
	}
	routes, err := w.nl.RouteListFiltered(w.fam.nl, &netlink.Route{}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatalf("list routes: %v", err)
	}
	s := map[string]bool{}
	for _, r := range rules {
		s[fmt.Sprintf("rule %d from %s to %s iif %q table %d", r.Priority, r.Src, r.Dst, r.IifName, r.Table)] = true
	}
	for _, r := range routes {
		if r.Protocol != unix.RTPROT_KERNEL && r.Table != unix.RT_TABLE_LOCAL {
			s[fmt.Sprintf("route %s dev %d table %d", r.Dst, r.LinkIndex, r.Table)] = true
		}
	}
	return s
}

// involving returns the entries of s that name pod i's exact prefix.
func (w *world) involving(s map[string]bool, i int) map[string]bool {
	host := " " + w.host(i).String() + " "
	out := map[string]bool{}
	for k := range s {
		if strings.Contains(k+" ", host) {
			out[k] = true
		}
	}
	return out
}

// sortedKeys prints a set deterministically for failure messages.
func sortedKeys(s map[string]bool) []string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// forFamilies runs test in parallel for IPv4 and IPv6, each with a world
// and a Host open on it.
func forFamilies(t *testing.T, test func(t *testing.T, fam family, w *world, h *Host)) {
	for _, fam := range testFamilies {
		t.Run(fam.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, fam)
			test(t, fam, w, openHost(t, w.nsPath))
		})
	}
}
