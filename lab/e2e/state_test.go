package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/cni/datapath"
	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
)

// hostState is what a node's namespace holds for pods: policy rules 512
// and 2048, main-table routes to single addresses, and veths.
type hostState struct {
	rules  []string // "512 to 192.168.0.5/32"
	routes []string // "192.168.0.5/32 dev cali..."
	links  []string // every link name
	macs   map[string]string
}

func (n *node) hostState() hostState {
	t := n.e.t
	t.Helper()
	h := testnetns.Handle(t, n.ln.NetNSPath())
	var s hostState
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := h.RuleList(fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			switch {
			case r.Priority != 512 && r.Priority != 2048:
			case r.Dst != nil:
				s.rules = append(s.rules, fmt.Sprintf("%d to %s", r.Priority, r.Dst))
			case r.Src != nil:
				s.rules = append(s.rules, fmt.Sprintf("%d from %s", r.Priority, r.Src))
			default:
				s.rules = append(s.rules, fmt.Sprintf("%d other", r.Priority))
			}
		}
	}
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	s.macs = map[string]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
		s.links = append(s.links, l.Attrs().Name)
		s.macs[strings.ToLower(l.Attrs().HardwareAddr.String())] = l.Attrs().Name
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := h.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Dst == nil {
				continue
			}
			if ones, bits := r.Dst.Mask.Size(); ones == bits {
				s.routes = append(s.routes, fmt.Sprintf("%s dev %s", r.Dst, names[r.LinkIndex]))
			}
		}
	}
	sort.Strings(s.rules)
	sort.Strings(s.routes)
	sort.Strings(s.links)
	return s
}

// podRelated lists the rules and routes of s that mention the addresses.
func (s hostState) podRelated(ips ...netip.Addr) []string {
	var out []string
	for _, x := range append(append([]string{}, s.rules...), s.routes...) {
		for _, ip := range ips {
			if strings.Contains(x, ip.String()+"/") {
				out = append(out, x)
			}
		}
	}
	return out
}

// veths lists the host veths of pods (Terway's default prefix) in s.
func (s hostState) veths() []string {
	var out []string
	for _, l := range s.links {
		if strings.HasPrefix(l, "cali") {
			out = append(out, l)
		}
	}
	return out
}

// retired lists the host veths DELs retired and the reaper has yet to
// delete.
func (s hostState) retired() []string {
	var out []string
	for _, l := range s.links {
		if strings.HasPrefix(l, datapath.ReapPrefix) {
			out = append(out, l)
		}
	}
	return out
}

func (s hostState) has(want string) bool {
	for _, x := range append(append([]string{}, s.rules...), s.routes...) {
		if strings.HasPrefix(x, want) {
			return true
		}
	}
	return false
}

// podLink describes the pod's eth0: MAC and addresses.
func (p *pod) podLink() (mac string, addrs []string, err error) {
	h, err := nlsafe.Open(p.netns.Path())
	if err != nil {
		return "", nil, err
	}
	defer h.Close()
	l, err := h.LinkByName("eth0")
	if err != nil {
		return "", nil, err
	}
	as, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return "", nil, err
	}
	for _, a := range as {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		addrs = append(addrs, a.IPNet.String())
	}
	return strings.ToLower(l.Attrs().HardwareAddr.String()), addrs, nil
}

// stateFiles lists the plugin's attachment records on the node.
func (n *node) stateFiles() []string {
	m, _ := filepath.Glob(n.path("state", "*.json"))
	return m
}

// addToPod puts an extra address on the pod's eth0 (for spoofing tests).
func (p *pod) addToPod(a netip.Addr) error {
	h, err := nlsafe.Open(p.netns.Path())
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	return h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}})
}

var _ = os.ReadFile
