package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/lab/chaos"
)

// The fault schedules' operator (TestFaultSchedules): in every
// schedOperatorEvery'th schedule, after the steps, with the faults still
// on, an operator changes the cloud under a running pod out of band, as
// at the console: unassigns its address, or detaches or deletes its ENI.
// The daemon must heal it (heal.go) — assign the address back, or evict
// the pods whose address is lost, keeping their claims until they are
// gone, and delete the detached ENI then — and heal nothing else.

// schedOperatorEvery: every how many schedules (by seed) an operator acts.
const schedOperatorEvery = 4

// schedOperatorPods is how many pods the operator starts when none runs.
const schedOperatorPods = 3

// The operator's actions.
const (
	opUnassign = "unassign"
	opDetach   = "detach"
	opDelete   = "delete"
)

// schedOperator is what a schedule's operator did.
type schedOperator struct {
	kind string
	eni  string
	// pods are the names of the running pods whose address it took away.
	pods []string
}

// operate makes the schedule's out-of-band change. The operator's call
// may fail under the schedule's faults, or fail with its change applied
// (a lost answer): either way the change is recorded as made.
func (r *schedRun) operate() {
	r.calls.Wait()
	if r.d == nil || r.d.exited() {
		r.start()
	}
	rng := rand.New(rand.NewPCG(uint64(r.s.Seed), 0x0be7a7))
	kind := []string{opUnassign, opDetach, opDelete}[rng.IntN(3)]
	running := r.runningByIP()
	if len(running) < 2 {
		// Pods for the operator to act under (ADDs that fail under the
		// faults owe their DEL as any other).
		var batch []*schedPod
		r.mu.Lock()
		for i := range schedOperatorPods {
			p := &schedPod{name: fmt.Sprintf("o%d", i), phase: podAdding}
			r.pods[p.name] = p
			r.order = append(r.order, p.name)
			batch = append(batch, p)
		}
		r.mu.Unlock()
		r.each(batch, false, func(p *schedPod) { r.add(r.d, p) })
		running = r.runningByIP()
	}
	type target struct {
		pod, eni string
		ip       netip.Addr
		primary  bool
	}
	var targets []target
	for _, e := range r.l.cloud.ENIs() {
		if e.Tags["terway.alibabacloud.com/instance-id"] != node1 || e.Status != fakecloud.ENIInUse || e.InstanceID != node1 {
			continue
		}
		for _, a := range append([]netip.Addr{e.PrimaryIP}, e.IPv4...) {
			if pod, ok := running[a]; ok {
				targets = append(targets, target{pod: pod, eni: e.ID, ip: a, primary: a == e.PrimaryIP})
			}
		}
	}
	if kind == opUnassign {
		// A primary address cannot be unassigned.
		targets = slices.DeleteFunc(targets, func(x target) bool { return x.primary })
	}
	slices.SortFunc(targets, func(a, b target) int { return strings.Compare(a.pod, b.pod) })
	if len(targets) == 0 {
		r.t.Logf("operator: no running pod to %s under", kind)
		return
	}
	tg := targets[rng.IntN(len(targets))]
	op := &schedOperator{kind: kind, eni: tg.eni, pods: []string{tg.pod}}
	if kind != opUnassign {
		op.pods = nil
		for _, x := range targets {
			if x.eni == tg.eni {
				op.pods = append(op.pods, x.pod)
			}
		}
	}
	r.op = op
	cli, err := chaos.NewSDKOperator(chaos.OperatorOptions{Endpoint: r.l.apiURL, Region: "cn-hangzhou",
		AccessKeyID: testAK, AccessKeySecret: testSK, PollEvery: 20 * time.Millisecond})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch kind {
	case opUnassign:
		err = cli.UnassignIPs(ctx, tg.eni, []netip.Addr{tg.ip})
	case opDetach:
		err = cli.DetachENI(ctx, tg.eni, node1)
	case opDelete:
		err = cli.DeleteENI(ctx, tg.eni)
	}
	r.t.Logf("operator: %s %s under %v (err %v)", kind, tg.eni, op.pods, err)
}

// runningByIP maps the addresses of the running pods to their names.
func (r *schedRun) runningByIP() map[netip.Addr]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[netip.Addr]string{}
	for _, p := range r.pods {
		if p.phase == podRunning {
			out[netip.MustParseAddr(p.ip)] = p.name
		}
	}
	return out
}

// kubeletEvicts plays the kubelet for the pods the daemon evicted: a pod
// still running is killed, which owes its DEL (recover retries it).
func (r *schedRun) kubeletEvicts() {
	b, err := os.ReadFile(r.kubePath + evictionsSuffix)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range strings.Fields(string(b)) {
		p, ok := r.pods[name]
		if !ok {
			r.t.Errorf("the daemon evicted %s, a pod the schedule never ran", name)
			continue
		}
		if p.phase == podRunning {
			if r.op == nil || !slices.Contains(r.op.pods, name) {
				r.violation("the daemon evicted %s, whose address nobody took away out of band (operator: %+v)", name, r.op)
			}
			p.phase = podDelOwed
		}
	}
}

// settleOperator waits, after an operator's change, until every pod
// whose address it took away is either gone (evicted, then DELed) or
// runs with its address assigned again: the heal is done.
func (r *schedRun) settleOperator() {
	if r.op == nil {
		return
	}
	var left []string
	err := poll(50*time.Millisecond, schedSettle, func() bool {
		r.kubeletEvicts()
		left = left[:0]
		var owed []*schedPod
		r.mu.Lock()
		for _, name := range r.op.pods {
			p := r.pods[name]
			switch {
			case p.phase == podDelOwed:
				owed = append(owed, p)
				left = append(left, name+" (DEL owed)")
			case p.phase == podRunning && !r.assigned(p.ip):
				left = append(left, name+" (running, address on no ENI)")
			}
		}
		r.mu.Unlock()
		for _, p := range owed {
			r.del(r.d, p)
		}
		return len(left) == 0
	})
	if err != nil {
		r.violation("the heal did not settle after the operator's %s of %s: %v", r.op.kind, r.op.eni, left)
	}
}

// assigned reports whether the cloud assigns ip to an ENI attached to the
// node.
func (r *schedRun) assigned(ip string) bool {
	a := netip.MustParseAddr(ip)
	for _, e := range r.l.cloud.ENIs() {
		if e.InstanceID == node1 && e.Status == fakecloud.ENIInUse && (e.PrimaryIP == a || slices.Contains(e.IPv4, a)) {
			return true
		}
	}
	return false
}
