// Command linkprobe runs in a kernelvm VM and creates, in a network
// namespace of its own, the links this machine's kernel cannot: an ipvlan
// L2 slave and a VLAN 100 sub-interface on a veth, and a dummy. It prints
// "<kind> ok" for each and exits non-zero on the first failure.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

func main() {
	runtime.LockOSThread()
	ns, err := netns.New()
	if err != nil {
		fail("new netns", err)
	}
	defer ns.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probe0"}, PeerName: "probe1"}
	if err := netlink.LinkAdd(veth); err != nil {
		fail("veth", err)
	}
	fmt.Println("veth ok")
	parent, err := netlink.LinkByName("probe0")
	if err != nil {
		fail("veth lookup", err)
	}
	for _, l := range []netlink.Link{
		&netlink.IPVlan{LinkAttrs: netlink.LinkAttrs{Name: "ipvl0", ParentIndex: parent.Attrs().Index}, Mode: netlink.IPVLAN_MODE_L2},
		&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "probe0.100", ParentIndex: parent.Attrs().Index}, VlanId: 100},
		&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "dummy0"}},
	} {
		if err := netlink.LinkAdd(l); err != nil {
			fail(l.Type(), err)
		}
		got, err := netlink.LinkByName(l.Attrs().Name)
		if err != nil || got.Type() != l.Type() {
			fail(l.Type(), fmt.Errorf("lookup: %v, type %v", err, got))
		}
		fmt.Println(l.Type(), "ok")
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}
