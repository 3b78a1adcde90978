// Package fabric runs fakecloud's machines as Linux network namespaces: a
// node namespace per instance and one fabric namespace that is the VPC.
// fakecloud drives it through its hypervisor hook, so interfaces appear
// and disappear because the cloud attached or detached something, never
// because test code made them.
//
// # Use
//
//	f, err := fabric.NewFabric(fabric.FabricOptions{Name: "t1", NetNSDir: t.TempDir()})
//	cloud, err := fakecloud.New(fakecloud.Options{Hypervisor: f, TimeScale: 0.02})
//	err = f.Serve(cloud.MetadataBySourceHandler(), cloud)
//	err = cloud.WaitHypervisor(ctx) // the running instances are now nodes
//	n, ok := f.Node("i-bp1lab0000000000001")
//	resp, err := n.HTTPClient().Get(f.MetadataEndpoint() + "/latest/meta-data/instance-id")
//	...
//	cloud.Close(); f.Close()
//
// API:
//
//	type FabricOptions struct { Name, NetNSDir string; MetadataAddr, APIAddr netip.Addr; Logger *slog.Logger }
//	func NewFabric(o FabricOptions) (*Fabric, error)
//	func (f *Fabric) Serve(metadata, api http.Handler) error
//	func (f *Fabric) MetadataEndpoint() string // "http://100.100.100.200"
//	func (f *Fabric) APIEndpoint() string      // "http://100.100.0.10"
//	func (f *Fabric) NetNSPath() string
//	func (f *Fabric) InternetNetNSPath() string
//	var InternetAddr netip.Addr // 203.0.113.2, in the internet namespace
//	func (f *Fabric) Name() string
//	func (f *Fabric) Node(instanceID string) (*Node, bool)
//	func (f *Fabric) Nodes() []*Node
//	func (f *Fabric) Close() error
//	func Cleanup(name, netnsDir string) error
//	var ErrInUse error
//	// *Fabric implements fakecloud.Hypervisor.
//	func (n *Node) InstanceID() string
//	func (n *Node) NetNSPath() string
//	func (n *Node) PrimaryIP() netip.Addr
//	func (n *Node) PrimaryMAC() net.HardwareAddr
//	func (n *Node) Do(fn func(ns.NetNS) error) error
//	func (n *Node) DialContext(ctx context.Context, network, address string) (net.Conn, error)
//	func (n *Node) HTTPClient() *http.Client
//
// # Nodes
//
// A node namespace exists from the instance's first InstanceStarted to
// InstanceReleased. While the instance runs, its primary ENI is eth0: the
// ENI's MAC, the primary IP with the vSwitch mask, a default route via the
// vSwitch gateway (.253 of a /24), lo up. Every other attached ENI is
// eth<DeviceIndex> with the ENI's MAC, down and without addresses, as a
// hot-plugged NIC appears to a guest; it disappears on detach, wherever it
// is by then (a pod namespace too). No IPv6 is configured on eth0: the
// primary ENI's IPv6 addresses, like secondary addresses, are for whoever
// uses the node to configure. InstanceStopped removes the ENI links and
// keeps the namespace; InstanceStarted plugs them again. A node starts
// with rp_filter off (the kernel default) whatever the test host uses.
// Right after a link is set up the kernel activates it asynchronously, so
// a first packet can be lost for a few milliseconds, as on a real NIC:
// tests retry (TCP does by itself).
//
// Node.HTTPClient and Node.DialContext make connections from inside the
// node namespace, so a daemon running in the test process reaches the
// metadata service with the node's primary IP as source, as a process on
// the node would. The Aliyun SDK keeps the client's transport when given
// it with SetTransport (it is not an *http.Transport, which the SDK would
// rewrite).
//
// # Fabric
//
// The fabric namespace holds, per vSwitch, a bridge named <name>b<N> with
// the gateway addresses (IPv4, and IPv6 <prefix>::fffd when the vSwitch
// has IPv6) and MAC ee:ff:ff:ff:ff:ff, as ECS guests see their gateway.
// Each plugged ENI is a veth pair: <name>e<N> on the bridge (with a static
// FDB entry for the ENI's MAC), the node end in the node namespace.
// Forwarding is on, redirects are off (a VPC never sends a node around
// it). On lo: the metadata address (100.100.100.200) and the API address
// (100.100.0.10 by default: Alibaba's VPC endpoints live in
// 100.100.0.0/16); Serve listens on port 80 of both inside the fabric.
// Nodes reach them through their default route with no NAT, so the
// metadata service identifies the instance by source address.
//
// Route entries (RoutesChanged, a full table each time) become fabric
// routes "dest via <next hop's primary IP>" with protocol static; entries
// that left the table are removed. Every address of every plugged ENI
// (primary, secondary IPv4, IPv6) is a permanent neighbour on its bridge
// pointing at the ENI's MAC: ECS answers no ARP for secondary addresses,
// and routed traffic to a pod address must reach the ENI that holds it.
//
// Anti-spoofing: an nftables table "lab" of family bridge in the fabric
// (hooks forward and input, a named interval set per port and family)
// drops IP frames from an ENI whose source is neither an address the cloud
// assigned to that ENI nor inside a route entry whose next hop is that ENI
// (or its instance, on the primary ENI's port). IPv6 link-local and :: are
// allowed for neighbour discovery; ARP is not checked. Each rule counts
// its drops (`nft list table bridge lab` in the fabric namespace); the
// table is rebuilt in one transaction on every change, which restarts the
// counters.
//
// The internet and EIPs: a namespace "<name>.internet" stands for the
// public network, joined to the fabric by a veth (203.0.113.0/24,
// TEST-NET-3: the fabric .1, the internet InternetAddr .2 with a default
// route back). The fabric is the VPC's NAT gateway for EIPs, following
// fakecloud's EIPsChanged (the EIPs that are InUse): 1:1 NAT between each
// EIP and its private address, and no path between the internet and any
// address without one (the lab models no SNAT gateway, so a pod that
// reaches the internet at all does so by its EIP). Conntrack entries of an
// EIP that stops forwarding are removed. `nft list table ip labnat` in the
// fabric shows the mappings and the drop counters.
//
// Exclusive ENIs: a real ENI moved into a pod namespace returns to the
// host when that namespace is destroyed, while a veth is destroyed with
// it. The fabric watches its links (a netlink subscription in the fabric
// namespace) and plugs a still-attached ENI whose port vanished again: a
// new veth pair with the same MAC, eth<DeviceIndex> in the node namespace,
// bridge port, neighbours and anti-spoofing set restored.
//
// # Names and cleanup
//
// Namespaces are files bind-mounted in NetNSDir (default /run/netns, so
// `ip netns exec` works): "<name>.fabric", "<name>.internet" and
// "<name>.node.<instance ID>".
// The fabric name (1–8 of [a-z0-9-]) is in every namespace and fabric link
// name, so parallel fabrics never collide; the node's links are named as a
// node names them (eth0, eth1, ...). A live fabric holds an flock on its
// namespace file. Close removes every namespace, mount and goroutine the
// fabric made and leaves the root namespace as it was (nothing is ever
// created there). After a crash, Cleanup(name, dir) removes the leftovers;
// NewFabric does it itself for its name, and both refuse with ErrInUse
// while a live fabric holds the name.
//
// Limits: one routing domain per fabric (VPCs with overlapping CIDRs need
// separate fabrics); route entries whose next hop is of the other address
// family are ignored; vSwitches appear when the first ENI of theirs is
// plugged.
package fabric
