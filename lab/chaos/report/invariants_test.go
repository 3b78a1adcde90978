package report

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/chaos/timeline"
	"github.com/terway-sim/terway/lab/hostcheck"
	"github.com/terway-sim/terway/lab/workload"
)

var (
	t0  = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	sec = admin.Duration(time.Second)
	// faultsEnd is when the test timeline's faults end: 4 s in.
	faultsEnd = t0.Add(4 * time.Second)
)

// testTimeline has a sample a second for 8 s: 3 pods, Ready from 6 s;
// a kill of node-1's daemon from 1 s to 2 s, a storm from 2 s to 4 s,
// and one restart on node-1 at 1.5 s.
func testTimeline() *timeline.Timeline {
	tl := &timeline.Timeline{Start: t0, End: t0.Add(8 * time.Second), Interval: sec,
		Bands: []timeline.Band{
			{Name: "kill-terwayd", Kind: "process", Target: "node-1", Start: t0.Add(time.Second), End: t0.Add(2 * time.Second)},
			{Name: "storm", Kind: "cloud", Target: "DescribeVSwitches", Start: t0.Add(2 * time.Second), End: faultsEnd},
		},
		Restarts: []timeline.Restart{{At: 2 * sec, Node: "node-1", Pod: "terway-a", Container: "terwayd", Count: 1,
			Cause: "Error, exit code 137", FinishedAt: t0.Add(1500 * time.Millisecond)}},
	}
	for i := range 9 {
		s := timeline.Sample{At: admin.Duration(i) * sec, Pods: 3, PodsReady: min(3, max(0, i-3))}
		if i > 0 {
			s.Calls, s.CallsOver = map[string]int64{"Success": int64(10 + i)}, sec
		}
		if i >= 2 && i <= 4 {
			s.Calls["Throttling.User"] = 3
			s.Throttled = 3
		}
		if i >= 2 {
			s.Restarts = 1
		}
		tl.Samples = append(tl.Samples, s)
	}
	tl.Samples[7].Calls, tl.Samples[7].CallsOver = nil, 0
	tl.Samples[7].Errors = map[string]string{timeline.SourceCalls: "connection refused"}
	tl.Samples[8].CallsOver = 2 * sec
	return tl
}

func auditAt(after time.Duration, findings ...audit.Finding) *audit.Report {
	return &audit.Report{Time: faultsEnd.Add(after), Findings: findings}
}

var leak = audit.Finding{Kind: audit.KindLeakedIP, Node: "node-1", Object: "ip 192.168.0.7 on eni-1"}

// expect checks one invariant result: its status, and text its detail,
// reason or violation messages contain.
func expect(t *testing.T, name string, r Result, status string, texts ...string) {
	t.Helper()
	if r.Status() != status {
		t.Errorf("%s: %s, want %s: %+v", name, r.Status(), status, r)
	}
	all := r.Detail + " " + r.Skipped
	for _, v := range r.Violations {
		all += " " + v.Message
		if v.Invariant != r.Invariant {
			t.Errorf("%s: violation of %q in a result of %q", name, v.Invariant, r.Invariant)
		}
	}
	for _, want := range texts {
		if !strings.Contains(all, want) {
			t.Errorf("%s: %q not in %q", name, want, all)
		}
	}
}

func TestCheckFaultsFired(t *testing.T) {
	a := Fault{Band: timeline.Band{Name: "a"}, Fired: 3}
	b := Fault{Band: timeline.Band{Name: "b", Kind: "cloud", Target: "node-2", Start: t0.Add(time.Second), End: t0.Add(2 * time.Second)}, Fired: 1}
	expect(t, "fired", CheckFaultsFired([]Fault{a, b}), VerdictPass, "2 fault(s), 4 fired")
	b.Fired = 0
	expect(t, "one never fired", CheckFaultsFired([]Fault{a, b}), VerdictFail, "fault b (node-2) (cloud, active 1s) never fired")
	expect(t, "none", CheckFaultsFired(nil), "skipped", "no faults")
}

func TestCheckAuditClean(t *testing.T) {
	within := 10 * time.Second
	cases := []struct {
		name   string
		audits []*audit.Report
		status string
		texts  []string
	}{
		{"clean in time", []*audit.Report{auditAt(-time.Second), auditAt(time.Second, leak), auditAt(5 * time.Second)}, VerdictPass,
			[]string{"clean 5s after the faults ended"}},
		{"never clean", []*audit.Report{auditAt(time.Second, leak), auditAt(20*time.Second, leak)}, VerdictFail,
			[]string{"not clean within 10s", "the last one, 20s after the faults ended: 1 finding(s)", "leaked-ip ×1", "leaked-ip node-1: ip 192.168.0.7 on eni-1"}},
		{"clean too late", []*audit.Report{auditAt(20 * time.Second)}, VerdictFail, []string{"not clean within 10s"}},
		{"dirty again", []*audit.Report{auditAt(2 * time.Second), auditAt(8*time.Second, leak)}, VerdictFail,
			[]string{"problems again 8s after the faults ended"}},
		{"only before the end", []*audit.Report{auditAt(-time.Second)}, VerdictFail, []string{"no audit taken after the faults ended"}},
		{"none", nil, "skipped", []string{"no audit taken"}},
	}
	for _, c := range cases {
		expect(t, c.name, CheckAuditClean(c.audits, faultsEnd, time.Time{}, within), c.status, c.texts...)
	}
	// Left at rest 15 s after the faults (pods waited for, checked,
	// deleted), the audit has its 10 s from then.
	rest := faultsEnd.Add(15 * time.Second)
	expect(t, "clean in time after rest", CheckAuditClean([]*audit.Report{auditAt(20 * time.Second)}, faultsEnd, rest, within), VerdictPass,
		"clean 20s after the faults ended")
	expect(t, "not clean after rest", CheckAuditClean([]*audit.Report{auditAt(26*time.Second, leak)}, faultsEnd, rest, within), VerdictFail,
		"not clean within 10s of the lab at rest (15s after the faults ended)")
}

func TestCheckUniqueAddresses(t *testing.T) {
	a := PodAddress{Pod: "ns/a", Node: "node-1", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("fd00::5")}}
	b := PodAddress{Pod: "ns/b", Node: "node-2", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.6")}}
	expect(t, "distinct", CheckUniqueAddresses([]PodAddress{a, b}), VerdictPass, "3 address(es) of 2 pod(s)")
	b.IPs = append(b.IPs, netip.MustParseAddr("10.0.0.5"))
	expect(t, "shared", CheckUniqueAddresses([]PodAddress{a, b}), VerdictFail, "address 10.0.0.5 is held by 2 pods: ns/a on node-1, ns/b on node-2")
	expect(t, "none", CheckUniqueAddresses(nil), "skipped")
}

func TestCheckAddressesOnNodeENIs(t *testing.T) {
	eni := func(id, inst, status string, primary string, secondary ...string) admin.ENIView {
		e := admin.ENIView{ENIInfo: admin.ENIInfo{ID: id, PrimaryIP: netip.MustParseAddr(primary)}, InstanceID: inst, Status: status}
		for _, s := range secondary {
			e.IPv4 = append(e.IPv4, netip.MustParseAddr(s))
		}
		return e
	}
	world := &admin.WorldView{ENIs: []admin.ENIView{
		eni("eni-1", "i-1", admin.ENIInUse, "10.0.0.10", "10.0.0.5"),
		eni("eni-2", "i-2", admin.ENIInUse, "10.0.0.20", "10.0.0.6"),
		eni("eni-3", "i-1", admin.ENIDetaching, "10.0.0.30", "10.0.0.9"),
		eni("eni-4", "", admin.ENIAvailable, "10.0.0.40"),
	}}
	instances := map[string]string{"node-1": "i-1", "node-2": "i-2"}
	pod := func(node string, ips ...string) []PodAddress {
		p := PodAddress{Pod: "ns/p", Node: node}
		for _, ip := range ips {
			p.IPs = append(p.IPs, netip.MustParseAddr(ip))
		}
		return []PodAddress{p}
	}
	expect(t, "secondary and exclusive ENI", CheckAddressesOnNodeENIs(append(pod("node-1", "10.0.0.5"), pod("node-2", "10.0.0.20")...), world, instances),
		VerdictPass, "2 address(es) of 2 pod(s) checked against 4 ENI(s)")
	for _, c := range []struct{ name, node, ip, want string }{
		{"another node's ENI", "node-1", "10.0.0.6", "pod ns/p on node-1 (i-1) holds 10.0.0.6, which is on eni-2 of i-2"},
		{"an unattached ENI", "node-1", "10.0.0.40", "which is on eni-4 of no instance"},
		{"no ENI", "node-1", "10.0.0.99", "holds 10.0.0.99, which is on no ENI"},
		{"a detaching ENI", "node-1", "10.0.0.9", "on its node's eni-3, which is Detaching"},
		{"an unknown node", "node-9", "10.0.0.5", "on node node-9, whose instance is unknown"},
	} {
		expect(t, c.name, CheckAddressesOnNodeENIs(pod(c.node, c.ip), world, instances), VerdictFail, c.want)
	}
	expect(t, "VPC mode", CheckAddressesOnNodeENIs(pod("node-1", "10.0.0.5"), nil, instances), "skipped")
}

func TestCheckPodsReady(t *testing.T) {
	tl := testTimeline()
	expect(t, "ready in time", CheckPodsReady(tl, 3, faultsEnd, 3*time.Second), VerdictPass, "all 3 Ready 2s after the faults ended")
	r := CheckPodsReady(tl, 3, faultsEnd, time.Second)
	expect(t, "ready too late", r, VerdictFail, "2 of 3 workload pods Ready within 1s after the faults ended (last, 1s after: 2 Ready of 3, 0 terminating)")
	if !r.Violations[0].At.Equal(faultsEnd.Add(time.Second)) {
		t.Errorf("violation at %v, want the deadline", r.Violations[0].At)
	}
	expect(t, "timeline too short", CheckPodsReady(tl, 3, tl.End.Add(time.Second), time.Second), VerdictFail, "no sample of the pods")
	expect(t, "no workload", CheckPodsReady(tl, 0, faultsEnd, time.Second), "skipped")
	// A sample 0.3 ms after the faults' end keeps a rounded offset that
	// lies 0.2 ms before it: it still counts.
	end := tl.Start.Add(tl.Samples[0].At.D() + 200*time.Microsecond)
	tl.Samples[0].PodsReady, tl.Samples[0].Pods = 3, 3
	tl.Samples = tl.Samples[:1]
	expect(t, "rounded sample", CheckPodsReady(tl, 3, end, time.Second), VerdictPass, "all 3 Ready")
}

func TestCheckConnectivity(t *testing.T) {
	ok := workload.Check{Kind: workload.KindSameNode, From: "ns/a", FromNode: "node-1", To: "10.0.0.6:8080", Target: "ns/b", OK: true}
	bad := ok
	bad.OK, bad.Error = false, "connection refused"
	expect(t, "all pass", CheckConnectivity([]workload.Check{ok, ok}), VerdictPass, "2 of 2 checks passed")
	expect(t, "one fails", CheckConnectivity([]workload.Check{ok, bad}), VerdictFail, "1 of 2 checks passed", "pod-pod-same-node ns/a (node-1) -> 10.0.0.6:8080 ns/b: FAIL: connection refused")
	expect(t, "none", CheckConnectivity(nil), "skipped")
}

func TestCheckRestarts(t *testing.T) {
	causes, grace := []string{"process"}, time.Second
	tl := testTimeline()
	expect(t, "killed by the plan", CheckRestarts(tl, causes, grace, nil), VerdictPass, "1 restart(s): 1 kill-terwayd (node-1)")
	tl.Restarts = append(tl.Restarts,
		timeline.Restart{At: 3 * sec, Node: "node-1", Pod: "terway-a", Container: "terwayd", Count: 1}, // within the grace
		timeline.Restart{At: 6 * sec, Node: "node-2", Pod: "terway-b", Container: "terwayd", Count: 2, Cause: "Error, exit code 2"})
	r := CheckRestarts(tl, causes, grace, nil)
	expect(t, "one unexplained", r, VerdictFail, "4 restart(s): 2 kill-terwayd (node-1), 2 unexplained",
		"daemon restart without a fault to explain it: 6.0s terway-b/terwayd on node-2 (2 times): Error, exit code 2")
	if len(r.Violations) != 1 || !r.Violations[0].At.Equal(t0.Add(6*time.Second)) {
		t.Errorf("violations %+v, want one at 6 s", r.Violations)
	}
	tl.Bands[0].Target = "i-2" // a fault on node-2's instance, not node-1's
	tl.Restarts = tl.Restarts[2:]
	tl.Bands[0].End = t0.Add(7 * time.Second)
	expect(t, "by instance", CheckRestarts(tl, causes, grace, map[string]string{"node-2": "i-2"}), VerdictPass, "2 kill-terwayd (i-2)")
	expect(t, "not a cause", CheckRestarts(tl, []string{"node"}, grace, map[string]string{"node-2": "i-2"}), VerdictFail)
	expect(t, "none", CheckRestarts(nil, causes, grace, nil), "skipped")
	tl.Bands[0].Target = "node-1,node-2" // a step against a list of nodes
	expect(t, "by a list of nodes", CheckRestarts(tl, causes, grace, nil), VerdictPass, "2 kill-terwayd (node-1,node-2)")
	tl.Bands[0].Target = "node-1,node-3"
	expect(t, "not in the list", CheckRestarts(tl, causes, grace, nil), VerdictFail)
}

func TestCheckMachine(t *testing.T) {
	expect(t, "unchanged", CheckMachine(true, nil), VerdictPass, "0 difference(s)")
	diff := hostcheck.Difference{Area: hostcheck.AreaLinks, Item: "veth0", After: "veth up"}
	expect(t, "changed", CheckMachine(true, []hostcheck.Difference{diff}), VerdictFail, "the machine changed: links: veth0: (absent) -> veth up")
	expect(t, "not compared", CheckMachine(false, nil), "skipped")
}

func TestInvariantsCheckOrderAndSkips(t *testing.T) {
	rs := Invariants{}.Check(Facts{})
	var names []string
	for _, r := range rs {
		names = append(names, r.Invariant)
		if r.Status() != "skipped" {
			t.Errorf("%s judged without facts: %+v", r.Invariant, r)
		}
	}
	want := []string{InvFaultsFired, InvAuditClean, InvUniqueAddrs, InvAddrsOnNodeENI, InvPodsReady, InvConnectivity, InvRestarts, InvMachine}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("invariants %v, want %v", names, want)
	}
}
