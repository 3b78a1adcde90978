package fabric

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// routeProto marks the fabric routes that come from VPC route entries, so
// that stale ones can be found in the kernel and removed.
const routeProto = netlink.RouteProtocol(unix.RTPROT_STATIC)

// wantedRoutes are the route entries the fabric can install now: the next
// hop must be of the destination's family and inside a vSwitch the fabric
// has a bridge for (the others are retried on every later sync).
func (f *Fabric) wantedRoutes() map[netip.Prefix]netip.Addr {
	out := map[netip.Prefix]netip.Addr{}
	for _, t := range f.tables {
		for _, r := range t.Entries {
			if !r.Destination.IsValid() || !r.NextHopIP.IsValid() || r.Destination.Addr().Is4() != r.NextHopIP.Is4() {
				continue
			}
			for _, b := range f.bridges {
				if b.cidr.Contains(r.NextHopIP) || (b.cidr6.IsValid() && b.cidr6.Contains(r.NextHopIP)) {
					out[r.Destination.Masked()] = r.NextHopIP
				}
			}
		}
	}
	return out
}

// syncRoutes makes the fabric's route-entry routes exactly the wanted
// ones: "dest via <next hop's primary IP>". Callers hold f.mu.
func (f *Fabric) syncRoutes() error {
	want := f.wantedRoutes()
	var errs []error
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		have, err := f.nl.RouteListFiltered(fam, &netlink.Route{Protocol: routeProto}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			errs = append(errs, fmt.Errorf("list fabric routes: %w", err))
			continue
		}
		for _, r := range have {
			dst, ok := prefixOf(r, fam)
			gw, _ := netip.AddrFromSlice(r.Gw)
			if ok && want[dst] == gw.Unmap() {
				continue
			}
			if err := f.nl.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("remove stale route %s: %w", r.Dst, err))
			}
		}
	}
	for dst, gw := range want {
		r := &netlink.Route{Dst: nlsafe.IPNet(dst), Gw: gw.AsSlice(), Protocol: routeProto}
		if err := f.nl.RouteReplace(r); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s in the fabric: %w", dst, gw, err))
		}
	}
	return errors.Join(errs...)
}

// prefixOf is a route's destination; a default route may come without one.
func prefixOf(r netlink.Route, fam int) (netip.Prefix, bool) {
	if r.Dst == nil {
		if fam == netlink.FAMILY_V6 {
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0), true
		}
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), true
	}
	a, ok := netip.AddrFromSlice(r.Dst.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := r.Dst.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), bits), true
}

// routedTo are the route-entry destinations whose next hop is this port:
// entries to its instance land on the primary ENI, entries to an ENI on
// that ENI. The anti-spoofing set lets the port send from them.
func (f *Fabric) routedTo(p *port) []netip.Prefix {
	var out []netip.Prefix
	for _, t := range f.tables {
		for _, r := range t.Entries {
			switch {
			case r.NextHopType == "NetworkInterface" && r.NextHopID == p.eni.ID,
				r.NextHopType != "NetworkInterface" && r.NextHopID == p.instanceID && p.primary():
				out = append(out, r.Destination.Masked())
			}
		}
	}
	return out
}
