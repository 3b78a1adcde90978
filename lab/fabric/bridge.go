package fabric

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/nlsafe"
)

// gatewayMAC is the MAC every vSwitch gateway answers with, as ECS guests
// see ee:ff:ff:ff:ff:ff for their gateway.
var gatewayMAC = net.HardwareAddr{0xee, 0xff, 0xff, 0xff, 0xff, 0xff}

// bridge is one vSwitch: a Linux bridge in the fabric namespace holding
// the vSwitch's gateway addresses; ENI ports are its ports.
type bridge struct {
	vswitchID string
	name      string
	index     int
	cidr      netip.Prefix
	gateway   netip.Addr
	cidr6     netip.Prefix
	gateway6  netip.Addr
}

// ensureBridge returns the bridge of the ENI's vSwitch, creating it (and
// adding the IPv6 gateway once the vSwitch is known to have IPv6).
func (f *Fabric) ensureBridge(e fakecloud.ENIInfo) (*bridge, error) {
	b := f.bridges[e.VSwitchID]
	if b == nil {
		if !e.CIDR.IsValid() || !e.Gateway.IsValid() {
			return nil, fmt.Errorf("vSwitch %s of ENI %s: no CIDR or gateway", e.VSwitchID, e.ID)
		}
		b = &bridge{vswitchID: e.VSwitchID, name: fmt.Sprintf("%sb%d", f.name, len(f.bridges)),
			cidr: e.CIDR, gateway: e.Gateway}
		if err := f.createBridge(b); err != nil {
			return nil, err
		}
		f.bridges[e.VSwitchID] = b
	}
	if !b.gateway6.IsValid() && e.IPv6CIDR.IsValid() && e.IPv6Gateway.IsValid() {
		if err := f.addGateway(b, netip.PrefixFrom(e.IPv6Gateway, e.IPv6CIDR.Bits())); err != nil {
			return nil, err
		}
		b.cidr6, b.gateway6 = e.IPv6CIDR, e.IPv6Gateway
	}
	return b, nil
}

func (f *Fabric) createBridge(b *bridge) error {
	l, err := f.nl.LinkByName(b.name)
	if err != nil {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: b.name, HardwareAddr: gatewayMAC}}
		if err := f.nl.LinkAdd(br); err != nil {
			return fmt.Errorf("add bridge %s for vSwitch %s: %w", b.name, b.vswitchID, err)
		}
		if l, err = f.nl.LinkByName(b.name); err != nil {
			return fmt.Errorf("bridge %s: %w", b.name, err)
		}
	}
	b.index = l.Attrs().Index
	if err := f.addGateway(b, netip.PrefixFrom(b.gateway, b.cidr.Bits())); err != nil {
		return err
	}
	if err := f.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("set bridge %s up: %w", b.name, err)
	}
	f.log.Debug("vSwitch bridge created", "vswitch", b.vswitchID, "bridge", b.name, "cidr", b.cidr)
	return nil
}

// addGateway puts a gateway address on the bridge, usable at once (no
// DAD: the VPC owns the address).
func (f *Fabric) addGateway(b *bridge, p netip.Prefix) error {
	a := &netlink.Addr{IPNet: nlsafe.IPNet(p), Flags: unix.IFA_F_NODAD}
	if err := f.nl.AddrReplace(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Index: b.index}}, a); err != nil {
		return fmt.Errorf("add gateway %s to bridge %s: %w", p, b.name, err)
	}
	return nil
}
