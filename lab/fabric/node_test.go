package fabric

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
)

// Every running instance of the world becomes a node: eth0 with the
// primary ENI's MAC and IP, a default route via the vSwitch gateway, and
// the gateway answers.
func TestNodeBoot(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	for _, id := range []string{node1, node2, node3} {
		n := l.node(id)
		pe := l.primaryENI(id)
		if n.PrimaryIP() != pe.PrimaryIP || !strings.EqualFold(n.PrimaryMAC().String(), pe.MAC) {
			t.Fatalf("%s: node says %s %s, cloud says %s %s", id, n.PrimaryIP(), n.PrimaryMAC(), pe.PrimaryIP, pe.MAC)
		}
		h := testnetns.Handle(t, n.NetNSPath())
		eth0, err := h.LinkByName("eth0")
		if err != nil {
			t.Fatalf("%s: eth0: %v", id, err)
		}
		if !strings.EqualFold(eth0.Attrs().HardwareAddr.String(), pe.MAC) || eth0.Attrs().Flags&net.FlagUp == 0 {
			t.Fatalf("%s: eth0 %s flags %v, want MAC %s and up", id, eth0.Attrs().HardwareAddr, eth0.Attrs().Flags, pe.MAC)
		}
		addrs, err := h.AddrList(eth0, netlink.FAMILY_V4)
		if err != nil || len(addrs) != 1 || addrs[0].IPNet.String() != netip.PrefixFrom(pe.PrimaryIP, 24).String() {
			t.Fatalf("%s: eth0 IPv4 addresses %v (%v), want %s/24", id, addrs, err, pe.PrimaryIP)
		}
		routes, err := h.RouteList(eth0, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		var def bool
		for _, r := range routes {
			if (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw.String() == pe.Gateway.String() {
				def = true
			}
		}
		if !def || pe.Gateway.As4()[3] != 253 {
			t.Fatalf("%s: routes %v, want default via %s (.253)", id, routes, pe.Gateway)
		}
		if err := ping(n, pe.Gateway, 5*time.Second); err != nil {
			t.Fatalf("%s: ping gateway: %v", id, err)
		}
		// Nothing listens on the gateway's port 1: the fabric's RST proves
		// TCP gets there and back.
		err = dial(n, netip.Addr{}, netip.AddrPortFrom(pe.Gateway, 1), 5*time.Second)
		if !errors.Is(err, unix.ECONNREFUSED) {
			t.Fatalf("%s: TCP to %s:1: %v, want connection refused", id, pe.Gateway, err)
		}
	}
	// Nodes on different vSwitches reach each other through the fabric.
	if err := ping(l.node(node1), l.node(node3).PrimaryIP(), 5*time.Second); err != nil {
		t.Fatalf("ping node3 from node1: %v", err)
	}
}

// The metadata service at 100.100.100.200 tells each node its own
// identity by source address, and the API address answers, from inside
// the nodes only.
func TestCloudEndpointsFromNodes(t *testing.T) {
	// Not parallel: constructs Aliyun SDK clients, whose constructors race
	// with those of other tests' clients.
	l := newLab(t)
	ctx := testCtx(t)
	for _, id := range []string{node1, node2} {
		n := l.node(id)
		resp, err := n.HTTPClient().Get(l.f.MetadataEndpoint() + "/latest/meta-data/instance-id")
		if err != nil {
			t.Fatalf("%s: metadata: %v", id, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != id {
			t.Fatalf("%s: metadata instance-id = %d %q", id, resp.StatusCode, body)
		}
		// The daemon's own metadata client, as terwayd on the node uses it.
		md := cloud.NewMetadata(l.f.MetadataEndpoint(), n.HTTPClient(), nil, fastBackoff(), nil)
		inst, err := md.Instance(ctx)
		if err != nil || inst.ID != id || !strings.EqualFold(inst.PrimaryMAC, n.PrimaryMAC().String()) {
			t.Fatalf("%s: daemon metadata client: %+v %v", id, inst, err)
		}
	}
	n := l.node(node1)
	// Unsigned: fakecloud's JSON error, from the fabric's API address.
	resp, err := n.HTTPClient().Get(l.f.APIEndpoint() + "/?Action=DescribeNetworkInterfaces&Version=2014-05-26")
	if err != nil {
		t.Fatalf("API endpoint: %v", err)
	}
	var apiErr struct{ Code, RequestId string }
	err = json.NewDecoder(resp.Body).Decode(&apiErr)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode/100 != 4 || apiErr.Code == "" || apiErr.RequestId == "" {
		t.Fatalf("unsigned API call: status %d, %+v, %v", resp.StatusCode, apiErr, err)
	}
	// Signed, through the unmodified SDK dialling from the node.
	c := &ecs.Client{}
	initClientIn(t, &c.Client, n, l.f)
	req := ecs.CreateDescribeNetworkInterfacesRequest()
	req.InstanceId = node1
	out, err := c.DescribeNetworkInterfaces(req)
	if err != nil {
		t.Fatalf("DescribeNetworkInterfaces through %s: %v", l.f.APIEndpoint(), err)
	}
	if len(out.NetworkInterfaceSets.NetworkInterfaceSet) != 1 ||
		!strings.EqualFold(out.NetworkInterfaceSets.NetworkInterfaceSet[0].MacAddress, n.PrimaryMAC().String()) {
		t.Fatalf("node1's ENIs: %+v", out.NetworkInterfaceSets)
	}
}

// initClientIn initialises c, the client that an old-SDK service client
// embeds (ecs.Client, vpc.Client), to reach the fabric's API endpoint
// from inside node n.
func initClientIn(t *testing.T, c *sdk.Client, n *Node, f *Fabric) {
	t.Helper()
	cfg := sdk.NewConfig()
	cfg.Scheme = "HTTP"
	cfg.AutoRetry = false
	cfg.Transport = n.HTTPClient().Transport
	if err := c.InitWithOptions(fakecloud.DefaultRegion, cfg, credentials.NewAccessKeyCredential(testAK, testSecret)); err != nil {
		t.Fatal(err)
	}
	c.Domain = strings.TrimPrefix(f.APIEndpoint(), "http://")
}

// An ENI created and attached through the cloud API appears in the node as
// eth<DeviceIndex> with its MAC, down and without addresses; the fabric
// knows its addresses; on detach it disappears and the fabric forgets it.
func TestENIAttachDetach(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	fab := testnetns.Handle(t, l.f.NetNSPath())
	linksBefore := linkNames(t, fab)
	setsBefore := len(nftSets(t, l.f))

	e := l.attachENI(node1, vsw1, 2, 0)
	if e.view.DeviceIndex < 1 {
		t.Fatalf("device index %d", e.view.DeviceIndex)
	}
	h := testnetns.Handle(t, l.node(node1).NetNSPath())
	link, err := h.LinkByName(e.eth)
	if err != nil {
		t.Fatalf("%s not in node1: %v", e.eth, err)
	}
	if !strings.EqualFold(link.Attrs().HardwareAddr.String(), e.MAC) || link.Attrs().Flags&net.FlagUp != 0 {
		t.Fatalf("%s: MAC %s flags %v, want %s and down", link.Attrs().Name, link.Attrs().HardwareAddr, link.Attrs().Flags, e.MAC)
	}
	if addrs, _ := h.AddrList(link, netlink.FAMILY_ALL); len(addrs) != 0 {
		t.Fatalf("hot-plugged ENI has addresses %v", addrs)
	}
	if len(e.IPv4) != 2 {
		t.Fatalf("ENI secondaries %v", e.IPv4)
	}
	all := append([]netip.Addr{e.PrimaryIP}, e.IPv4...)
	neigh := permanentNeighbours(t, fab)
	for _, a := range all {
		if !strings.EqualFold(neigh[a], e.MAC) {
			t.Fatalf("fabric neighbour %s = %q, want %s (all: %v)", a, neigh[a], e.MAC, neigh)
		}
	}
	pname := portName(t, l.f, e.ID)
	v4 := nftElements(t, l.f, pname+"_v4")
	for _, a := range all {
		if !setHas(v4, a) {
			t.Fatalf("anti-spoofing set of %s lacks %s", pname, a)
		}
	}
	if !fdbHas(t, fab, e.MAC) {
		t.Fatalf("no static FDB entry for %s", e.MAC)
	}

	l.detachENI(e.ENI, node1)
	if _, err := h.LinkByName(e.eth); err == nil {
		t.Fatalf("%s still in node1 after detach", e.eth)
	}
	if l := linkByMAC(t, h, e.MAC); l != nil {
		t.Fatalf("link %s with the ENI's MAC still in node1", l.Attrs().Name)
	}
	neigh = permanentNeighbours(t, fab)
	for a, mac := range neigh {
		if strings.EqualFold(mac, e.MAC) {
			t.Fatalf("fabric neighbour %s → %s left after detach", a, mac)
		}
	}
	if fdbHas(t, fab, e.MAC) {
		t.Fatalf("FDB entry for %s left after detach", e.MAC)
	}
	if got := linkNames(t, fab); strings.Join(got, ",") != strings.Join(linksBefore, ",") {
		t.Fatalf("fabric links after detach %v, before attach %v", got, linksBefore)
	}
	if got := len(nftSets(t, l.f)); got != setsBefore {
		t.Fatalf("anti-spoofing sets after detach: %d, before attach %d", got, setsBefore)
	}
	// No re-plug of a detached ENI, even by a later reconcile of the
	// fabric's ports: yank node1's primary port and wait until the watcher
	// plugged it again and its pass over the ports ended.
	primary := l.primaryENI(node1)
	if err := fab.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: portName(t, l.f, primary.ID)}}); err != nil {
		t.Fatalf("yank the primary port: %v", err)
	}
	testwait.Until(t, settleWithin, "primary ENI plugged again", func() bool { return linkByMAC(t, h, primary.MAC) != nil })
	l.f.mu.Lock() // held by the reconcile for its whole pass
	defer l.f.mu.Unlock()
	if l := linkByMAC(t, h, e.MAC); l != nil {
		t.Fatalf("detached ENI came back as %s", l.Attrs().Name)
	}
}

// Stop removes a node's ENI links but keeps the namespace, Start plugs
// them again, Release removes the namespace.
func TestInstanceLifecycle(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	e := l.attachENI(node2, vsw2, 1, 0)
	n := l.node(node2)
	h := testnetns.Handle(t, n.NetNSPath())
	fab := testnetns.Handle(t, l.f.NetNSPath())
	macs := []string{n.PrimaryMAC().String(), e.MAC}

	if err := l.cloud.StopInstance(node2); err != nil {
		t.Fatal(err)
	}
	l.settle()
	if got, ok := l.f.Node(node2); !ok || got != n {
		t.Fatal("stopped instance lost its node")
	}
	if names := linkNames(t, h); strings.Join(names, ",") != "lo" {
		t.Fatalf("stopped node's links: %v, want only lo", names)
	}
	assertFabricForgot(t, l, fab, macs)

	if err := l.cloud.StartInstance(node2); err != nil {
		t.Fatal(err)
	}
	l.settle()
	for name, mac := range map[string]string{"eth0": macs[0], e.eth: e.MAC} {
		link, err := h.LinkByName(name)
		if err != nil || !strings.EqualFold(link.Attrs().HardwareAddr.String(), mac) {
			t.Fatalf("after start: %s: %v %v, want MAC %s", name, link, err, mac)
		}
	}
	if err := ping(n, l.primaryENI(node2).Gateway, 5*time.Second); err != nil {
		t.Fatalf("restarted node: ping gateway: %v", err)
	}
	if id := metadataGet(t, n, l.f, "instance-id"); id != node2 {
		t.Fatalf("restarted node: instance-id %q", id)
	}

	if err := l.cloud.ReleaseInstance(node2); err != nil {
		t.Fatal(err)
	}
	l.settle()
	if _, ok := l.f.Node(node2); ok {
		t.Fatal("released instance still has a node")
	}
	if _, err := statNS(n.NetNSPath()); err == nil {
		t.Fatalf("released node's namespace file %s still exists", n.NetNSPath())
	}
	assertFabricForgot(t, l, fab, macs)
	// The other nodes are unaffected.
	if id := metadataGet(t, l.node(node1), l.f, "instance-id"); id != node1 {
		t.Fatalf("node1 instance-id %q", id)
	}
}

// assertFabricForgot checks that no neighbour, FDB entry or anti-spoofing
// set of the fabric still refers to the MACs.
func assertFabricForgot(t *testing.T, l *lab, fab *nlsafe.Handle, macs []string) {
	t.Helper()
	for a, mac := range permanentNeighbours(t, fab) {
		for _, m := range macs {
			if strings.EqualFold(mac, m) {
				t.Fatalf("fabric neighbour %s → %s left", a, mac)
			}
		}
	}
	for _, m := range macs {
		if fdbHas(t, fab, m) {
			t.Fatalf("fabric FDB entry %s left", m)
		}
	}
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	for id, p := range l.f.ports {
		for _, m := range macs {
			if strings.EqualFold(p.mac.String(), m) {
				t.Fatalf("fabric still has port %s for ENI %s", p.name, id)
			}
		}
	}
}

func metadataGet(t *testing.T, n *Node, f *Fabric, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.MetadataEndpoint()+"/latest/meta-data/"+path, nil)
	resp, err := n.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("%s: metadata %s: %v", n.InstanceID(), path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
