package fabric

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"regexp"
	"sort"
	"sync"

	"github.com/gofrs/flock"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/nlsafe"
)

// Defaults of FabricOptions.
var (
	// DefaultNetNSDir is where `ip netns` keeps namespaces.
	DefaultNetNSDir = "/run/netns"
	// DefaultMetadataAddr is the instance metadata service, as in ECS.
	DefaultMetadataAddr = netip.MustParseAddr("100.100.100.200")
	// DefaultAPIAddr is the ECS/VPC API endpoint inside the fabric: like
	// Alibaba's VPC endpoints it lives in 100.100.0.0/16.
	DefaultAPIAddr = netip.MustParseAddr("100.100.0.10")
)

// FabricOptions configure a Fabric.
type FabricOptions struct {
	// Name tags every namespace and fabric link: 1 to 8 characters of
	// [a-z0-9-], starting with a letter. Fabrics alive at the same time
	// need different names.
	Name string
	// NetNSDir holds the namespace files; empty means DefaultNetNSDir.
	// Tests pass a temporary directory.
	NetNSDir string
	// MetadataAddr and APIAddr are where Serve listens (port 80) inside
	// the fabric; zero means DefaultMetadataAddr and DefaultAPIAddr.
	MetadataAddr, APIAddr netip.Addr
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,7}$`)

func validName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("fabric name %q: want 1-8 characters of [a-z0-9-] starting with a letter (it prefixes link names of at most 15 characters)", name)
	}
	return nil
}

// Fabric is the VPC of a lab: one network namespace holding a bridge per
// vSwitch (with the vSwitch's gateway addresses), routing between them,
// the VPC's route entries, permanent neighbours for every ENI address,
// anti-spoofing per ENI port, and the metadata and API listeners. It
// implements fakecloud.Hypervisor: fakecloud's hook creates the node
// namespaces and plugs ENIs into them. All methods are safe for concurrent
// use.
type Fabric struct {
	name     string
	dir      string
	path     string
	log      *slog.Logger
	metaAddr netip.Addr
	apiAddr  netip.Addr

	// nsh is the open fabric namespace.
	nsh netns.NsHandle
	// lock marks the fabric live (lockFabricNS) until teardown.
	lock *flock.Flock
	// stopWatch ends the port watcher; wg tracks it and the listeners.
	stopWatch chan struct{}
	wg        sync.WaitGroup

	mu      sync.Mutex // guards everything below and serialises changes
	closed  bool
	nl      *nlsafe.Handle
	nft     *nftables.Conn
	bridges map[string]*bridge                  // by vSwitch ID
	nodes   map[string]*Node                    // by instance ID
	ports   map[string]*port                    // plugged ENIs by ENI ID
	tables  map[string]fakecloud.RouteTableInfo // by route table ID
	eips    []fakecloud.EIPInfo                 // forwarding EIPs, ID order
	portSeq int
	servers *servers
}

// NewFabric creates the fabric namespace. Leftovers of a crashed fabric of
// the same name are removed first (see Cleanup). Then pass the fabric as
// fakecloud.Options.Hypervisor and call Serve with the cloud's handlers.
func NewFabric(o FabricOptions) (*Fabric, error) {
	if err := validName(o.Name); err != nil {
		return nil, err
	}
	if o.NetNSDir == "" {
		o.NetNSDir = DefaultNetNSDir
	}
	if !o.MetadataAddr.IsValid() {
		o.MetadataAddr = DefaultMetadataAddr
	}
	if !o.APIAddr.IsValid() {
		o.APIAddr = DefaultAPIAddr
	}
	if !o.MetadataAddr.Is4() || !o.APIAddr.Is4() || o.MetadataAddr == o.APIAddr {
		return nil, fmt.Errorf("metadata address %s and API address %s must be two different IPv4 addresses", o.MetadataAddr, o.APIAddr)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.NetNSDir, 0o755); err != nil {
		return nil, fmt.Errorf("create netns directory: %w", err)
	}
	if err := Cleanup(o.Name, o.NetNSDir); err != nil {
		return nil, fmt.Errorf("remove leftovers of fabric %q: %w", o.Name, err)
	}
	f := &Fabric{
		name: o.Name, dir: o.NetNSDir, path: fabricNSPath(o.NetNSDir, o.Name),
		log:      o.Logger.With("fabric", o.Name),
		metaAddr: o.MetadataAddr, apiAddr: o.APIAddr,
		nsh:     netns.None(),
		bridges: map[string]*bridge{}, nodes: map[string]*Node{}, ports: map[string]*port{},
		tables: map[string]fakecloud.RouteTableInfo{},
	}
	if err := f.setup(); err != nil {
		return nil, errors.Join(err, f.teardown())
	}
	return f, nil
}

// setup creates and configures the fabric namespace.
func (f *Fabric) setup() error {
	if err := createNetNS(f.path); err != nil {
		return err
	}
	h, err := netns.GetFromPath(f.path)
	if err != nil {
		return fmt.Errorf("open fabric netns %s: %w", f.path, err)
	}
	f.nsh = h
	if f.lock, err = lockFabricNS(f.path); err != nil {
		return err
	}
	if f.nl, err = nlsafe.Open(f.path); err != nil {
		return fmt.Errorf("fabric: %w", err)
	}
	if f.nft, err = nftables.New(nftables.WithNetNSFd(int(h)), nftables.AsLasting()); err != nil {
		return fmt.Errorf("nftables connection in fabric netns: %w", err)
	}
	if err := writeSysctls(f.path, fabricSysctls); err != nil {
		return err
	}
	if err := f.setupLoopback(); err != nil {
		return err
	}
	if err := f.syncAntiSpoof(); err != nil {
		return err
	}
	if err := f.setupInternet(); err != nil {
		return err
	}
	f.startWatch()
	return nil
}

// fabricSysctls make the fabric a router that forwards between vSwitches
// and, like a VPC, never redirects a node to another node: send_redirects
// is ORed between "all" and the device, so "default" must be off before
// the bridges exist. rp_filter is off because IPv4 devconf is inherited
// from the root namespace, and anti-spoofing is nftables' job here.
var fabricSysctls = map[string]string{
	"net/ipv4/ip_forward":                  "1",
	"net/ipv6/conf/all/forwarding":         "1",
	"net/ipv4/conf/all/send_redirects":     "0",
	"net/ipv4/conf/default/send_redirects": "0",
	"net/ipv4/conf/all/rp_filter":          "0",
	"net/ipv4/conf/default/rp_filter":      "0",
}

// setupLoopback brings lo up with the metadata and API addresses.
func (f *Fabric) setupLoopback() error {
	lo, err := f.nl.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("fabric lo: %w", err)
	}
	if err := f.nl.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set fabric lo up: %w", err)
	}
	for _, a := range []netip.Addr{f.metaAddr, f.apiAddr} {
		if err := f.nl.AddrReplace(lo, &netlink.Addr{IPNet: nlsafe.IPNet(netip.PrefixFrom(a, 32))}); err != nil {
			return fmt.Errorf("add %s to fabric lo: %w", a, err)
		}
	}
	return nil
}

// NetNSPath is the fabric namespace's file.
func (f *Fabric) NetNSPath() string { return f.path }

// Name is the fabric's name.
func (f *Fabric) Name() string { return f.name }

// MetadataEndpoint is the metadata service's base URL as nodes reach it,
// "http://100.100.100.200" by default.
func (f *Fabric) MetadataEndpoint() string { return "http://" + f.metaAddr.String() }

// APIEndpoint is the ECS/VPC API's URL as nodes reach it,
// "http://100.100.0.10" by default.
func (f *Fabric) APIEndpoint() string { return "http://" + f.apiAddr.String() }

// Node returns the node of an instance while its namespace exists (from
// the instance's first start to its release).
func (f *Fabric) Node(instanceID string) (*Node, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[instanceID]
	return n, ok
}

// Nodes returns the current nodes, ordered by instance ID.
func (f *Fabric) Nodes() []*Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*Node, 0, len(f.nodes))
	for _, n := range f.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// errClosed is returned by hypervisor calls after Close.
var errClosed = errors.New("lab fabric is closed")

// Close stops the listeners and the port watcher and removes every node
// namespace and the fabric namespace. Close the fakecloud first: hook
// calls after Close fail. Close is idempotent.
func (f *Fabric) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	return f.teardown()
}

// teardown releases everything setup and the hooks created, in the order
// that lets the namespaces end: goroutines and sockets first, then the
// handles, then the mounts.
func (f *Fabric) teardown() error {
	var errs []error
	f.stopWatcher()
	f.mu.Lock()
	srv := f.servers
	f.servers = nil
	f.mu.Unlock()
	if srv != nil {
		errs = append(errs, srv.close())
	}
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, n := range f.nodes {
		errs = append(errs, n.remove())
		delete(f.nodes, id)
	}
	clear(f.ports)
	clear(f.bridges)
	clear(f.tables)
	f.eips = nil
	if f.nft != nil {
		errs = append(errs, f.nft.CloseLasting())
		f.nft = nil
	}
	if f.nl != nil {
		f.nl.Close()
		f.nl = nil
	}
	if f.nsh.IsOpen() {
		errs = append(errs, f.nsh.Close())
		f.nsh = netns.None()
	}
	if f.lock != nil {
		errs = append(errs, f.lock.Unlock())
		f.lock = nil
	}
	errs = append(errs, removeNetNS(f.InternetNetNSPath()), removeNetNS(f.path))
	return errors.Join(errs...)
}
