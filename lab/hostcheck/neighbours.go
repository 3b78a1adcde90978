package hostcheck

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// takeNeighbours records the ARP and NDP tables. Permanent entries are
// configuration and kept by device and address. Dynamic ones are kept by
// device, address and MAC, without their state, which flips between
// REACHABLE, STALE, DELAY and PROBE with traffic and timers. Left out:
// FAILED and INCOMPLETE entries (no MAC) and NOARP ones, which the kernel
// makes on the first packet to a multicast address or over loopback and
// whose MAC says nothing (doc.go says how Diff compares each kind).
func (n *Network) takeNeighbours(h *nlsafe.Handle, names map[int]string) error {
	static, dynamic := grouped{}, map[string]string{}
	for _, fam := range families {
		neighs, err := h.NeighList(0, fam.nl)
		if err != nil {
			return fmt.Errorf("list %s neighbours: %w", fam.name, err)
		}
		for _, nb := range neighs {
			dev := linkName(names, nb.LinkIndex)
			switch {
			case nb.State&netlink.NUD_PERMANENT != 0:
				static.add(dev+" "+nb.IP.String(), words("lladdr", nb.HardwareAddr.String()))
			case nb.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE|netlink.NUD_NOARP) != 0 || len(nb.HardwareAddr) == 0:
			default:
				dynamic[fmt.Sprintf("%s %s lladdr %s", dev, nb.IP, nb.HardwareAddr)] = "dynamic"
			}
		}
	}
	n.Neighbours, n.DynamicNeighbours = static.joined(), dynamic
	return nil
}
