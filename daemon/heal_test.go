package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/terway-sim/terway/daemon/ipam"
	"github.com/terway-sim/terway/internal/testwait"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/rpc"
)

// healLab is a lab whose daemon's heal loop stays quiet (the test runs
// the rounds), with an operator that changes the cloud out of band
// through the SDK, and the evictions the daemon asks for.
type healLab struct {
	*lab
	op *chaos.SDKOperator
	mu sync.Mutex
	// evicted lists the pods the daemon asked to evict, in order.
	evicted []string
}

func newHealLab(t *testing.T) *healLab {
	l := newLab(t)
	// The pool's own sync runs (it adopts addresses the cloud assigns to
	// the node); the heal rounds are the test's.
	l.conf = strings.Replace(l.conf, `"gc_period":"1h",`, `"gc_period":"1h","pool_heal_period":"1h",`, 1)
	l.conf = strings.Replace(l.conf, `"pool_check_period":"1h"`, `"pool_check_period":"200ms"`, 1)
	if !strings.Contains(l.conf, "pool_heal_period") || !strings.Contains(l.conf, `"pool_check_period":"200ms"`) {
		t.Fatalf("the lab's eni_conf changed shape:\n%s", l.conf)
	}
	op, err := chaos.NewSDKOperator(chaos.OperatorOptions{Endpoint: l.apiURL, Region: "cn-hangzhou",
		AccessKeyID: testAK, AccessKeySecret: testSK})
	if err != nil {
		t.Fatal(err)
	}
	h := &healLab{lab: l, op: op}
	// The Eviction API as the API server serves it: the pod goes.
	l.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ns, name := a.GetNamespace(), a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		h.mu.Lock()
		h.evicted = append(h.evicted, ns+"/"+name)
		h.mu.Unlock()
		return true, nil, nil
	})
	return h
}

func (h *healLab) evictions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.evicted)
}

// healDaemon starts the lab's daemon with a registry for its metrics.
func (h *healLab) healDaemon() (*Daemon, rpc.TerwayBackendClient, *prometheus.Registry, func()) {
	reg := prometheus.NewRegistry()
	d, c, stop := h.daemon(func(o *Options) { o.Registerer = reg })
	return d, c, reg, stop
}

// rounds runs heal rounds until done says so (at most 40), returning
// every heal.
func rounds(t *testing.T, d *Daemon, what string, done func([]ipam.Heal) bool) []ipam.Heal {
	t.Helper()
	var all []ipam.Heal
	for range 40 {
		all = append(all, d.heal(ctxT(t), d.pool.(ipam.Healer))...)
		if done(all) {
			return all
		}
	}
	t.Fatalf("%s: not after 40 heal rounds; heals: %+v", what, all)
	return nil
}

func outcomes(hs []ipam.Heal) []string {
	var out []string
	for _, x := range hs {
		if x.Outcome != "" {
			out = append(out, fmt.Sprintf("%s %s %s", x.Outcome, x.Owner, x.IPv4))
		}
	}
	slices.Sort(out)
	return out
}

func heals(reg *prometheus.Registry, outcome string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "terway_pool_heals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "outcome" && lp.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// podsOn starts n pods and allocates their addresses; it returns pod key
// → address.
func (h *healLab) podsOn(t *testing.T, c rpc.TerwayBackendClient, n int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("p%d", i)
		h.pod("ns", name, nil)
		out["ns/"+name] = podIP(allocOK(t, c, "ns", name, "c"+name))
	}
	return out
}

// eniOf is the ENI the daemon's pool has owner's address on.
func eniOf(t *testing.T, d *Daemon, owner string) string {
	t.Helper()
	g, ok := d.holds(owner)
	if !ok {
		t.Fatalf("the pool holds nothing for %s", owner)
	}
	return g.ip.ENIID
}

// cloudHas reports whether the cloud assigns ip to eni.
func (h *healLab) cloudHas(eni, ip string) bool {
	v, ok := h.cloud.ENI(eni)
	if !ok {
		return false
	}
	a := netip.MustParseAddr(ip)
	return v.PrimaryIP == a || slices.Contains(v.IPv4, a)
}

// TestHealReassignsAnUnassignedAddress: an address an operator unassigns
// while its pod uses it (the ENI still attached) is assigned back to the
// same ENI; the pod keeps it, is not evicted, and metadata shows it
// again. Nothing happens in the first round: the heal acts only on what
// two rounds saw.
func TestHealReassignsAnUnassignedAddress(t *testing.T) {
	h := newHealLab(t)
	d, c, reg, _ := h.healDaemon()
	pods := h.podsOn(t, c, 3)
	eni := eniOf(t, d, "ns/p1")
	ip := netip.MustParseAddr(pods["ns/p1"])
	if got := d.heal(ctxT(t), d.pool.(ipam.Healer)); len(outcomes(got)) != 0 {
		t.Fatalf("heals with nothing changed out of band: %v", outcomes(got))
	}
	if err := h.op.UnassignIPs(ctxT(t), eni, []netip.Addr{ip}); err != nil {
		t.Fatal(err)
	}
	if h.cloudHas(eni, ip.String()) {
		t.Fatal("the operator's unassign did not take")
	}
	first := d.heal(ctxT(t), d.pool.(ipam.Healer))
	if len(outcomes(first)) != 0 {
		t.Fatalf("the heal acted on a difference seen once: %v", outcomes(first))
	}
	all := rounds(t, d, "the address assigned back", func(hs []ipam.Heal) bool { return len(outcomes(hs)) > 0 })
	if got, want := outcomes(all), []string{"reassigned ns/p1 " + ip.String()}; !slices.Equal(got, want) {
		t.Fatalf("heals %v, want %v", got, want)
	}
	if !h.cloudHas(eni, ip.String()) {
		t.Fatalf("the cloud does not assign %s to %s after the heal", ip, eni)
	}
	meta, err := d.node.IPv4s(ctxT(t), mustMAC(t, h, eni))
	if err != nil || !slices.Contains(meta, ip) {
		t.Fatalf("metadata shows %v on %s (%v), want %s among them", meta, eni, err, ip)
	}
	if g, ok := d.holds("ns/p1"); !ok || g.ip.IPv4 != ip || g.ip.ENIID != eni {
		t.Fatalf("p1 holds %+v after the heal, want %s on %s", g.ip, ip, eni)
	}
	if ev := h.evictions(); len(ev) != 0 {
		t.Fatalf("evicted %v for an address that was assigned back", ev)
	}
	if n := heals(reg, ipam.HealReassigned); n != 1 {
		t.Fatalf("terway_pool_heals_total{outcome=reassigned} = %v, want 1", n)
	}
	// Quiet again: later rounds find nothing.
	if got := outcomes(d.heal(ctxT(t), d.pool.(ipam.Healer))); len(got) != 0 {
		t.Fatalf("heals after the heal: %v", got)
	}
}

func mustMAC(t *testing.T, h *healLab, eni string) string {
	t.Helper()
	v, ok := h.cloud.ENI(eni)
	if !ok {
		t.Fatalf("no ENI %s", eni)
	}
	return v.MAC
}

// TestHealENIDetachedOutOfBand: an ENI an operator detaches while pods
// use it: its pods' addresses are lost — the claims are kept, the pods
// evicted with a ResourceLost event, the addresses never handed to
// another pod — and the ENI, ours, is kept (not swept) until its pods are
// gone, then deleted.
func TestHealENIDetachedOutOfBand(t *testing.T) {
	testENIGoneOutOfBand(t, false)
}

// TestHealENIDeletedOutOfBand: as TestHealENIDetachedOutOfBand, the ENI
// deleted by the operator (detached, then deleted, as the console does).
func TestHealENIDeletedOutOfBand(t *testing.T) {
	testENIGoneOutOfBand(t, true)
}

func testENIGoneOutOfBand(t *testing.T, deleted bool) {
	h := newHealLab(t)
	d, c, reg, _ := h.healDaemon()
	pods := h.podsOn(t, c, 3)
	// Settled first: the heal acts only on what two rounds saw with no
	// call of the pool in between, and the rounds below run back to back.
	h.settle(d)
	eni := eniOf(t, d, "ns/p0")
	var onENI []string
	lostIPs := map[string]bool{}
	for k, ip := range pods {
		if eniOf(t, d, k) == eni {
			onENI = append(onENI, k)
			lostIPs[ip] = true
		}
	}
	slices.Sort(onENI)
	if deleted {
		if err := h.op.DeleteENI(ctxT(t), eni); err != nil {
			t.Fatal(err)
		}
	} else if err := h.op.DetachENI(ctxT(t), eni, node1); err != nil {
		t.Fatal(err)
	}
	all := rounds(t, d, "the pods' addresses lost", func(hs []ipam.Heal) bool { return len(outcomes(hs)) >= len(onENI) })
	var want []string
	for _, k := range onENI {
		want = append(want, fmt.Sprintf("lost %s %s", k, pods[k]))
	}
	slices.Sort(want)
	if got := outcomes(all); !slices.Equal(got, want) {
		t.Fatalf("heals %v, want %v", got, want)
	}
	if n := heals(reg, ipam.HealLost); n != float64(len(onENI)) {
		t.Fatalf("terway_pool_heals_total{outcome=lost} = %v, want %d", n, len(onENI))
	}
	if ev := h.evictions(); !slices.Equal(sortedCopy(ev), onENI) {
		t.Fatalf("evicted %v, want %v", ev, onENI)
	}
	for _, k := range onENI {
		if g, ok := d.holds(k); !ok || g.ip.IPv4.String() != pods[k] {
			t.Fatalf("the claim of %s on %s was not kept (%+v, %v)", k, pods[k], g.ip, ok)
		}
	}
	// Nobody else gets a lost address, and the ENI is not swept while
	// claims name it.
	for i := range 12 {
		name := fmt.Sprintf("n%d", i)
		h.pod("ns", name, nil)
		if ip := podIP(allocOK(t, c, "ns", name, "c"+name)); lostIPs[ip] {
			t.Fatalf("%s got %s, which a pod still holds (lost out of band)", name, ip)
		}
	}
	withheld := 0
	for _, a := range d.pool.Addresses() {
		if lostIPs[a.IP.IPv4.String()] && a.Owner == "" {
			withheld++ // the cloud gave it back to the node: idle, and nobody's
		}
	}
	if deleted {
		// The operator assigns a lost address to another ENI of the
		// node (the cloud may hand it out again: its ENI is gone). The
		// pool's sync adopts it, idle, and still nobody gets it.
		var other string
		for _, a := range d.pool.Addresses() {
			if a.IP.ENIID != eni {
				other = a.IP.ENIID
			}
		}
		lost := netip.MustParseAddr(pods[onENI[0]])
		if err := d.node.API.AssignIPv4Addrs(ctxT(t), other, []netip.Addr{lost}); err != nil {
			t.Fatalf("the operator's assign of %s to %s: %v", lost, other, err)
		}
		testwait.Until(t, waitLimit, "the pool to adopt "+lost.String(), func() bool {
			return slices.ContainsFunc(d.pool.Addresses(), func(a ipam.Address) bool { return a.IP.IPv4 == lost && a.IP.ENIID == other })
		})
		withheld++
		for i := range 8 {
			name := fmt.Sprintf("m%d", i)
			h.pod("ns", name, nil)
			if ip := podIP(allocOK(t, c, "ns", name, "c"+name)); lostIPs[ip] {
				t.Fatalf("%s got %s, which %s still holds (lost out of band, then assigned to the node again)", name, ip, onENI[0])
			}
		}
	}
	t.Logf("lost addresses the cloud assigned to the node again and the pool withheld: %d", withheld)
	if err := d.GC(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.cloud.ENI(eni); !ok && !deleted {
		t.Fatalf("the detached ENI %s was deleted while pods still held its addresses", eni)
	}
	// The pods go (evicted: the kubelet's DEL, then the pod object).
	for _, k := range onENI {
		h.podGone(t, c, k)
	}
	if lost := d.pool.(ipam.Healer).LostOwners(); len(lost) != 0 {
		t.Fatalf("lost claims left after their pods went: %v", lost)
	}
	if !deleted {
		rounds(t, d, "the detached ENI deleted", func([]ipam.Heal) bool { _, ok := h.cloud.ENI(eni); return !ok })
		if n := heals(reg, ipam.HealENIDeleted); n != 1 {
			t.Fatalf("terway_pool_heals_total{outcome=eni_deleted} = %v, want 1", n)
		}
	}
	evs := podEventsOf(t, h.lab, ReasonResourceLost, len(onENI))
	if len(evs) != len(onENI) {
		t.Fatalf("%d ResourceLost pod events, want %d: %v", len(evs), len(onENI), evs)
	}
}

// podGone ends the pod owner ("ns/name", sandbox "c<name>") as an
// eviction does: the kubelet's DEL, then the pod object.
func (h *healLab) podGone(t *testing.T, c rpc.TerwayBackendClient, owner string) {
	t.Helper()
	ns, name, _ := strings.Cut(owner, "/")
	if _, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: ns, K8SPodName: name, K8SPodInfraContainerId: "c" + name}); err != nil {
		t.Fatal(err)
	}
	h.deletePod(ns, name)
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// podEventsOf lists the events about pods with reason.
func podEventsOf(t *testing.T, l *lab, reason string, n int) []string {
	t.Helper()
	var out []string
	testwait.Until(t, waitLimit, reason+" pod events", func() bool {
		evs, err := l.kube.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = out[:0]
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Pod" && e.Reason == reason {
				out = append(out, e.InvolvedObject.Name)
			}
		}
		return len(out) >= n
	})
	return out
}

// TestHealNoFalseHealAcrossRestart: a daemon restarted with pods running
// (a heal round seen before the stop) finds nothing to heal: the heal
// starts from what the new daemon restored, never from what it could not
// yet know.
func TestHealNoFalseHealAcrossRestart(t *testing.T) {
	h := newHealLab(t)
	d, c, _, stop := h.healDaemon()
	pods := h.podsOn(t, c, 6)
	if got := outcomes(d.heal(ctxT(t), d.pool.(ipam.Healer))); len(got) != 0 {
		t.Fatalf("heals with nothing changed out of band: %v", got)
	}
	stop()
	d2, c2, reg, _ := h.healDaemon()
	for range 5 {
		if got := outcomes(d2.heal(ctxT(t), d2.pool.(ipam.Healer))); len(got) != 0 {
			t.Fatalf("heals after a restart with nothing changed out of band: %v", got)
		}
	}
	// A burst in flight while the rounds run: new addresses, new ENIs.
	var wg sync.WaitGroup
	for i := range 20 {
		name := fmt.Sprintf("b%d", i)
		h.pod("ns", name, nil)
		wg.Add(1)
		go func() { defer wg.Done(); allocOK(t, c2, "ns", name, "c"+name) }()
	}
	for range 5 {
		if got := outcomes(d2.heal(ctxT(t), d2.pool.(ipam.Healer))); len(got) != 0 {
			t.Fatalf("heals during a burst with nothing changed out of band: %v", got)
		}
	}
	wg.Wait()
	if got := outcomes(d2.heal(ctxT(t), d2.pool.(ipam.Healer))); len(got) != 0 {
		t.Fatalf("heals after a burst with nothing changed out of band: %v", got)
	}
	for k, ip := range pods {
		if g, ok := d2.holds(k); !ok || g.ip.IPv4.String() != ip {
			t.Fatalf("%s lost %s across the restart", k, ip)
		}
	}
	if ev := h.evictions(); len(ev) != 0 || heals(reg, ipam.HealLost)+heals(reg, ipam.HealReassigned) != 0 {
		t.Fatalf("false heal: evicted %v", ev)
	}
}

// TestHealIdleENIGoneOutOfBand: an idle ENI (its pods gone, its
// addresses kept warm) that an operator deletes is dropped from the pool
// by the heal, well before the pool's sync (pool_check_period, two
// minutes by default; here never) would: nothing is evicted and no
// address of it is handed out.
func TestHealIdleENIGoneOutOfBand(t *testing.T) {
	h := newHealLab(t)
	h.conf = strings.Replace(h.conf, `"pool_check_period":"200ms"`, `"pool_check_period":"1h"`, 1)
	d, c, reg, _ := h.healDaemon()
	pods := h.podsOn(t, c, 3)
	eni := eniOf(t, d, "ns/p0")
	gone := map[string]bool{}
	for _, a := range d.pool.Addresses() {
		if a.IP.ENIID == eni {
			gone[a.IP.IPv4.String()] = true
		}
	}
	for k := range pods {
		if eniOf(t, d, k) != eni {
			continue
		}
		h.podGone(t, c, k)
	}
	if err := h.op.DeleteENI(ctxT(t), eni); err != nil {
		t.Fatal(err)
	}
	all := rounds(t, d, "the idle ENI forgotten", func(hs []ipam.Heal) bool { return len(outcomes(hs)) > 0 })
	if len(all) != 1 || all[0].Outcome != ipam.HealENIForgotten || all[0].ENIID != eni {
		t.Fatalf("heals %+v, want one %s of %s", all, ipam.HealENIForgotten, eni)
	}
	if n := heals(reg, ipam.HealENIForgotten); n != 1 {
		t.Fatalf("terway_pool_heals_total{outcome=eni_forgotten} = %v, want 1", n)
	}
	for _, a := range d.pool.Addresses() {
		if a.IP.ENIID == eni {
			t.Fatalf("the pool still holds %s on %s, which the operator deleted", a.IP.IPv4, eni)
		}
	}
	if ev := h.evictions(); len(ev) != 0 {
		t.Fatalf("evicted %v for an idle ENI", ev)
	}
	for i := range 6 {
		name := fmt.Sprintf("n%d", i)
		h.pod("ns", name, nil)
		if ip := podIP(allocOK(t, c, "ns", name, "c"+name)); gone[ip] {
			t.Fatalf("%s got %s, an address of the deleted ENI %s", name, ip, eni)
		}
	}
}

// TestHealLostAcrossRestart: an ENI an operator deletes while the daemon
// is down takes its pods' addresses with it. The restarted daemon finds
// those holdings on no ENI (Restore: broken) and keeps their claims as
// lost: it evicts the pods, and no other pod gets their addresses, also
// when the cloud assigns one of them to the node again.
func TestHealLostAcrossRestart(t *testing.T) {
	h := newHealLab(t)
	d, c, _, stop := h.healDaemon()
	pods := h.podsOn(t, c, 3)
	eni := eniOf(t, d, "ns/p0")
	var onENI []string
	for k := range pods {
		if eniOf(t, d, k) == eni {
			onENI = append(onENI, k)
		}
	}
	slices.Sort(onENI)
	stop()
	if err := h.op.DeleteENI(ctxT(t), eni); err != nil {
		t.Fatal(err)
	}
	d2, c2, _, _ := h.healDaemon()
	for _, k := range onENI {
		if g, ok := d2.holds(k); !ok || g.ip.IPv4.String() != pods[k] {
			t.Fatalf("the claim of %s on %s was dropped at the restart (%+v, %v)", k, pods[k], g.ip, ok)
		}
	}
	if lost := d2.pool.(ipam.Healer).LostOwners(); !slices.Equal(lost, onENI) {
		t.Fatalf("lost owners %v, want %v", lost, onENI)
	}
	rounds(t, d2, "the pods evicted", func([]ipam.Heal) bool { return len(h.evictions()) >= len(onENI) })
	if ev := sortedCopy(h.evictions()); !slices.Equal(ev, onENI) {
		t.Fatalf("evicted %v, want %v", ev, onENI)
	}
	// Until the eviction lands, kubelet may try a new sandbox: it is
	// refused, not given an address no ENI of the node holds.
	ns0, name0, _ := strings.Cut(onENI[0], "/")
	if _, err := alloc(t, c2, ns0, name0, "c-again"); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "lost out of band") {
		t.Fatalf("a new sandbox of %s, whose address is lost: %v, want FailedPrecondition saying it was lost", onENI[0], err)
	}
	// New pods on a new ENI; then the cloud hands a lost address to the
	// node again (an operator assigns it to that ENI): the pool adopts
	// it, and nobody gets it.
	lost := netip.MustParseAddr(pods[onENI[0]])
	for i := range 2 {
		name := fmt.Sprintf("n%d", i)
		h.pod("ns", name, nil)
		allocOK(t, c2, "ns", name, "c"+name)
	}
	other := eniOf(t, d2, "ns/n0")
	if err := d2.node.API.AssignIPv4Addrs(ctxT(t), other, []netip.Addr{lost}); err != nil {
		t.Fatalf("the operator's assign of %s to %s: %v", lost, other, err)
	}
	testwait.Until(t, waitLimit, "the pool to adopt "+lost.String(), func() bool {
		return slices.ContainsFunc(d2.pool.Addresses(), func(a ipam.Address) bool { return a.IP.IPv4 == lost && a.IP.ENIID == other })
	})
	for i := range 8 {
		name := fmt.Sprintf("m%d", i)
		h.pod("ns", name, nil)
		if ip := podIP(allocOK(t, c2, "ns", name, "c"+name)); ip == lost.String() {
			t.Fatalf("%s got %s, which %s still holds (lost while the daemon was down)", name, ip, onENI[0])
		}
	}
	for _, k := range onENI {
		h.podGone(t, c2, k)
	}
	if lost := d2.pool.(ipam.Healer).LostOwners(); len(lost) != 0 {
		t.Fatalf("lost claims left after their pods went: %v", lost)
	}
}
