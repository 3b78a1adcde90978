package ipam

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/internal/testwait"
)

// memCloud is an in-memory Cloud for pool-policy tests: ENIs are attached
// and shown in metadata at once, the vSwitch has a bounded number of free
// addresses, the instance a bounded number of secondary ENIs; errors are
// injected per call, calls are counted and their sizes recorded, and a
// call can be held until the test lets it go.
type memCloud struct {
	mu       sync.Mutex
	enis     map[string]*cloud.ENI
	seq      int
	last     netip.Addr // the last address handed out
	free     int        // addresses the vSwitch has left
	eniLimit int        // secondary ENIs the instance may have; 0: no limit
	// fail holds the errors the next calls of an action return, in turn;
	// failAlways an error every call returns.
	fail       map[string][]error
	failAlways map[string]error
	calls      map[string]int
	// sizes records how many addresses each Assign, Unassign or
	// AllocateENI call asked for.
	sizes map[string][]int
	// hold, when set for an action, blocks its calls until closed.
	hold map[string]chan struct{}
}

const (
	memInstance = "i-policy"
	memVSwitch  = "vsw-policy"
)

var memTags = map[string]string{"creator": "terway"}

func newMemCloud() *memCloud {
	return &memCloud{enis: map[string]*cloud.ENI{}, last: netip.MustParseAddr("192.168.0.9"), free: 1000,
		fail: map[string][]error{}, failAlways: map[string]error{}, calls: map[string]int{}, sizes: map[string][]int{},
		hold: map[string]chan struct{}{}}
}

// apiError is an answer of the cloud with code, as the SDK returns it.
func apiError(code string) error {
	return sdkerrors.NewServerError(400, fmt.Sprintf(`{"Code":%q,"Message":"injected"}`, code), "")
}

// call counts action, waits while it is held (or until ctx ends) and
// returns its injected error, if any. It locks m.mu for the caller.
func (m *memCloud) call(ctx context.Context, action string, size int) error {
	m.mu.Lock()
	m.calls[action]++
	if size >= 0 {
		m.sizes[action] = append(m.sizes[action], size)
	}
	h := m.hold[action]
	m.mu.Unlock()
	if h != nil {
		select {
		case <-h:
		case <-ctx.Done():
			m.mu.Lock()
			return ctx.Err()
		}
	}
	m.mu.Lock()
	if err := m.failAlways[action]; err != nil {
		return err
	}
	if q := m.fail[action]; len(q) > 0 {
		m.fail[action] = q[1:]
		return q[0]
	}
	return nil
}

// callENI is call for an action on the ENI id, which it returns: the
// cloud answers ENINotFound for an ENI it does not have. It locks m.mu
// for the caller.
func (m *memCloud) callENI(ctx context.Context, action, id string, size int) (*cloud.ENI, error) {
	if err := m.call(ctx, action, size); err != nil {
		return nil, err
	}
	if e := m.enis[id]; e != nil {
		return e, nil
	}
	return nil, apiError(cloud.CodeENINotFound)
}

func (m *memCloud) count(action string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[action]
}

func (m *memCloud) sizesOf(action string) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sizes[action])
}

func (m *memCloud) set(f func(m *memCloud)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

// addrsLocked takes n addresses of the vSwitch.
func (m *memCloud) addrsLocked(n int) ([]netip.Addr, error) {
	if n > m.free {
		return nil, apiError(cloud.CodeIPNotEnough)
	}
	m.free -= n
	out := make([]netip.Addr, n)
	for i := range out {
		m.last = m.last.Next()
		out[i] = m.last
	}
	return out, nil
}

// newENILocked attaches a new ENI of ours with n addresses.
func (m *memCloud) newENILocked(n, v6 int, tags map[string]string) (*cloud.ENI, error) {
	if m.eniLimit > 0 && len(m.enis) >= m.eniLimit {
		return nil, apiError(cloud.CodeENIPerInstanceLimit)
	}
	v4, err := m.addrsLocked(n)
	if err != nil {
		return nil, err
	}
	m.seq++
	e := &cloud.ENI{ID: fmt.Sprintf("eni-%d", m.seq), MAC: fmt.Sprintf("02:00:00:00:00:%02x", m.seq), Type: "Secondary",
		Status: cloud.StatusInUse, VSwitchID: memVSwitch, InstanceID: memInstance, PrimaryIP: v4[0], IPv4: v4[1:],
		Tags: maps.Clone(tags)}
	for i := range v6 {
		e.IPv6 = append(e.IPv6, netip.AddrFrom16([16]byte{0: 0xfd, 14: byte(m.seq), 15: byte(i + 1)}))
	}
	m.enis[e.ID] = e
	return e, nil
}

// addENI attaches an ENI of ours with n addresses, as a previous daemon
// left it.
func (m *memCloud) addENI(t *testing.T, n int) cloud.ENI {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.newENILocked(n, 0, memTags)
	if err != nil {
		t.Fatal(err)
	}
	return copyENI(e)
}

func copyENI(e *cloud.ENI) cloud.ENI {
	c := *e
	c.IPv4, c.IPv6, c.Tags = slices.Clone(e.IPv4), slices.Clone(e.IPv6), maps.Clone(e.Tags)
	return c
}

func metaOf(e *cloud.ENI) cloud.ENIMeta {
	return cloud.ENIMeta{ID: e.ID, MAC: e.MAC, PrimaryIP: e.PrimaryIP, IPv4: append([]netip.Addr{e.PrimaryIP}, e.IPv4...),
		IPv6: slices.Clone(e.IPv6), Gateway: netip.MustParseAddr("192.168.0.253"), VSwitchID: e.VSwitchID,
		CIDR: netip.MustParsePrefix("192.168.0.0/16")}
}

func (m *memCloud) InstanceID() string { return memInstance }

func (m *memCloud) AllocateENI(ctx context.Context, r cloud.CreateENIRequest) (cloud.ReadyENI, error) {
	err := m.call(ctx, "AllocateENI", r.SecondaryIPv4+1)
	defer m.mu.Unlock()
	if err != nil {
		return cloud.ReadyENI{}, err
	}
	e, err := m.newENILocked(r.SecondaryIPv4+1, r.IPv6, r.Tags)
	if err != nil {
		return cloud.ReadyENI{}, err
	}
	if r.OnCreated != nil {
		r.OnCreated(e.ID)
	}
	return cloud.ReadyENI{ENI: copyENI(e), Meta: metaOf(e)}, nil
}

func (m *memCloud) ReleaseENI(ctx context.Context, id string) error {
	err := m.call(ctx, "ReleaseENI", -1)
	defer m.mu.Unlock()
	if err != nil {
		return err
	}
	if e := m.enis[id]; e != nil {
		m.free += 1 + len(e.IPv4)
		delete(m.enis, id)
	}
	return nil
}

func (m *memCloud) AssignIPv4(ctx context.Context, _ string, meta cloud.ENIMeta, n int) ([]netip.Addr, error) {
	e, err := m.callENI(ctx, "AssignIPv4", meta.ID, n)
	defer m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	v4, err := m.addrsLocked(n)
	if err != nil {
		return nil, err
	}
	e.IPv4 = append(e.IPv4, v4...)
	return v4, nil
}

func (m *memCloud) AssignIPv4Addrs(ctx context.Context, meta cloud.ENIMeta, ips []netip.Addr) error {
	e, err := m.callENI(ctx, "AssignIPv4Addrs", meta.ID, len(ips))
	defer m.mu.Unlock()
	if err != nil {
		return err
	}
	e.IPv4 = append(e.IPv4, ips...)
	m.free -= len(ips)
	return nil
}

func (m *memCloud) AssignIPv6(ctx context.Context, _ string, meta cloud.ENIMeta, n int) ([]netip.Addr, error) {
	e, err := m.callENI(ctx, "AssignIPv6", meta.ID, n)
	defer m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for range n {
		m.last = m.last.Next()
		b := m.last.As4()
		out = append(out, netip.AddrFrom16([16]byte{0: 0xfd, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}))
	}
	e.IPv6 = append(e.IPv6, out...)
	return out, nil
}

func (m *memCloud) UnassignIPv4(ctx context.Context, id string, ips []netip.Addr) error {
	return m.unassign(ctx, "UnassignIPv4", id, ips, false)
}

func (m *memCloud) UnassignIPv6(ctx context.Context, id string, ips []netip.Addr) error {
	return m.unassign(ctx, "UnassignIPv6", id, ips, true)
}

// unassign drops ips from ENI id's IPv4 or (v6) IPv6 addresses: a no-op
// for an ENI the cloud does not have.
func (m *memCloud) unassign(ctx context.Context, action, id string, ips []netip.Addr, v6 bool) error {
	err := m.call(ctx, action, len(ips))
	defer m.mu.Unlock()
	e := m.enis[id]
	if err != nil || e == nil {
		return err
	}
	gone := func(a netip.Addr) bool { return slices.Contains(ips, a) }
	if v6 {
		e.IPv6 = slices.DeleteFunc(e.IPv6, gone)
		return nil
	}
	e.IPv4 = slices.DeleteFunc(e.IPv4, gone)
	m.free += len(ips) // only IPv4 addresses come out of the vSwitch's free count
	return nil
}

func (m *memCloud) DescribeENI(ctx context.Context, id string) (cloud.ENI, error) {
	e, err := m.callENI(ctx, "DescribeENI", id, -1)
	defer m.mu.Unlock()
	if err != nil {
		return cloud.ENI{}, err
	}
	return copyENI(e), nil
}

func (m *memCloud) DescribeENIs(ctx context.Context, f cloud.ENIFilter) ([]cloud.ENI, error) {
	err := m.call(ctx, "DescribeENIs", -1)
	defer m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []cloud.ENI
	for _, e := range m.enis {
		if (f.InstanceID == "" || e.InstanceID == f.InstanceID) && (f.Status == "" || e.Status == f.Status) &&
			cloud.HasTags(e.Tags, f.Tags) {
			out = append(out, copyENI(e))
		}
	}
	slices.SortFunc(out, func(a, b cloud.ENI) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (m *memCloud) WaitENIStatus(ctx context.Context, id string, _ ...string) (cloud.ENI, error) {
	return m.DescribeENI(ctx, id)
}

func (m *memCloud) DeleteENI(ctx context.Context, id string) error {
	err := m.call(ctx, "DeleteENI", -1)
	defer m.mu.Unlock()
	if err != nil {
		return err
	}
	delete(m.enis, id)
	return nil
}

func (m *memCloud) DescribeVSwitch(ctx context.Context, id string) (cloud.VSwitch, error) {
	err := m.call(ctx, "DescribeVSwitch", -1)
	defer m.mu.Unlock()
	return cloud.VSwitch{ID: id, Available: m.free}, err
}

func (m *memCloud) byMACLocked(mac string) *cloud.ENI {
	for _, e := range m.enis {
		if e.MAC == mac {
			return e
		}
	}
	return nil
}

func (m *memCloud) WaitMetadata(ctx context.Context, mac string, _, _ []netip.Addr) (cloud.ENIMeta, error) {
	err := m.call(ctx, "WaitMetadata", -1)
	defer m.mu.Unlock()
	if err != nil {
		return cloud.ENIMeta{}, err
	}
	e := m.byMACLocked(mac)
	if e == nil {
		return cloud.ENIMeta{}, fmt.Errorf("metadata: %w", cloud.ErrNotFound)
	}
	return metaOf(e), nil
}

func (m *memCloud) MACs(ctx context.Context) ([]string, error) {
	err := m.call(ctx, "MACs", -1)
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.enis {
		out = append(out, e.MAC)
	}
	return out, err
}

func (m *memCloud) IPv4s(ctx context.Context, mac string) ([]netip.Addr, error) {
	err := m.call(ctx, "IPv4s", -1)
	defer m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e := m.byMACLocked(mac)
	if e == nil {
		return nil, fmt.Errorf("metadata: %w", cloud.ErrNotFound)
	}
	return metaOf(e).IPv4, nil
}

// memVSwitches is one vSwitch that can be blocked.
type memVSwitches struct {
	mu                sync.Mutex
	blocked           bool
	blocks, releasedN int
}

func (v *memVSwitches) Pick(context.Context) (cloud.VSwitch, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.blocked {
		return cloud.VSwitch{}, cloud.ErrNoVSwitch
	}
	return cloud.VSwitch{ID: memVSwitch}, nil
}

func (v *memVSwitches) Block(string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.blocked = true
	v.blocks++
}

func (v *memVSwitches) Released(string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.blocked = false
	v.releasedN++
}

// policy is the harness of the pool-policy tests: a pool over memCloud on
// a fake clock.
type policy struct {
	t     *testing.T
	clk   *testingclock.FakeClock
	cloud *memCloud
	vsw   *memVSwitches
}

var policyEpoch = time.Unix(1_700_000_000, 0)

func newPolicy(t *testing.T) *policy {
	return &policy{t: t, clk: testingclock.NewFakeClock(policyEpoch), cloud: newMemCloud(), vsw: &memVSwitches{}}
}

// multiIPConfig is a small pool whose periodic sync never runs, demand
// is planned at once (no batch window) and idle reclaim is off.
func (h *policy) multiIPConfig() MultiIPConfig {
	return MultiIPConfig{MaxENI: 1, IPsPerENI: 10, MaxIdle: 10, SyncPeriod: 24 * time.Hour,
		FailureBackoff: time.Second, FailureBackoffCap: 4 * time.Second, ExhaustedInhibit: 10 * time.Minute,
		ENILimitInhibit: time.Minute, Tags: memTags}
}

// multiIP builds a pool and restores it with holdings.
func (h *policy) multiIP(cfg MultiIPConfig, holdings ...Holding) *MultiIP {
	h.t.Helper()
	p, err := NewMultiIP(cfg, h.cloud, h.vsw, h.clk, nil, nil)
	return restored(h, p, err, holdings)
}

func (h *policy) eniPool(cfg ENIPoolConfig) *ENIPool {
	h.t.Helper()
	p, err := NewENIPool(cfg, h.cloud, h.vsw, h.clk, nil, nil)
	return restored(h, p, err, nil)
}

// restored restores the pool p that its constructor returned with err,
// and closes it when the test ends.
func restored[P Pool](h *policy, p P, err error, holdings []Holding) P {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := p.Restore(context.Background(), holdings); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(p.Close)
	return p
}

// run runs a pool until the test ends.
func (h *policy) run(run func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { run(ctx); close(done) }()
	h.t.Cleanup(func() { cancel(); <-done })
}

// policyWait bounds, in real time, a wait for what the pool does on the
// fake clock: generous, since -race on a loaded 2-core machine took more
// than 2 s for one round.
const policyWait = 15 * time.Second

// until polls cond for up to policyWait of real time: the pool's
// goroutines run on their own after the clock moved.
func (h *policy) until(what string, cond func() bool) {
	h.t.Helper()
	testwait.Until(h.t, policyWait, what, cond)
}

// advanceTo sets the clock to at until cond holds: a timer the pool arms
// after the first setting, for at or earlier, fires at the next one.
func (h *policy) advanceTo(at time.Time, what string, cond func() bool) {
	h.t.Helper()
	h.until(what, func() bool {
		h.clk.SetTime(at)
		return cond()
	})
}

// alloc is an allocation in the background.
type alloc struct {
	ip  IP
	err error
}

func allocAsync(allocate func(context.Context, string) (IP, error), owner string) <-chan alloc {
	ch := make(chan alloc, 1)
	go func() {
		ip, err := allocate(context.Background(), owner)
		ch <- alloc{ip, err}
	}()
	return ch
}

func (h *policy) wait(ch <-chan alloc) alloc {
	h.t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(policyWait):
		h.t.Fatal("timed out waiting for an allocation")
	}
	return alloc{}
}

func (h *policy) mustAllocate(allocate func(context.Context, string) (IP, error), owner string) IP {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), policyWait)
	defer cancel()
	ip, err := allocate(ctx, owner)
	if err != nil {
		h.t.Fatalf("allocate for %s: %v", owner, err)
	}
	return ip
}

func (h *policy) allocateErr(allocate func(context.Context, string) (IP, error), owner string) error {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ip, err := allocate(ctx, owner)
	if err == nil {
		h.t.Fatalf("allocate for %s: got %s, want an error", owner, ip.IPv4)
	}
	return err
}

// waiting counts the pool's queued allocations.
func (p *MultiIP) waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters)
}

// settled: no cloud call of the pool is in flight and nobody waits.
func (p *MultiIP) settled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.enis {
		if e.busy {
			return false
		}
	}
	return p.inflight == 0 && p.creating == 0 && len(p.waiters) == 0
}
