package audit

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/grpc"

	"github.com/terway-sim/terway/rpc"
)

// poolAddr is one address of a daemon's pool.
type poolAddr struct {
	ENIID string
	// State is "idle", "inuse", "reserved" or "releasing".
	State string
	Owner string
}

// poolView is a daemon's pool as its tracing API lists it. The store
// records only what pods hold; idle addresses live in the daemon's memory
// alone, so this is the only place that says which unheld addresses the
// daemon knows.
type poolView struct {
	addrs map[netip.Addr]poolAddr
	enis  map[string]bool
	// inflight are addresses that calls in flight will add; waiting the
	// pods waiting for one.
	inflight, waiting int
}

// readPool asks the daemon on conn for its pool
// (TerwayTracing.GetResourceTrace of resource_pool/default, the data
// terway-cli shows): "ip/<ipv4>" → "<eni ID> <state> <owner>", plus the
// counters.
func readPool(ctx context.Context, conn *grpc.ClientConn, socket string) (*poolView, error) {
	ctx, cancel := context.WithTimeout(ctx, daemonTimeout)
	defer cancel()
	reply, err := rpc.NewTerwayTracingClient(conn).GetResourceTrace(ctx,
		&rpc.ResourceTypeNameRequest{Type: "resource_pool", Name: "default"})
	if err != nil {
		return nil, daemonError("pool", socket, err)
	}
	return parsePoolTrace(reply.GetTrace())
}

// parsePoolTrace turns the trace entries into a poolView.
func parsePoolTrace(entries []*rpc.MapKeyValueEntry) (*poolView, error) {
	v := &poolView{addrs: map[netip.Addr]poolAddr{}, enis: map[string]bool{}}
	for _, e := range entries {
		k, val := e.GetKey(), e.GetValue()
		if ip, ok := strings.CutPrefix(k, "ip/"); ok {
			a, err := netip.ParseAddr(ip)
			if err != nil {
				return nil, fmt.Errorf("pool: bad address entry %q: %w", k, err)
			}
			f := strings.SplitN(val, " ", 3)
			for len(f) < 3 {
				f = append(f, "")
			}
			v.addrs[a] = poolAddr{ENIID: f[0], State: f[1], Owner: f[2]}
			if f[0] != "" {
				v.enis[f[0]] = true
			}
			continue
		}
		switch k {
		case "inflight", "waiting":
			n, err := strconv.Atoi(val)
			if err != nil {
				return nil, fmt.Errorf("pool: bad counter %s=%q: %w", k, val, err)
			}
			if k == "inflight" {
				v.inflight = n
			} else {
				v.waiting = n
			}
		}
	}
	return v, nil
}

// merge adds what o lists to v. The pool is read before and after the
// cloud so that an address assigned or released in between is known from
// one of the two reads (see gather).
func (v *poolView) merge(o *poolView) *poolView {
	switch {
	case v == nil:
		return o
	case o == nil:
		return v
	}
	for a, p := range o.addrs {
		if _, ok := v.addrs[a]; !ok {
			v.addrs[a] = p
		}
	}
	for e := range o.enis {
		v.enis[e] = true
	}
	v.inflight = max(v.inflight, o.inflight)
	v.waiting = max(v.waiting, o.waiting)
	return v
}

// has reports whether the pool lists ip, in any state.
func (v *poolView) has(ip netip.Addr) bool {
	if v == nil {
		return false
	}
	_, ok := v.addrs[ip]
	return ok
}

// busy reports whether the pool had cloud calls in flight.
func (v *poolView) busy() bool { return v != nil && v.inflight > 0 }
