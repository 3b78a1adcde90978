package fabric

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/nlsafe"
)

// Node is a fakecloud instance as a network namespace: its primary ENI is
// eth0 (up, primary IP with the vSwitch mask, default route via the
// vSwitch gateway); each secondary ENI is eth<DeviceIndex>, down and
// without addresses, as a hot-plugged NIC appears to a guest.
type Node struct {
	f          *Fabric
	id         string
	path       string
	primaryIP  netip.Addr
	primaryMAC net.HardwareAddr
	transport  *http.Transport
	// running is guarded by f.mu.
	running bool
}

// InstanceID is the fakecloud instance this node is.
func (n *Node) InstanceID() string { return n.id }

// NetNSPath is the node namespace's file (for `ip netns exec` when the
// fabric's NetNSDir is /run/netns, or nsenter --net=).
func (n *Node) NetNSPath() string { return n.path }

// PrimaryIP is the primary private IP of the instance (of eth0).
func (n *Node) PrimaryIP() netip.Addr { return n.primaryIP }

// PrimaryMAC is the MAC of the primary ENI (of eth0).
func (n *Node) PrimaryMAC() net.HardwareAddr { return append(net.HardwareAddr(nil), n.primaryMAC...) }

// Do runs fn on a thread inside the node namespace (ns.NetNS.Do).
func (n *Node) Do(fn func(ns.NetNS) error) error {
	h, err := ns.GetNS(n.path)
	if err != nil {
		return fmt.Errorf("open node netns %s: %w", n.path, err)
	}
	defer func() { _ = h.Close() }()
	return h.Do(fn)
}

// DialContext dials from inside the node namespace: the connection's
// socket belongs to the node, so its source is the node's address, as for
// a process running on the node.
func (n *Node) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func(ns.NetNS) error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// HTTPClient returns a client whose connections are made from inside the
// node namespace and never through a proxy: a daemon in the test process
// reaches http://100.100.100.200 with it as a process on the node would.
// Its Transport is not an *http.Transport, so the Aliyun SDK's
// client.SetTransport(n.HTTPClient().Transport) keeps it as it is (the SDK
// rewrites an *http.Transport's dialer and proxy).
func (n *Node) HTTPClient() *http.Client {
	return &http.Client{Transport: nodeTransport{n.transport}}
}

// nodeTransport hides the *http.Transport from code that would modify it.
type nodeTransport struct{ t *http.Transport }

// RoundTrip implements http.RoundTripper.
func (t nodeTransport) RoundTrip(r *http.Request) (*http.Response, error) { return t.t.RoundTrip(r) }

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (t nodeTransport) CloseIdleConnections() { t.t.CloseIdleConnections() }

// validInstanceID refuses IDs that cannot be part of a file name.
func validInstanceID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\x00") || len(id) > 200 {
		return fmt.Errorf("instance ID %q cannot name a namespace file", id)
	}
	return nil
}

// ensureNode returns the node of inst, creating its namespace with lo up.
// Callers hold f.mu.
func (f *Fabric) ensureNode(inst fakecloud.InstanceInfo) (*Node, error) {
	if n := f.nodes[inst.ID]; n != nil {
		return n, nil
	}
	if err := validInstanceID(inst.ID); err != nil {
		return nil, err
	}
	n := &Node{f: f, id: inst.ID, path: nodeNSPath(f.dir, f.name, inst.ID)}
	for _, e := range inst.ENIs {
		if e.Type == fakecloud.ENITypePrimary {
			n.primaryIP = e.PrimaryIP
			n.primaryMAC, _ = net.ParseMAC(e.MAC)
		}
	}
	if !n.primaryIP.IsValid() {
		return nil, fmt.Errorf("instance %s: no primary ENI in the start event", inst.ID)
	}
	if err := removeNetNS(n.path); err != nil {
		return nil, err
	}
	if err := createNetNS(n.path); err != nil {
		return nil, err
	}
	err := n.withHandle(func(h *nlsafe.Handle) error {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return err
		}
		return h.LinkSetUp(lo)
	})
	if err == nil {
		err = writeSysctls(n.path, nodeSysctls)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("set up node %s: %w", inst.ID, err), removeNetNS(n.path))
	}
	n.transport = &http.Transport{
		Proxy:                 nil,
		DialContext:           n.DialContext,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	f.nodes[inst.ID] = n
	f.log.Debug("node namespace created", "instance", inst.ID, "netns", n.path)
	return n, nil
}

// nodeSysctls pin what a new namespace would otherwise inherit from the
// test host's root namespace (IPv4 devconf is copied from it): a node
// starts with the kernel's default, reverse-path filtering off, whatever
// the host runs with.
var nodeSysctls = map[string]string{
	"net/ipv4/conf/all/rp_filter":     "0",
	"net/ipv4/conf/default/rp_filter": "0",
}

// withHandle runs fn with a netlink handle inside the node namespace.
func (n *Node) withHandle(fn func(*nlsafe.Handle) error) error {
	h, err := nlsafe.Open(n.path)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.id, err)
	}
	defer h.Close()
	return fn(h)
}

// configurePrimary sets eth0 up as DHCP would on an ECS instance: primary
// IP with the vSwitch mask and a default route via the gateway.
func (n *Node) configurePrimary(e fakecloud.ENIInfo) error {
	return n.withHandle(func(h *nlsafe.Handle) error {
		l, err := h.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("eth0 of node %s: %w", n.id, err)
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set eth0 of node %s up: %w", n.id, err)
		}
		a := &netlink.Addr{IPNet: nlsafe.IPNet(netip.PrefixFrom(e.PrimaryIP, e.CIDR.Bits()))}
		if err := h.AddrReplace(l, a); err != nil {
			return fmt.Errorf("add %s to eth0 of node %s: %w", a.IPNet, n.id, err)
		}
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: e.Gateway.AsSlice(), Dst: nlsafe.IPNet(netip.PrefixFrom(netip.IPv4Unspecified(), 0))}
		if err := h.RouteReplace(r); err != nil {
			return fmt.Errorf("default route via %s on node %s: %w", e.Gateway, n.id, err)
		}
		return nil
	})
}

// remove closes the node's connections and removes its namespace file.
// Callers hold f.mu.
func (n *Node) remove() error {
	n.running = false
	if n.transport != nil {
		n.transport.CloseIdleConnections()
	}
	return removeNetNS(n.path)
}
