package ipam

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/terway-sim/terway/daemon/cloud"
)

// TestUnsureUnassignKeptFromPods: an unassign that fails while the cloud
// cannot confirm what it did leaves its addresses unsure: no pod gets
// them (the cloud may have taken them back: a pod would hold an address
// on no ENI, which the heal would take for an operator's doing) until the
// sync has asked the cloud again — then what the cloud still assigns is
// idle again and what it does not is gone.
func TestUnsureUnassignKeptFromPods(t *testing.T) {
	h := newPolicy(t)
	a := h.cloud.addENI(t, 3) // the primary and three secondaries
	p := h.multiIP(h.multiIPConfig())
	h.cloud.set(func(m *memCloud) {
		m.failAlways["UnassignIPv4"] = apiError(cloud.CodeInternalError)
		m.failAlways["DescribeENI"] = apiError(cloud.CodeInternalError)
	})
	p.mu.Lock()
	e := p.enis[a.ID]
	var drop []*ipSlot
	for _, s := range e.ips {
		if s.v4 != a.PrimaryIP {
			drop = append(drop, s)
		}
	}
	p.unassignLocked(e, drop)
	p.mu.Unlock()
	h.until("the unassign to fail", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return !e.busy })

	p.mu.Lock()
	for _, s := range drop {
		if !s.unsure || s.releasing {
			t.Errorf("%s after an unconfirmed failed unassign: unsure %v, releasing %v; want unsure", s.v4, s.unsure, s.releasing)
		}
	}
	var took []netip.Addr
	for _, owner := range []string{"ns/a", "ns/b"} {
		if s := p.takeIdleLocked(owner); s != nil {
			took = append(took, s.v4)
		}
	}
	p.mu.Unlock()
	if !slices.Equal(took, []netip.Addr{a.PrimaryIP}) {
		t.Fatalf("pods got %v, want only the primary %s: the others are unsure", took, a.PrimaryIP)
	}

	// The cloud had applied part of it: the first secondary is gone.
	gone := a.IPv4[0]
	h.cloud.set(func(m *memCloud) {
		clear(m.failAlways)
		m.enis[a.ID].IPv4 = slices.DeleteFunc(m.enis[a.ID].IPv4, func(x netip.Addr) bool { return x == gone })
	})
	p.sync(context.Background())
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.findLocked(a.ID, gone); s != nil {
		t.Errorf("%s, which the cloud took back, is still in the pool", gone)
	}
	for _, x := range a.IPv4[1:] {
		if s := p.findLocked(a.ID, x); s == nil || s.unsure || !s.idle() {
			t.Errorf("%s, still assigned, is not idle again after the sync: %+v", x, s)
		}
	}
}
