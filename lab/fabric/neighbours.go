package fabric

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The VPC knows where every address lives; ECS answers no ARP for an
// ENI's secondary addresses. So the fabric never resolves them: every
// address of every plugged ENI is a permanent neighbour on its vSwitch
// bridge pointing at the ENI's MAC, and routed traffic to a pod address
// reaches the ENI that holds it.

// syncNeighbours makes the permanent neighbours of every bridge exactly
// the addresses of its plugged ENIs. Callers hold f.mu.
func (f *Fabric) syncNeighbours() error {
	want := map[int]map[netip.Addr]net.HardwareAddr{}
	for _, b := range f.bridges {
		want[b.index] = map[netip.Addr]net.HardwareAddr{}
	}
	for _, p := range f.ports {
		for _, a := range p.addrs() {
			if a.IsValid() {
				want[p.bridge.index][a] = p.mac
			}
		}
	}
	var errs []error
	for _, b := range f.bridges {
		errs = append(errs, f.syncBridgeNeighbours(b, want[b.index]))
	}
	return errors.Join(errs...)
}

func (f *Fabric) syncBridgeNeighbours(b *bridge, want map[netip.Addr]net.HardwareAddr) error {
	var errs []error
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		have, err := f.nl.NeighList(b.index, fam)
		if err != nil {
			errs = append(errs, fmt.Errorf("list neighbours of bridge %s: %w", b.name, err))
			continue
		}
		for _, n := range have {
			if n.State&netlink.NUD_PERMANENT == 0 {
				continue
			}
			a, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			if mac, ok := want[a.Unmap()]; ok && bytes.Equal(mac, n.HardwareAddr) {
				continue
			}
			if err := f.nl.NeighDel(&n); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("remove neighbour %s on bridge %s: %w", a, b.name, err))
			}
		}
	}
	for a, mac := range want {
		fam := netlink.FAMILY_V4
		if a.Is6() {
			fam = netlink.FAMILY_V6
		}
		n := &netlink.Neigh{LinkIndex: b.index, Family: fam, State: netlink.NUD_PERMANENT, IP: a.AsSlice(), HardwareAddr: mac}
		if err := f.nl.NeighSet(n); err != nil {
			errs = append(errs, fmt.Errorf("neighbour %s lladdr %s on bridge %s: %w", a, mac, b.name, err))
		}
	}
	return errors.Join(errs...)
}
