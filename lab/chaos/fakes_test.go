package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// fakeCloud is an in-memory Cloud; only Run's goroutine calls it. Each
// read adds what a busy daemon would have done meanwhile, unless quiet:
// one hit on every fault in place (Faults), the outcomes of changed
// settings and drained vSwitches (Calls).
type fakeCloud struct {
	faults   map[string]admin.Fault
	fired    map[string]int64
	settings admin.Settings
	drained  map[string]int
	calls    map[admin.CallStat]int64
	world    admin.WorldView
	quiet    bool
	// failAdd and panicAdd make AddFault of that fault name fail or panic.
	failAdd, panicAdd string
	log               []string
}

func newFakeCloud() *fakeCloud {
	d := admin.Duration(2 * time.Second)
	w := time.Minute
	win := admin.Duration(w)
	eni := func(id, inst string, ips ...string) admin.ENIView {
		e := admin.ENIView{ENIInfo: admin.ENIInfo{ID: id, Type: admin.ENITypeSecondary}, Status: admin.ENIInUse, InstanceID: inst}
		for _, ip := range ips {
			e.IPv4 = append(e.IPv4, netip.MustParseAddr(ip))
		}
		return e
	}
	return &fakeCloud{
		faults: map[string]admin.Fault{}, fired: map[string]int64{}, drained: map[string]int{}, calls: map[admin.CallStat]int64{},
		settings: admin.Settings{AttachDelay: d, DetachDelay: d, ThrottleWindow: win,
			Throttle: map[string]int{"*": 1200, "AttachNetworkInterface": 600}},
		world: admin.WorldView{
			VSwitches: []admin.VSwitchView{{ID: "vsw-2"}, {ID: "vsw-1"}},
			ENIs: []admin.ENIView{
				eni("eni-b", "i-2", "192.168.1.10", "192.168.1.11"), eni("eni-a", "i-1", "192.168.0.10", "192.168.0.11"),
				{ENIInfo: admin.ENIInfo{ID: "eni-p", Type: admin.ENITypePrimary}, Status: admin.ENIInUse, InstanceID: "i-1"},
			},
		},
	}
}

var testNodes = []Node{{Name: "lab-2", InstanceID: "i-2"}, {Name: "lab-1", InstanceID: "i-1"}}

func (c *fakeCloud) record(format string, a ...any) { c.log = append(c.log, fmt.Sprintf(format, a...)) }

func (c *fakeCloud) AddFault(_ context.Context, f admin.Fault) (string, error) {
	switch f.Name {
	case c.panicAdd:
		panic("fake AddFault panics")
	case c.failAdd:
		return "", fmt.Errorf("fake AddFault fails")
	}
	c.faults[f.Name] = f
	c.record("add %s caller=%q", f.Name, f.Caller)
	return f.Name, nil
}

func (c *fakeCloud) RemoveFault(_ context.Context, name string) error {
	delete(c.faults, name)
	c.record("remove %s", name)
	return nil
}

func (c *fakeCloud) Faults(context.Context) ([]admin.FaultStatus, error) {
	var out []admin.FaultStatus
	for _, f := range c.faults {
		if !c.quiet {
			c.fired[f.Name]++
		}
		out = append(out, admin.FaultStatus{Fault: f, Fired: c.fired[f.Name]})
	}
	return out, nil
}

func (c *fakeCloud) Settings(context.Context) (admin.Settings, error) {
	s := c.settings
	s.Throttle = maps.Clone(s.Throttle)
	return s, nil
}

// UpdateSettings replaces each key of partial whole, as fakecloud does,
// through the settings' JSON.
func (c *fakeCloud) UpdateSettings(_ context.Context, partial map[string]any) (admin.Settings, error) {
	merged := map[string]any{}
	for _, v := range []any{c.settings, partial} {
		b, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(b, &merged)
		}
		if err != nil {
			return admin.Settings{}, err
		}
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return admin.Settings{}, err
	}
	var s admin.Settings
	if err := json.Unmarshal(b, &s); err != nil {
		return admin.Settings{}, err
	}
	c.settings = s
	c.record("settings attach=%s throttle=%v", c.settings.AttachDelay.D(), c.settings.Throttle)
	return s, nil
}

func (c *fakeCloud) DrainVSwitch(_ context.Context, id string, leave int) error {
	c.drained[id] = leave
	c.record("drain %s", id)
	return nil
}

func (c *fakeCloud) RefillVSwitch(_ context.Context, id string) error {
	delete(c.drained, id)
	c.record("refill %s", id)
	return nil
}

func (c *fakeCloud) World(context.Context) (*admin.WorldView, error) {
	w := c.world
	w.VSwitches = slices.Clone(w.VSwitches)
	return &w, nil
}

func (c *fakeCloud) Calls(context.Context) ([]admin.CallStat, error) {
	if !c.quiet {
		c.traffic()
	}
	var out []admin.CallStat
	for k, n := range c.calls {
		k.Count = n
		out = append(out, k)
	}
	return out, nil
}

// traffic adds the calls a daemon makes under what is in place now.
func (c *fakeCloud) traffic() {
	hit := func(action, caller, outcome string) {
		c.calls[admin.CallStat{Action: action, InstanceID: caller, Outcome: outcome}]++
	}
	if c.settings.AttachDelay.D() > 10*time.Second {
		hit("AttachNetworkInterface", "i-1", admin.OutcomeSuccess)
	}
	for a, n := range c.settings.Throttle {
		if n == 1 {
			hit(a, "i-1", "Throttling.User")
		}
	}
	if len(c.drained) > 0 {
		// As on the lab: the daemons read the vSwitch dry and wait.
		hit("DescribeVSwitches", "i-2", admin.OutcomeSuccess)
	}
}

// fakeLab records the supervisor's actions.
type fakeLab struct {
	mu     sync.Mutex
	log    []string
	failOn string
	// backoff: no terwayd runs on these nodes (the kubelet's crash
	// back-off), so a kill waits until its context ends.
	backoff map[string]bool
}

func (l *fakeLab) do(format string, a ...any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf(format, a...)
	if l.failOn != "" && s == l.failOn {
		return fmt.Errorf("fake lab fails %s", s)
	}
	l.log = append(l.log, s)
	return nil
}

func (l *fakeLab) StopNode(_ context.Context, n string) error  { return l.do("stop %s", n) }
func (l *fakeLab) StartNode(_ context.Context, n string) error { return l.do("start %s", n) }
func (l *fakeLab) ReleaseNode(_ context.Context, n string) error {
	return l.do("release %s", n)
}
func (l *fakeLab) Kill(ctx context.Context, comp, node string, down time.Duration) error {
	if comp == ComponentTerwayd && l.backoff[node] {
		<-ctx.Done()
		return fmt.Errorf("no terwayd ran on %s to kill: %w", node, ctx.Err())
	}
	return l.do("kill %s %q %s", comp, node, down)
}

// fakeOperator records out-of-band actions.
type fakeOperator struct {
	mu  sync.Mutex
	log []string
}

func (o *fakeOperator) do(format string, a ...any) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, fmt.Sprintf(format, a...))
	return nil
}

func (o *fakeOperator) DetachENI(_ context.Context, eni, inst string) error {
	return o.do("detach %s %s", eni, inst)
}
func (o *fakeOperator) DeleteENI(_ context.Context, eni string) error { return o.do("delete %s", eni) }
func (o *fakeOperator) UnassignIPs(_ context.Context, eni string, ips []netip.Addr) error {
	return o.do("unassign %s %v", eni, ips)
}
