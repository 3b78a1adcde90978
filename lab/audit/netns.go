package audit

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// netView is a node namespace's network state, read only.
type netView struct {
	links      []linkInfo
	addrs      []addrInfo
	rules      []ruleInfo
	routes     []routeInfo
	neighbours []neighInfo
	qdiscs     []qdiscInfo
	filters    []filterInfo
}

type linkInfo struct {
	Index int
	Name  string
	Type  string
	Alias string
	MAC   string // lower case
}

type addrInfo struct {
	LinkIndex int
	Prefix    netip.Prefix
}

type ruleInfo struct {
	Priority, Table int
	Src, Dst        netip.Prefix
	Iif, Oif        string
}

type routeInfo struct {
	Table, LinkIndex, Type int
	Dst                    netip.Prefix
	Gw                     netip.Addr
}

type neighInfo struct {
	LinkIndex int
	IP        netip.Addr
	MAC       string
	State     int
}

type qdiscInfo struct {
	LinkIndex int
	Type      string
	Handle    uint32
	Parent    uint32
}

type filterInfo struct {
	LinkIndex  int
	Type       string
	Parent     uint32
	RedirIndex int
}

var families = []int{netlink.FAMILY_V4, netlink.FAMILY_V6}

// readNetNS reads links, addresses, rules, routes of all tables,
// neighbours, qdiscs and ingress filters of the namespace at path. It
// binds a netlink socket to the namespace; the calling thread never
// changes namespace and nothing is written.
func readNetNS(path string) (*netView, error) {
	h, err := nlsafe.Open(path)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	v := &netView{}
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("netns %s: list links: %w", path, err)
	}
	for _, l := range links {
		a := l.Attrs()
		v.links = append(v.links, linkInfo{Index: a.Index, Name: a.Name, Type: l.Type(), Alias: a.Alias,
			MAC: strings.ToLower(a.HardwareAddr.String())})
	}
	steps := []func(*nlsafe.Handle, []netlink.Link) error{v.readAddrs, v.readRules, v.readRoutes, v.readNeighbours, v.readTC}
	for _, step := range steps {
		if err := step(h, links); err != nil {
			return nil, fmt.Errorf("netns %s: %w", path, err)
		}
	}
	return v, nil
}

func (v *netView) readAddrs(h *nlsafe.Handle, _ []netlink.Link) error {
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if p := nlsafe.Prefix(a.IPNet); p.IsValid() {
			v.addrs = append(v.addrs, addrInfo{LinkIndex: a.LinkIndex, Prefix: p})
		}
	}
	return nil
}

func (v *netView) readRules(h *nlsafe.Handle, _ []netlink.Link) error {
	for _, fam := range families {
		rules, err := h.RuleList(fam)
		if err != nil {
			return fmt.Errorf("list rules: %w", err)
		}
		for _, r := range rules {
			v.rules = append(v.rules, ruleInfo{Priority: r.Priority, Table: r.Table, Src: nlsafe.Prefix(r.Src),
				Dst: nlsafe.Prefix(r.Dst), Iif: r.IifName, Oif: r.OifName})
		}
	}
	return nil
}

// readRoutes lists every table: table UNSPEC with the table filter is
// netlink's "all tables".
func (v *netView) readRoutes(h *nlsafe.Handle, _ []netlink.Link) error {
	for _, fam := range families {
		routes, err := h.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return fmt.Errorf("list routes: %w", err)
		}
		for _, r := range routes {
			dst := nlsafe.Prefix(r.Dst)
			if !dst.IsValid() {
				dst = defaultPrefix(fam)
			}
			gw, _ := netip.AddrFromSlice(r.Gw)
			v.routes = append(v.routes, routeInfo{Table: r.Table, LinkIndex: r.LinkIndex, Type: r.Type, Dst: dst, Gw: gw.Unmap()})
		}
	}
	return nil
}

func (v *netView) readNeighbours(h *nlsafe.Handle, _ []netlink.Link) error {
	for _, fam := range families {
		ns, err := h.NeighList(0, fam)
		if err != nil {
			return fmt.Errorf("list neighbours: %w", err)
		}
		for _, n := range ns {
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			v.neighbours = append(v.neighbours, neighInfo{LinkIndex: n.LinkIndex, IP: ip.Unmap(),
				MAC: strings.ToLower(n.HardwareAddr.String()), State: n.State})
		}
	}
	return nil
}

// readTC lists every link's qdiscs and the filters of its ingress (or
// clsact) qdisc, where the plugin's redirects live. A link that vanished
// meanwhile is skipped.
func (v *netView) readTC(h *nlsafe.Handle, links []netlink.Link) error {
	for _, l := range links {
		qs, err := h.QdiscList(l)
		if gone(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list qdiscs of %s: %w", l.Attrs().Name, err)
		}
		for _, q := range qs {
			a := q.Attrs()
			v.qdiscs = append(v.qdiscs, qdiscInfo{LinkIndex: l.Attrs().Index, Type: q.Type(), Handle: a.Handle, Parent: a.Parent})
			if q.Type() != "ingress" && q.Type() != "clsact" {
				continue
			}
			fs, err := h.FilterList(l, netlink.HANDLE_MIN_INGRESS)
			if gone(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("list ingress filters of %s: %w", l.Attrs().Name, err)
			}
			for _, f := range fs {
				fi := filterInfo{LinkIndex: l.Attrs().Index, Type: f.Type(), Parent: f.Attrs().Parent}
				if u, ok := f.(*netlink.U32); ok {
					fi.RedirIndex = u.RedirIndex
				}
				v.filters = append(v.filters, fi)
			}
		}
	}
	return nil
}

// gone reports whether err says the link disappeared.
func gone(err error) bool {
	return errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL)
}

func defaultPrefix(fam int) netip.Prefix {
	if fam == netlink.FAMILY_V6 {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
}

// linkByIndex returns the link with index i.
func (v *netView) linkByIndex(i int) (linkInfo, bool) {
	for _, l := range v.links {
		if l.Index == i {
			return l, true
		}
	}
	return linkInfo{}, false
}

// linkNamed reports whether a link is called name.
func (v *netView) linkNamed(name string) bool {
	for _, l := range v.links {
		if l.Name == name {
			return true
		}
	}
	return false
}
