package ipam

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"
)

type res struct{ claim }

// The shared bookkeeping: take, sticky release, expiry, cooldown,
// reassign and forget.
func TestHoldings(t *testing.T) {
	now := policyEpoch
	h := holdings[*res]{}
	a, b := &res{}, &res{}
	h.take(a, "ns/a")
	h.take(b, "ns/b")
	if ok, _ := a.availableTo("ns/c", now, 0); ok {
		t.Fatal("an address in use is available")
	}
	h.release("ns/a", now.Add(time.Minute), now)
	if ok, own := a.availableTo("ns/a", now, time.Hour); !ok || !own {
		t.Fatal("a reservation is not its owner's at once")
	}
	if ok, _ := a.availableTo("ns/c", now, 0); ok || !a.reserved(now) {
		t.Fatal("a reservation is available to another owner")
	}
	later := now.Add(time.Minute)
	if ok, _ := a.availableTo("ns/c", later, 0); !ok {
		t.Fatal("an expired reservation is not available")
	}
	if ok, _ := a.availableTo("ns/c", later, 2*time.Minute); ok {
		t.Fatal("an expired reservation is available before the cooldown since its release")
	}
	h.take(a, "ns/c")
	if _, ok := h["ns/a"]; ok || h["ns/c"] != a {
		t.Fatalf("taking an expired reservation: %v", h.owners())
	}
	if h.reassign("ns/c", "ns/b") || !h.reassign("ns/c", "ns/d") || h["ns/d"] != a || a.owner != "ns/d" {
		t.Fatalf("reassign: %v", h.owners())
	}
	h.release("ns/b", time.Time{}, later)
	if b.owner != "" || b.releasedAt != later {
		t.Fatalf("release: %+v", b.claim)
	}
	h.forget(a)
	if got := h.owners(); len(got) != 0 {
		t.Fatalf("owners after forget: %v", got)
	}
}

// The podCIDR cools a released address down and keeps a sticky one for
// its owner.
func TestPolicyPodCIDRCooldownAndSticky(t *testing.T) {
	h := newPolicy(t)
	p, err := NewPodCIDR(netip.MustParsePrefix("172.20.1.0/30"), time.Minute, h.clk) // .1 and .2
	if err != nil {
		t.Fatal(err)
	}
	alloc := func(_ context.Context, o string) (IP, error) { return p.Allocate(o) }
	a := h.mustAllocate(alloc, "ns/a")
	b := h.mustAllocate(alloc, "ns/b")
	p.Release("ns/a", time.Time{})
	p.Release("ns/b", h.clk.Now().Add(time.Hour))
	if err := h.allocateErr(alloc, "ns/c"); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("got %v, want ErrNoCapacity while one cools and one is reserved", err)
	}
	if again := h.mustAllocate(alloc, "ns/b"); again.IPv4 != b.IPv4 {
		t.Fatalf("ns/b got %s back, want %s", again.IPv4, b.IPv4)
	}
	h.clk.Step(time.Minute)
	if c := h.mustAllocate(alloc, "ns/c"); c.IPv4 != a.IPv4 {
		t.Fatalf("ns/c got %s, want the cooled %s", c.IPv4, a.IPv4)
	}
	if got := p.Owners(); !slices.Equal(got, []string{"ns/b", "ns/c"}) {
		t.Fatalf("owners %v", got)
	}
}

// VPC mode: podCIDR addresses by default, whole ENIs when asked; restore
// splits the holdings by podCIDR membership; release reaches both.
func TestPolicyVPC(t *testing.T) {
	h := newPolicy(t)
	cidr, err := NewPodCIDR(netip.MustParsePrefix("172.20.1.0/24"), 0, h.clk)
	if err != nil {
		t.Fatal(err)
	}
	e := h.cloud.addENI(t, 1)
	cfg := h.eniPoolConfig()
	cfg.MaxIdle = 3 // released ENIs stay
	v := NewVPC(cidr, h.eniPool(cfg))
	h.t.Cleanup(v.Close)
	rep, err := v.Restore(context.Background(), []Holding{
		{Owner: "ns/cidr", IPv4: netip.MustParseAddr("172.20.1.7")},
		held("ns/eni", e, 0),
		{Owner: "ns/gone", IPv4: netip.MustParseAddr("192.168.9.9")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ENIs != 1 || len(rep.Broken) != 1 || rep.Broken[0].Owner != "ns/gone" {
		t.Fatalf("restore: %+v", rep)
	}
	h.run(v.Run)
	if ip, ok := v.Holds("ns/eni"); !ok || ip.ENIID != e.ID {
		t.Fatalf("ns/eni holds %+v", ip)
	}
	if ip := h.mustAllocate(v.Allocate, "ns/pod"); ip.ENIID != "" || !cidr.Contains(ip.IPv4) {
		t.Fatalf("a pod got %+v, want a podCIDR address", ip)
	}
	if ip := h.mustAllocate(v.AllocateENI, "ns/x"); ip.ENIID == "" {
		t.Fatalf("an exclusive-ENI pod got %+v, want an ENI", ip)
	}
	if got := v.Owners(); !slices.Equal(got, []string{"ns/cidr", "ns/pod", "ns/eni", "ns/x"}) {
		t.Fatalf("owners %v", got)
	}
	v.Release("ns/eni", time.Time{})
	v.Release("ns/cidr", time.Time{})
	if st := v.Stats(); st.InUse != 1 || st.ENIs != 2 {
		t.Fatalf("stats %+v, want one podCIDR address in use and two ENIs", st)
	}
	if _, err := NewVPC(cidr, nil).AllocateENI(context.Background(), "ns/y"); !errors.Is(err, ErrNoExclusiveENI) {
		t.Fatalf("got %v, want ErrNoExclusiveENI", err)
	}
}
