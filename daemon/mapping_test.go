package daemon

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	dpapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/rpc"
)

// hostNS is a network namespace standing in for the node's host one,
// with a veth to hang pod routes on.
type hostNS struct {
	t    *testing.T
	ns   ns.NetNS
	link netlink.Link
}

func newHostNS(t *testing.T) *hostNS {
	t.Helper()
	n, err := testnetns.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := testnetns.Remove(n); err != nil {
			t.Errorf("remove host netns: %v", err)
		}
	})
	h := &hostNS{t: t, ns: n}
	err = n.Do(func(ns.NetNS) error {
		va := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "tdh0"}, PeerName: "tdh1"}
		if err := netlink.LinkAdd(va); err != nil {
			return err
		}
		l, err := netlink.LinkByName("tdh0")
		if err != nil {
			return err
		}
		h.link = l
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// podRoutes adds what a PolicyRoute datapath leaves on the host for ip.
func (h *hostNS) podRoutes(ip string) { h.podRoutesVia(ip, h.link) }

// podVeth gives a pod its own host veth end, as a sandbox has; deleting
// it (removeLink) is what the sandbox's end does to the host side.
func (h *hostNS) podVeth(name string) netlink.Link {
	h.t.Helper()
	var l netlink.Link
	err := h.ns.Do(func(ns.NetNS) error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
			return err
		}
		var err error
		if l, err = netlink.LinkByName(name); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

func (h *hostNS) removeLink(l netlink.Link) {
	h.t.Helper()
	if err := h.ns.Do(func(ns.NetNS) error { return netlink.LinkDel(l) }); err != nil {
		h.t.Fatal(err)
	}
}

// hasRule reports whether a pod rule (priority 512 or 2048) names ip.
func (h *hostNS) hasRule(ip string) bool {
	h.t.Helper()
	found := false
	err := h.ns.Do(func(ns.NetNS) error {
		rules, err := netlink.RuleList(netlink.FAMILY_V4)
		for _, r := range rules {
			for _, n := range []*net.IPNet{r.Src, r.Dst} {
				if n != nil && n.IP.Equal(net.ParseIP(ip)) && (r.Priority == 512 || r.Priority == 2048) {
					found = true
				}
			}
		}
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return found
}

func (h *hostNS) podRoutesVia(ip string, link netlink.Link) {
	h.t.Helper()
	dst := &net.IPNet{IP: net.ParseIP(ip).To4(), Mask: net.CIDRMask(32, 32)}
	err := h.ns.Do(func(ns.NetNS) error {
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK}); err != nil {
			return err
		}
		to := netlink.NewRule()
		to.Priority, to.Dst, to.Table = 512, dst, 254
		from := netlink.NewRule()
		from.Priority, from.Src, from.Table = 2048, dst, 1001
		if err := netlink.RuleAdd(to); err != nil {
			return err
		}
		return netlink.RuleAdd(from)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// has reports whether the namespace still has a /32 route for ip.
func (h *hostNS) has(ip string) bool {
	h.t.Helper()
	found := false
	err := h.ns.Do(func(ns.NetNS) error {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: &net.IPNet{IP: net.ParseIP(ip).To4(), Mask: net.CIDRMask(32, 32)}},
			netlink.RT_FILTER_DST)
		found = len(routes) > 0
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return found
}

func mappingByPod(t *testing.T, d *Daemon) map[string]*rpc.PodResourceMapping {
	t.Helper()
	ms, err := d.Mapping(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*rpc.PodResourceMapping{}
	for _, m := range ms {
		k := m.PodName
		if k == "" {
			k = "~" + m.FactoryResourceName + m.ResourceName
		}
		out[k] = m
	}
	return out
}

// TestMappingAndHostCleanup checks the three-way mapping's verdicts and
// that GC removes the host rules and routes of pods that went without a
// DEL — inside a namespace standing in for the host.
func TestMappingAndHostCleanup(t *testing.T) {
	l := newLab(t)
	host := newHostNS(t)
	for _, n := range []string{"a", "b", "c"} {
		l.pod("m", n, nil)
	}
	d, c, _ := l.daemon(func(o *Options) { o.HostNetNS = host.ns.Path() })
	ips := map[string]string{}
	veths := map[string]netlink.Link{}
	for _, n := range []string{"a", "b", "c"} {
		r := allocOK(t, c, "m", n, "c-"+n)
		ips[n] = podIP(r)
		veths[n] = host.podVeth("tdp" + n)
		host.podRoutesVia(podIP(r), veths[n])
	}
	host.podRoutes("192.168.0.200") // a leftover nobody holds
	m := mappingByPod(t, d)
	for _, n := range []string{"a", "b", "c"} {
		if e := m["m/"+n]; e == nil || e.Type != rpc.ResourceMappingType_MappingTypeNormal || e.ResourceName != e.FactoryResourceName {
			t.Fatalf("m/%s: %+v", n, e)
		}
	}
	idle, leftover := 0, false
	for k, e := range m {
		if e.Type == rpc.ResourceMappingType_MappingTypeIdle {
			idle++
		}
		if strings.HasPrefix(k, "~") && e.ResourceName == "192.168.0.200" && e.Type == rpc.ResourceMappingType_MappingTypeError {
			leftover = true
		}
	}
	if idle != d.pool.Stats().Idle || !leftover {
		t.Fatalf("idle entries %d (pool %d), host leftover reported %v: %v", idle, d.pool.Stats().Idle, leftover, m)
	}
	// b goes without a DEL (its sandbox's veth goes, its rules stay); c's
	// address vanishes from its ENI behind the daemon's back.
	l.deletePod("m", "b")
	host.removeLink(veths["b"])
	held, _ := d.holds("m/c")
	if err := d.node.API.UnassignIPv4(ctxT(t), held.ip.ENIID, []netip.Addr{held.ip.IPv4}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, waitLimit, "verdicts on b and c", func() bool {
		m = mappingByPod(t, d)
		return m["m/b"].Type == rpc.ResourceMappingType_MappingTypeError && strings.Contains(m["m/b"].Reason, "gone") &&
			m["m/c"].Type == rpc.ResourceMappingType_MappingTypeError && strings.Contains(m["m/c"].Reason, "metadata")
	})
	if err := d.GC(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if host.hasRule(ips["b"]) || !host.has(ips["a"]) || !host.hasRule(ips["a"]) {
		t.Fatalf("after GC: b's rules kept %v, a's route kept %v", host.hasRule(ips["b"]), host.has(ips["a"]))
	}
	if _, ok := mappingByPod(t, d)["m/b"]; ok {
		t.Fatal("GC kept b's record")
	}
}

// podEvents returns "reason: message" of the events on a pod.
func podEvents(t *testing.T, l *lab, ns, name string) []string {
	t.Helper()
	evs, err := l.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// eventsWritten waits until the daemon's event recorder has written
// every event made before the call. The recorder writes in the order the
// events were made, so they are written once a node event made now is.
func eventsWritten(t *testing.T, l *lab, d *Daemon) {
	t.Helper()
	const reason = "TestEventsWritten"
	msg := fmt.Sprintf("written after the events made before %v", time.Now().UnixNano())
	d.kube.NodeEvent(k8s.Normal, reason, msg)
	testwait.Until(t, waitLimit, "the event recorder to write the events made so far", func() bool {
		return slices.ContainsFunc(nodeEventsOf(t, l, reason), func(e corev1.Event) bool { return e.Message == msg })
	})
}

// fakePlugin is a CNI plugin that succeeds on ADD and fails CHECK for
// containers named in the marker directory.
const fakePlugin = `#!/bin/sh
read -r conf
case "$CNI_COMMAND" in
ADD) echo '{"cniVersion":"1.0.0","ips":[{"address":"192.168.0.9/24"}]}' ;;
CHECK) if [ -e "$MARKERS/$CNI_CONTAINERID" ]; then
  echo '{"cniVersion":"1.0.0","code":999,"msg":"veth is down"}'; exit 1; fi ;;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
esac
`

// TestPeriodicCheck raises ResourceInvalid for a pod whose address is
// gone from its ENI and for one whose network fails CNI CHECK, through
// libcni with a stand-in plugin.
func TestPeriodicCheck(t *testing.T) {
	l := newLab(t)
	dir := t.TempDir()
	confDir, binDir, cacheDir, markers := filepath.Join(dir, "net.d"), filepath.Join(dir, "bin"), filepath.Join(dir, "cache"), filepath.Join(dir, "markers")
	for _, p := range []string{confDir, binDir, cacheDir, markers} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(binDir, "fake"), []byte(fakePlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	conflist := []byte(`{"cniVersion":"1.0.0","name":"terway","plugins":[{"type":"fake"}]}`)
	if err := os.WriteFile(filepath.Join(confDir, "10-terway.conflist"), conflist, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MARKERS", markers)
	l.conf = strings.Replace(l.conf, `"max_pool_size":5`, fmt.Sprintf(`"max_pool_size":5,"cni_conf_dir":%q,"cni_bin_dir":%q,"cni_cache_dir":%q`,
		confDir, binDir, cacheDir), 1)
	for _, n := range []string{"ok", "down", "lost"} {
		l.pod("chk", n, nil)
	}
	d, c, _ := l.daemon(nil)
	cni := libcni.NewCNIConfigWithCacheDir([]string{binDir}, cacheDir, nil)
	list, err := libcni.ConfListFromBytes(conflist)
	if err != nil {
		t.Fatal(err)
	}
	netns := filepath.Join(dir, "netns") // the stand-in plugin never enters it
	if err := os.WriteFile(netns, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"ok", "down", "lost"} {
		if _, err := c.AllocIP(ctxT(t), &rpc.AllocIPRequest{K8SPodNamespace: "chk", K8SPodName: n, K8SPodInfraContainerId: "c-" + n,
			Netns: netns, IfName: "eth0"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cni.AddNetworkList(ctxT(t), list, &libcni.RuntimeConf{ContainerID: "c-" + n, NetNS: netns, IfName: "eth0"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(markers, "c-down"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held, _ := d.holds("chk/lost")
	if err := d.node.API.UnassignIPv4(ctxT(t), held.ip.ENIID, []netip.Addr{held.ip.IPv4}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, waitLimit, "ResourceInvalid events", func() bool {
		if err := d.Check(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		down, lost := strings.Join(podEvents(t, l, "chk", "down"), "\n"), strings.Join(podEvents(t, l, "chk", "lost"), "\n")
		return strings.Contains(down, "ResourceInvalid: CNI CHECK failed") && strings.Contains(down, "veth is down") &&
			strings.Contains(lost, "ResourceInvalid: resource") && strings.Contains(lost, "metadata")
	})
	eventsWritten(t, l, d)
	if evs := strings.Join(podEvents(t, l, "chk", "ok"), "\n"); strings.Contains(evs, "ResourceInvalid") {
		t.Fatalf("a healthy pod was found invalid: %v", evs)
	}
}

// fakeKubelet accepts device plugin registrations.
type fakeKubelet struct {
	dpapi.UnimplementedRegistrationServer
	got chan *dpapi.RegisterRequest
}

func (k *fakeKubelet) Register(_ context.Context, r *dpapi.RegisterRequest) (*dpapi.Empty, error) {
	k.got <- r
	return &dpapi.Empty{}, nil
}

// TestDevicePluginAdvertisesENIs: in ENIOnly mode the daemon registers
// aliyun/eni with kubelet and advertises one device per ENI it can give.
func TestDevicePluginAdvertisesENIs(t *testing.T) {
	l := newLab(t)
	dir, err := os.MkdirTemp("", "dpk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, filepath.Base(dpapi.KubeletSocket)))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{got: make(chan *dpapi.RegisterRequest, 4)}
	srv := grpc.NewServer()
	dpapi.RegisterRegistrationServer(srv, k)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"max_pool_size":0`, 1)
	l.daemon(func(o *Options) { o.Mode = mode.ENIOnly; o.DevicePluginDir = dir })
	var reg *dpapi.RegisterRequest
	select {
	case reg = <-k.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no registration")
	}
	if reg.ResourceName != "aliyun/eni" || reg.Version != dpapi.Version {
		t.Fatalf("registration %+v", reg)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, reg.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := dpapi.NewDevicePluginClient(conn).ListAndWatch(ctxT(t), &dpapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Devices) != 3 { // ecs.g7.xlarge: 3 secondary ENIs
		t.Fatalf("%d devices, want 3", len(resp.Devices))
	}
}
