package fabric

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/fakecloud"
)

// port is a plugged ENI: a veth pair whose fabric end (name) is a port of
// the vSwitch bridge and whose node end carries the ENI's MAC inside the
// node namespace, named eth<DeviceIndex> as a guest names the NIC.
type port struct {
	eni        fakecloud.ENIInfo
	instanceID string
	name       string
	mac        net.HardwareAddr
	bridge     *bridge
}

func (p *port) primary() bool { return p.eni.Type == fakecloud.ENITypePrimary }

// nodeLinkName is how the node names the NIC.
func (p *port) nodeLinkName() string { return fmt.Sprintf("eth%d", p.eni.DeviceIndex) }

// plug makes the ENI present in the running node n, creating its port if
// needed and recording its current addresses. Callers hold f.mu and call
// sync afterwards.
func (f *Fabric) plug(n *Node, e fakecloud.ENIInfo) error {
	p := f.ports[e.ID]
	if p != nil && (p.instanceID != n.id || p.eni.DeviceIndex != e.DeviceIndex || p.eni.MAC != e.MAC) {
		// Attached elsewhere since we last saw it: start over.
		if err := f.unplug(p); err != nil {
			return err
		}
		p = nil
	}
	if p == nil {
		mac, err := net.ParseMAC(e.MAC)
		if err != nil {
			return fmt.Errorf("ENI %s: MAC %q: %w", e.ID, e.MAC, err)
		}
		b, err := f.ensureBridge(e)
		if err != nil {
			return err
		}
		p = &port{instanceID: n.id, name: fmt.Sprintf("%se%d", f.name, f.portSeq), mac: mac, bridge: b}
		f.portSeq++
		f.ports[e.ID] = p
	}
	p.eni = e
	if _, err := f.nl.LinkByName(p.name); err == nil {
		return nil
	} else if !isNotFound(err) {
		return fmt.Errorf("look up port %s of ENI %s: %w", p.name, e.ID, err)
	}
	if err := f.createPort(n, p); err != nil {
		delete(f.ports, e.ID)
		return err
	}
	return nil
}

// createPort creates the veth pair of p: the node end directly inside the
// node namespace, so it never exists anywhere else.
func (f *Fabric) createPort(n *Node, p *port) error {
	nodeNS, err := netns.GetFromPath(n.path)
	if err != nil {
		return fmt.Errorf("open node netns %s: %w", n.path, err)
	}
	defer func() { _ = nodeNS.Close() }()
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: p.name, MasterIndex: p.bridge.index},
		PeerName:         p.nodeLinkName(),
		PeerHardwareAddr: p.mac,
		PeerNamespace:    netlink.NsFd(nodeNS),
	}
	if err := f.nl.LinkAdd(veth); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("plug ENI %s into %s as %s: a link of that name exists in the node or fabric: %w", p.eni.ID, n.id, p.nodeLinkName(), err)
		}
		return fmt.Errorf("plug ENI %s into %s as %s: %w", p.eni.ID, n.id, p.nodeLinkName(), err)
	}
	l, err := f.nl.LinkByName(p.name)
	if err == nil {
		err = f.nl.LinkSetUp(l)
	}
	if err == nil {
		// The VPC knows where every MAC is: no flooding to find it.
		err = f.nl.NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: unix.AF_BRIDGE,
			Flags: netlink.NTF_MASTER, State: netlink.NUD_NOARP, HardwareAddr: p.mac})
	}
	if err == nil && p.primary() {
		err = n.configurePrimary(p.eni)
	}
	if err != nil {
		_ = f.nl.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.name}})
		return fmt.Errorf("set up port %s of ENI %s: %w", p.name, p.eni.ID, err)
	}
	f.log.Debug("ENI plugged", "eni", p.eni.ID, "instance", n.id, "node_link", p.nodeLinkName(), "port", p.name)
	return nil
}

// unplug removes an ENI's port; the kernel removes the node end with it,
// wherever it is (also inside a pod namespace), as a detach yanks the NIC.
func (f *Fabric) unplug(p *port) error {
	delete(f.ports, p.eni.ID)
	err := f.nl.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.name}})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove port %s of ENI %s: %w", p.name, p.eni.ID, err)
	}
	f.log.Debug("ENI unplugged", "eni", p.eni.ID, "instance", p.instanceID, "port", p.name)
	return nil
}

// unplugInstance removes every port of an instance.
func (f *Fabric) unplugInstance(id string) error {
	var errs []error
	for _, p := range f.ports {
		if p.instanceID == id {
			errs = append(errs, f.unplug(p))
		}
	}
	return errors.Join(errs...)
}

// addrs are all addresses the VPC routes to this ENI.
func (p *port) addrs() []netip.Addr {
	out := append([]netip.Addr{p.eni.PrimaryIP}, p.eni.IPv4...)
	return append(out, p.eni.IPv6...)
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)
}
