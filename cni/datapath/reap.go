package datapath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
)

// ReapPrefix starts the name of every veth TeardownDeferred retired; the
// plugin refuses veth prefixes that could produce it. Reap also requires
// RetiredAlias, so it never deletes a link it did not retire.
const (
	ReapPrefix   = "tzd"
	RetiredAlias = "terway-retired"
)

// retireLink sets a host veth down, which drops its routes, and renames it
// to ReapPrefix + its index in hex: unique, at most 11 characters, and
// out of the way of a new pod that reuses the old name.
func (h *nlh) retireLink(l netlink.Link) error {
	if err := h.LinkSetDown(l); err != nil && !gone(err) {
		return fmt.Errorf("set link %s down in %s: %w", l.Attrs().Name, h.where, err)
	}
	if err := h.LinkSetAlias(l, RetiredAlias); err != nil && !gone(err) {
		return fmt.Errorf("mark link %s retired in %s: %w", l.Attrs().Name, h.where, err)
	}
	name := fmt.Sprintf("%s%x", ReapPrefix, l.Attrs().Index)
	if err := h.LinkSetName(l, name); err != nil && !gone(err) {
		return fmt.Errorf("rename link %s to %s in %s: %w", l.Attrs().Name, name, h.where, err)
	}
	return nil
}

// Reap deletes every veth TeardownDeferred retired in the host namespace
// hostNetNS ("" is the caller's) and reports how many it deleted. It is
// slow by design (each deletion waits for the kernel) and meant to run off
// the critical path: after a DEL has answered, and in GC.
func Reap(hostNetNS string) (int, error) {
	hostNS, err := openHostNS(hostNetNS)
	if err != nil {
		return 0, err
	}
	defer hostNS.Close()
	h, err := newNLH(hostNS, "host")
	if err != nil {
		return 0, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, l := range links {
		if !strings.HasPrefix(l.Attrs().Name, ReapPrefix) || l.Type() != "veth" || l.Attrs().Alias != RetiredAlias {
			continue
		}
		if err := h.deleteLink(l); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
