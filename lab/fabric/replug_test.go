package fabric

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/terway-sim/terway/internal/testnetns"
	"github.com/terway-sim/terway/internal/testwait"
)

// An exclusive ENI moved into a pod namespace (renamed eth0 there, as the
// CNI does) comes back to the node as eth<DeviceIndex> with its MAC when
// the pod namespace is destroyed, with its bridge port, neighbours and
// anti-spoofing set, and it works.
func TestReplugAfterPodNetnsDestroyed(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	a, b := l.node(node1), l.node(node2)
	e := l.attachENI(node1, vsw1, 1, 0)
	h := testnetns.Handle(t, a.NetNSPath())
	fab := testnetns.Handle(t, l.f.NetNSPath())
	oldPort := portName(t, l.f, e.ID)

	podPath := filepath.Join(t.TempDir(), "pod")
	if err := createNetNS(podPath); err != nil {
		t.Fatal(err)
	}
	podNS, err := netns.GetFromPath(podPath)
	if err != nil {
		t.Fatal(err)
	}
	link, err := h.LinkByName(e.eth)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetNsFd(link, int(podNS)); err != nil {
		t.Fatalf("move %s into the pod: %v", e.eth, err)
	}
	pod := testnetns.Handle(t, podPath)
	inPod := linkByMAC(t, pod, e.MAC)
	if inPod == nil {
		t.Fatal("ENI not in the pod namespace")
	}
	if err := pod.LinkSetName(inPod, "eth0"); err != nil {
		t.Fatal(err)
	}
	if linkByMAC(t, h, e.MAC) != nil {
		t.Fatal("ENI still in the node after the move")
	}
	if _, err := fab.LinkByName(oldPort); err != nil {
		t.Fatalf("port %s gone while the ENI is in the pod: %v", oldPort, err)
	}

	// Destroy the pod namespace: last references first, then the mount.
	pod.Close()
	_ = podNS.Close()
	if err := removeNetNS(podPath); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, settleWithin, "ENI back in the node", func() error {
		l := linkByMAC(t, h, e.MAC)
		if l == nil {
			return fmt.Errorf("no link with %s in node1", e.MAC)
		}
		if l.Attrs().Name != e.eth || l.Attrs().Flags&net.FlagUp != 0 {
			return fmt.Errorf("link %s flags %v, want %s down", l.Attrs().Name, l.Attrs().Flags, e.eth)
		}
		return nil
	})
	port, err := fab.LinkByName(portName(t, l.f, e.ID))
	if err != nil {
		t.Fatalf("re-plugged port: %v", err)
	}
	br, err := fab.LinkByIndex(port.Attrs().MasterIndex)
	if err != nil || !strings.HasPrefix(br.Attrs().Name, l.f.Name()+"b") || port.Attrs().Flags&net.FlagUp == 0 {
		t.Fatalf("re-plugged port %s: master %v (%v), flags %v", port.Attrs().Name, br, err, port.Attrs().Flags)
	}
	neigh := permanentNeighbours(t, fab)
	for _, addr := range append([]netip.Addr{e.PrimaryIP}, e.IPv4...) {
		if !strings.EqualFold(neigh[addr], e.MAC) {
			t.Fatalf("neighbour %s after re-plug: %q", addr, neigh[addr])
		}
		if !setHas(nftElements(t, l.f, port.Attrs().Name+"_v4"), addr) {
			t.Fatalf("anti-spoofing set after re-plug lacks %s", addr)
		}
	}
	if view, _ := l.cloud.ENI(e.ID); view.Status != "InUse" || view.InstanceID != node1 {
		t.Fatalf("cloud view changed: %+v", view)
	}

	// The ENI works again: node1 uses it for its address.
	wireENI(t, a, e.eth, e.IPv4[0], e.view.Gateway)
	if err := ping(b, e.IPv4[0], 5*time.Second); err != nil {
		t.Fatalf("ping the re-plugged ENI's address from node2: %v", err)
	}
}
