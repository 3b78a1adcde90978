package fabric

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/testnetns"
)

// settleWithin bounds the waits for the fabric to reach a state: its watcher
// and fakecloud's hypervisor calls run on goroutines of their own.
const settleWithin = 10 * time.Second

const (
	testAK     = "LTAIlabTest"
	testSecret = "lab-test-secret"
	node1      = "i-bp1lab0000000000001"
	node2      = "i-bp1lab0000000000002"
	node3      = "i-bp1lab0000000000003"
	vsw1       = "vsw-bp1lab0000000000001"
	vsw2       = "vsw-bp1lab0000000000002"
	sg         = fakecloud.DefaultSecurityGroup
	// crashEnv makes the test binary a fabric that waits to be killed.
	crashEnv = "LAB_TEST_CRASH_FABRIC"
)

// TestMain compares the root namespace before and after the tests: they
// must run entirely inside namespaces the fabric or the tests created.
func TestMain(m *testing.M) {
	if v := os.Getenv(crashEnv); v != "" {
		os.Exit(crashingFabric(v))
	}
	noproxy.Unset()
	os.Exit(testnetns.GuardRoot("lab", m.Run))
}

// randomName is a fabric name unique across parallel tests and packages.
func randomName(t *testing.T) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return "lt" + hex.EncodeToString(b)
}

// testLogger shows the fabric's and cloud's warnings on stderr (t.Log
// cannot be used by goroutines that may outlive a test's last line).
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// lab is a fabric with fakecloud's default world plugged into it, the
// cloud's API on a loopback server for the daemon's client, and the
// fabric's endpoints served.
type lab struct {
	t     *testing.T
	f     *Fabric
	cloud *fakecloud.Cloud
	api   *cloud.Client
	dir   string
	// apiURL serves the cloud's API, for SDK clients of tests.
	apiURL string
}

// newLab builds a lab with a fresh name and directory; edit changes the
// default world first.
func newLab(t *testing.T, edit ...func(*fakecloud.Spec)) *lab {
	t.Helper()
	testnetns.RequireRoot(t)
	return newLabAt(t, randomName(t), t.TempDir(), edit...)
}

// newLabAt builds a lab with the given fabric name and netns directory.
func newLabAt(t *testing.T, name, dir string, edit ...func(*fakecloud.Spec)) *lab {
	t.Helper()
	testnetns.RequireRoot(t)
	f, err := NewFabric(FabricOptions{Name: name, NetNSDir: dir, Logger: testLogger()})
	if err != nil {
		t.Fatalf("NewFabric: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fabric: %v", err)
		}
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("netns files left after Close: %v", left)
		}
	})
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSecret}}
	for _, e := range edit {
		e(&spec)
	}
	c, err := fakecloud.New(fakecloud.Options{Spec: &spec, Seed: 11, TimeScale: 0.02, Hypervisor: f, Logger: testLogger()})
	if err != nil {
		t.Fatalf("fakecloud: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := f.Serve(c.MetadataBySourceHandler(), c); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	srv := httptest.NewServer(c)
	apiURL := srv.URL
	t.Cleanup(srv.Close)
	api, err := cloud.New(cloud.Options{RegionID: fakecloud.DefaultRegion, ECSEndpoint: srv.URL, VPCEndpoint: srv.URL,
		Credentials: credentials.NewStaticAKCredentialsProvider(testAK, testSecret), Backoff: fastBackoff()})
	if err != nil {
		t.Fatalf("cloud client: %v", err)
	}
	l := &lab{t: t, f: f, cloud: c, api: api, dir: dir, apiURL: apiURL}
	l.settle()
	return l
}

// fastBackoff makes the daemon client's waits short.
func fastBackoff() *backoff.Set {
	o := map[string]backoff.Policy{}
	for k, b := range backoff.Defaults() {
		o[k] = backoff.Policy{Duration: 20 * time.Millisecond, Factor: 1.3, Jitter: 0.1, Steps: max(b.Steps, 15)}
	}
	return backoff.NewSet(nil, o)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// settle waits until fakecloud delivered every queued hypervisor call.
func (l *lab) settle() {
	l.t.Helper()
	if err := l.cloud.WaitHypervisor(testCtx(l.t)); err != nil {
		l.t.Fatalf("wait for the hypervisor: %v", err)
	}
}

func (l *lab) node(id string) *Node {
	l.t.Helper()
	n, ok := l.f.Node(id)
	if !ok {
		l.t.Fatalf("no node for %s", id)
	}
	return n
}

// primaryENI is the instance's primary ENI as the cloud sees it.
func (l *lab) primaryENI(id string) fakecloud.ENIView {
	l.t.Helper()
	for _, e := range l.cloud.ENIs() {
		if e.InstanceID == id && e.Type == fakecloud.ENITypePrimary {
			return e
		}
	}
	l.t.Fatalf("no primary ENI for %s", id)
	return fakecloud.ENIView{}
}

// attachedENI is an ENI attachENI attached: as the daemon's cloud client
// returned it, as the cloud sees it, and the name of its interface in
// the node.
type attachedENI struct {
	cloud.ENI
	view fakecloud.ENIView
	eth  string
}

// attachENI creates an ENI with secondary addresses through the daemon's
// cloud client (the real SDK) and attaches it to inst.
func (l *lab) attachENI(inst, vsw string, ipv4, ipv6 int) attachedENI {
	l.t.Helper()
	ctx := testCtx(l.t)
	e, err := l.api.CreateENI(ctx, cloud.CreateENIRequest{IntentKey: "create-" + inst + "-" + vsw + randomName(l.t),
		VSwitchID: vsw, SecurityGroups: []string{sg}, SecondaryIPv4: ipv4, IPv6: ipv6})
	if err != nil {
		l.t.Fatalf("CreateENI: %v", err)
	}
	if err := l.api.AttachENI(ctx, e.ID, inst); err != nil {
		l.t.Fatalf("AttachENI %s to %s: %v", e.ID, inst, err)
	}
	e, err = l.api.WaitENIStatus(ctx, e.ID, cloud.StatusInUse)
	if err != nil {
		l.t.Fatalf("wait for %s InUse: %v", e.ID, err)
	}
	l.settle()
	view, _ := l.cloud.ENI(e.ID)
	return attachedENI{ENI: e, view: view, eth: ethName(view.DeviceIndex)}
}

// detachENI detaches through the daemon's cloud client and waits.
func (l *lab) detachENI(e cloud.ENI, inst string) {
	l.t.Helper()
	ctx := testCtx(l.t)
	if err := l.api.DetachENI(ctx, e.ID, inst); err != nil {
		l.t.Fatalf("DetachENI %s: %v", e.ID, err)
	}
	if _, err := l.api.WaitENIStatus(ctx, e.ID, cloud.StatusAvailable); err != nil {
		l.t.Fatalf("wait for %s Available: %v", e.ID, err)
	}
	l.settle()
}

// linkByMAC finds the link with mac, or nil.
func linkByMAC(t *testing.T, h *nlsafe.Handle, mac string) netlink.Link {
	t.Helper()
	links, err := h.LinkList()
	if err != nil {
		t.Fatalf("list links: %v", err)
	}
	for _, l := range links {
		if strings.EqualFold(l.Attrs().HardwareAddr.String(), mac) {
			return l
		}
	}
	return nil
}

// addAddr puts an address on a link inside a node (nodad for IPv6).
func addAddr(t *testing.T, n *Node, link string, p netip.Prefix) {
	t.Helper()
	h := testnetns.Handle(t, n.NetNSPath())
	l, err := h.LinkByName(link)
	if err != nil {
		t.Fatalf("%s in %s: %v", link, n.InstanceID(), err)
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: nlsafe.IPNet(p), Flags: unix.IFA_F_NODAD}); err != nil {
		t.Fatalf("add %s to %s in %s: %v", p, link, n.InstanceID(), err)
	}
}

// place is a namespace tests serve and dial in: a node, or the internet.
type place interface {
	Do(fn func(ns.NetNS) error) error
	InstanceID() string
}

// internetNS is the fabric's internet as a place.
type internetNS struct{ path string }

func (i internetNS) Do(fn func(ns.NetNS) error) error {
	h, err := ns.GetNS(i.path)
	if err != nil {
		return err
	}
	defer func() { _ = h.Close() }()
	return h.Do(fn)
}

func (internetNS) InstanceID() string { return "the internet" }

// server is a TCP listener inside a node that records who connected.
type server struct {
	l     net.Listener
	mu    sync.Mutex
	peers []netip.Addr
}

// listen serves TCP on port inside n (all addresses) until the test ends.
func listen(t *testing.T, n place, network, addr string) *server {
	t.Helper()
	s := &server{}
	err := n.Do(func(ns.NetNS) error {
		var err error
		s.l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen %s in %s: %v", addr, n.InstanceID(), err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			s.mu.Lock()
			s.peers = append(s.peers, ap.Addr().Unmap())
			s.mu.Unlock()
			_, _ = io.WriteString(c, "hello\n")
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = s.l.Close(); <-done })
	return s
}

func (s *server) sawPeer(a netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.peers {
		if p == a {
			return true
		}
	}
	return false
}

// dial connects from inside n with source src (zero: the kernel's choice)
// and reads the server's greeting.
func dial(n place, src netip.Addr, dst netip.AddrPort, timeout time.Duration) error {
	var c net.Conn
	err := n.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: timeout}
		if src.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
		}
		var err error
		c, err = d.Dial("tcp", dst.String())
		return err
	})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(timeout))
	line, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(line) != "hello\n" {
		return fmt.Errorf("unexpected greeting %q", line)
	}
	return nil
}

// mustReach fails unless src can open a TCP connection to dst and the
// server sees src (no NAT on the way).
func mustReach(t *testing.T, n place, src netip.Addr, s *server, dst netip.AddrPort) {
	t.Helper()
	if err := dial(n, src, dst, 10*time.Second); err != nil {
		t.Fatalf("%s from %s to %s: %v", n.InstanceID(), src, dst, err)
	}
	if src.IsValid() && !s.sawPeer(src) {
		t.Fatalf("server %s did not see peer %s (saw %v)", dst, src, s.peers)
	}
}

// mustNotReach fails if src can open a TCP connection to dst within a
// second. A refused connection also fails: the packets got through.
func mustNotReach(t *testing.T, n place, src netip.Addr, dst netip.AddrPort) {
	t.Helper()
	err := dial(n, src, dst, time.Second)
	if err == nil {
		t.Fatalf("%s from %s reached %s; want dropped", n.InstanceID(), src, dst)
	}
	var ne net.Error
	if !(errors.As(err, &ne) && ne.Timeout()) && !errors.Is(err, unix.EHOSTUNREACH) && !errors.Is(err, unix.ENETUNREACH) {
		t.Fatalf("%s from %s to %s: %v; want a timeout or unreachable (dropped)", n.InstanceID(), src, dst, err)
	}
}
