package fabric

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// Independent views of the fabric's kernel state for assertions.

func ethName(i int) string { return fmt.Sprintf("eth%d", i) }

func statNS(path string) (os.FileInfo, error) { return os.Stat(path) }

// linkNames lists a namespace's links, sorted.
func linkNames(t *testing.T, h *nlsafe.Handle) []string {
	t.Helper()
	links, err := h.LinkList()
	if err != nil {
		t.Fatalf("list links: %v", err)
	}
	var out []string
	for _, l := range links {
		out = append(out, l.Attrs().Name)
	}
	sort.Strings(out)
	return out
}

// permanentNeighbours maps every permanent IPv4/IPv6 neighbour of the
// namespace to its MAC.
func permanentNeighbours(t *testing.T, h *nlsafe.Handle) map[netip.Addr]string {
	t.Helper()
	out := map[netip.Addr]string{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		ns, err := h.NeighList(0, fam)
		if err != nil {
			t.Fatalf("list neighbours: %v", err)
		}
		for _, n := range ns {
			if n.State&netlink.NUD_PERMANENT == 0 {
				continue
			}
			a, _ := netip.AddrFromSlice(n.IP)
			out[a.Unmap()] = n.HardwareAddr.String()
		}
	}
	return out
}

// fdbHas reports a static bridge FDB entry for mac.
func fdbHas(t *testing.T, h *nlsafe.Handle, mac string) bool {
	t.Helper()
	ns, err := h.NeighList(0, unix.AF_BRIDGE)
	if err != nil {
		t.Fatalf("list fdb: %v", err)
	}
	for _, n := range ns {
		if strings.EqualFold(n.HardwareAddr.String(), mac) && n.State&netlink.NUD_NOARP != 0 {
			return true
		}
	}
	return false
}

// portName is the fabric link of a plugged ENI.
func portName(t *testing.T, f *Fabric, eniID string) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.ports[eniID]
	if p == nil {
		t.Fatalf("ENI %s has no port", eniID)
	}
	return p.name
}

// nftConn is an nftables connection inside the fabric namespace.
func nftConn(t *testing.T, f *Fabric) *nftables.Conn {
	t.Helper()
	h, err := netns.GetFromPath(f.NetNSPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var labTable = &nftables.Table{Family: nftables.TableFamilyBridge, Name: nftTable}

func nftSets(t *testing.T, f *Fabric) []*nftables.Set {
	t.Helper()
	sets, err := nftConn(t, f).GetSets(labTable)
	if err != nil {
		t.Fatalf("list nft sets: %v", err)
	}
	return sets
}

func nftElements(t *testing.T, f *Fabric, set string) []nftables.SetElement {
	t.Helper()
	c := nftConn(t, f)
	s, err := c.GetSetByName(labTable, set)
	if err != nil {
		t.Fatalf("nft set %s: %v", set, err)
	}
	els, err := c.GetSetElements(s)
	if err != nil {
		t.Fatalf("elements of %s: %v", set, err)
	}
	return els
}

// setHas looks a up in interval-set elements as the kernel does: the
// greatest element not above a must be a start.
func setHas(els []nftables.SetElement, a netip.Addr) bool {
	key := a.AsSlice()
	var best *nftables.SetElement
	for i := range els {
		e := &els[i]
		if len(e.Key) != len(key) || bytes.Compare(e.Key, key) > 0 {
			continue
		}
		if best == nil || bytes.Compare(e.Key, best.Key) > 0 {
			best = e
		}
	}
	return best != nil && !best.IntervalEnd
}

// spoofDrops is how many packets the anti-spoofing rules of a port have
// dropped (both families).
func spoofDrops(t *testing.T, f *Fabric, port string) uint64 {
	t.Helper()
	rules, err := nftConn(t, f).GetRules(labTable, &nftables.Chain{Name: "antispoof", Table: labTable})
	if err != nil {
		t.Fatalf("list anti-spoofing rules: %v", err)
	}
	var n uint64
	for _, r := range rules {
		mine := false
		for _, e := range r.Exprs {
			switch e := e.(type) {
			case *expr.Cmp:
				if bytes.Equal(e.Data, ifname(port)) {
					mine = true
				}
			case *expr.Counter:
				if mine {
					n += e.Packets
				}
			}
		}
	}
	return n
}
