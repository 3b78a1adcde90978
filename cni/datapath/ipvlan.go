package datapath

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ProbeIPVlan reports whether ipvlan links can be created, by trying one
// inside the pod's namespace (podNetNS) and removing it: nil when they
// can, an error wrapping ErrIPVlanUnsupported when the kernel lacks them.
// The parent is a temporary veth in the pod's namespace (ipvlan refuses
// loopback parents, which would be indistinguishable from a missing
// driver), so the node is never touched.
func ProbeIPVlan(podNetNS string) error {
	n, err := ns.GetNS(podNetNS)
	if err != nil {
		return fmt.Errorf("probe ipvlan: open pod network namespace %q: %w", podNetNS, err)
	}
	defer func() { _ = n.Close() }()
	h, err := newNLH(n, "pod")
	if err != nil {
		return fmt.Errorf("probe ipvlan: %w", err)
	}
	defer h.Close()

	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("probe ipvlan: random name: %w", err)
	}
	name := "ipvp" + hex.EncodeToString(b) // 12 characters, +"p"/"i" below
	parent := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name + "p"}, PeerName: name + "q"}
	if err := h.LinkAdd(parent); err != nil {
		return fmt.Errorf("probe ipvlan: add parent veth: %w", err)
	}
	// Deleting the parent deletes the ipvlan on it too.
	defer func() { _ = h.deleteLink(parent) }()
	p, err := h.LinkByName(parent.Name)
	if err != nil {
		return fmt.Errorf("probe ipvlan: parent veth: %w", err)
	}
	err = h.LinkAdd(&netlink.IPVlan{
		LinkAttrs: netlink.LinkAttrs{Name: name + "i", ParentIndex: p.Attrs().Index},
		Mode:      netlink.IPVLAN_MODE_L2,
	})
	if unsupported(err) {
		return fmt.Errorf("probe ipvlan: %w: %v", ErrIPVlanUnsupported, err)
	}
	if err != nil {
		return fmt.Errorf("probe ipvlan: %w", err)
	}
	return nil
}

// unsupported recognises the kernel's answers for a link kind it has no
// driver for: EOPNOTSUPP ("Unknown device type" in the extended ack).
func unsupported(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	return errors.Is(err, unix.EOPNOTSUPP) || strings.Contains(msg, "not supported") ||
		strings.Contains(msg, "unknown device type") || strings.Contains(msg, "unknown kind")
}
