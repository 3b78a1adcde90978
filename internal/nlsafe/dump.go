package nlsafe

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// attempts is netlinksafe's, so that every listing gives up alike.
const attempts = 5

// dump runs list until the kernel does not flag it as interrupted, at
// most attempts times.
func dump[T any](list func() ([]T, error)) ([]T, error) {
	for i := 1; ; i++ {
		out, err := list()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
		if i == attempts {
			return nil, fmt.Errorf("%d attempts: %w", attempts, err)
		}
	}
}

// NeighList lists the neighbours of one link (0: of all) and family.
func (h *Handle) NeighList(linkIndex, family int) ([]netlink.Neigh, error) {
	return dump(func() ([]netlink.Neigh, error) { return h.Handle.NeighList(linkIndex, family) })
}

// AddrList lists the addresses of one link (nil: of all) and family.
func (h *Handle) AddrList(link netlink.Link, family int) ([]netlink.Addr, error) {
	return dump(func() ([]netlink.Addr, error) { return h.Handle.AddrList(link, family) })
}
