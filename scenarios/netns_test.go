package scenarios

import (
	"net/netip"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// Readers of node and pod network namespaces (tier 3: Env.NodeNetNS,
// Env.PodNetNS give the paths). Each binds a netlink socket to the
// namespace and changes nothing.

// hostEndOf names the link in the node namespace that routes to the
// pod's address: its veth's host end.
func hostEndOf(nsPath string, p corev1.Pod) string {
	GinkgoHelper()
	h, err := nlsafe.Open(nsPath)
	Expect(err).NotTo(HaveOccurred())
	defer h.Close()
	ip := netip.MustParseAddr(p.Status.PodIP)
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: nlsafe.IPNet(netip.PrefixFrom(ip, 32)),
		Table: 254}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	Expect(err).NotTo(HaveOccurred())
	Expect(routes).NotTo(BeEmpty(), "no route to %s in %s", ip, nsPath)
	link, err := h.LinkByIndex(routes[0].LinkIndex)
	Expect(err).NotTo(HaveOccurred())
	return link.Attrs().Name
}

// tbfRates are the rates (bytes per second) of the root tbf qdiscs of
// the link named link in the namespace at nsPath.
func tbfRates(nsPath, link string) []uint64 {
	GinkgoHelper()
	h, err := nlsafe.Open(nsPath)
	Expect(err).NotTo(HaveOccurred())
	defer h.Close()
	l, err := h.LinkByName(link)
	Expect(err).NotTo(HaveOccurred(), "link %s in %s", link, nsPath)
	qs, err := h.QdiscList(l)
	Expect(err).NotTo(HaveOccurred())
	var out []uint64
	for _, q := range qs {
		if t, ok := q.(*netlink.Tbf); ok && q.Attrs().Parent == netlink.HANDLE_ROOT {
			out = append(out, t.Rate)
		}
	}
	return out
}

// linkMACs are the MAC addresses (lower case) of the links in the
// namespace at nsPath.
func linkMACs(nsPath string) []string {
	GinkgoHelper()
	h, err := nlsafe.Open(nsPath)
	Expect(err).NotTo(HaveOccurred())
	defer h.Close()
	links, err := h.LinkList()
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, l := range links {
		out = append(out, strings.ToLower(l.Attrs().HardwareAddr.String()))
	}
	return out
}
