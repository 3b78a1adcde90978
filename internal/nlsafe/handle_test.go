package nlsafe_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
)

func TestMain(m *testing.M) {
	os.Exit(testnetns.GuardRoot("nlsafe", m.Run, "nls"))
}

func TestOpenNamesWhatIsWrong(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-netns")
	if _, err := nlsafe.Open(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Open(%s) = %v, want a not-exist error naming the path", missing, err)
	}
	plain := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := nlsafe.Open(plain); err == nil || !strings.Contains(err.Error(), "not a namespace file") ||
		!strings.Contains(err.Error(), plain) {
		t.Errorf("Open(%s) = %v, want a 'not a namespace file' error naming the path", plain, err)
	}
}

// TestHandlesSeeTheirNamespace: a handle opened by path and one opened
// from the ns.NetNS both act in the test's namespace, and the listings
// this package retries find what was put there.
func TestHandlesSeeTheirNamespace(t *testing.T) {
	n := testnetns.ForTest(t)
	byPath := testnetns.Handle(t, n.Path())
	byNS, err := nlsafe.OpenNS(n)
	if err != nil {
		t.Fatal(err)
	}
	defer byNS.Close()

	if err := byPath.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nlsveth0"}, PeerName: "nlsveth1"}); err != nil {
		t.Fatal(err)
	}
	l, err := byNS.LinkByName("nlsveth0")
	if err != nil {
		t.Fatalf("link made through the path's handle, looked up through the NetNS's: %v", err)
	}
	if err := byNS.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	addr, err := netlink.ParseAddr("10.9.8.7/24")
	if err != nil {
		t.Fatal(err)
	}
	if err := byNS.AddrAdd(l, addr); err != nil {
		t.Fatal(err)
	}
	peer, mac := net.ParseIP("10.9.8.1"), net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	if err := byNS.NeighAdd(&netlink.Neigh{LinkIndex: l.Attrs().Index, State: netlink.NUD_PERMANENT,
		IP: peer, HardwareAddr: mac}); err != nil {
		t.Fatal(err)
	}

	addrs, err := byPath.AddrList(l, netlink.FAMILY_V4)
	if err != nil || len(addrs) != 1 || addrs[0].IPNet.String() != addr.IPNet.String() {
		t.Errorf("AddrList = %v, %v; want %s", addrs, err, addr)
	}
	neighs, err := byPath.NeighList(l.Attrs().Index, netlink.FAMILY_V4)
	if err != nil || len(neighs) != 1 || !neighs[0].IP.Equal(peer) || neighs[0].HardwareAddr.String() != mac.String() {
		t.Errorf("NeighList = %v, %v; want %s at %s", neighs, err, peer, mac)
	}
	if links, err := byPath.LinkList(); err != nil || len(links) != 3 {
		t.Errorf("LinkList = %d links, %v; want lo and the veth pair", len(links), err)
	}
	if _, err := netlink.LinkByName("nlsveth0"); !errors.As(err, new(netlink.LinkNotFoundError)) {
		t.Errorf("the veth is visible in the test's own namespace: %v", err)
	}
}
