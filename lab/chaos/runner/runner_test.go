package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/chaos/report"
	"github.com/terway-sim/terway/lab/workload"
)

func TestMain(m *testing.M) { noproxy.Main(m) }

func resolve(t *testing.T, p chaos.Plan) *chaos.Schedule {
	t.Helper()
	s, err := chaos.Resolve(p, 7)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// inOrder fails unless each of want is in log, in that order.
func inOrder(t *testing.T, log string, want ...string) {
	t.Helper()
	at := 0
	for _, w := range want {
		i := strings.Index(log[at:], w)
		if i < 0 {
			t.Fatalf("%q not found after position %d in the journal:\n%s", w, at, log)
		}
		at += i + len(w)
	}
}

// A run settles the lab (the leftover workload deleted), empties the
// pools (the idle ENI of a lab node deleted, not the ones pods use nor
// another instance's, then an audit), rolls out, restarts inside the
// faults' window, applies and undoes the fault, collects the facts, and
// audits with the workload gone: every invariant it has facts for holds.
func TestRunOrder(t *testing.T) {
	l := newTestLab()
	s := resolve(t, testPlan(true, 1))
	o, err := Run(t.Context(), l.cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	log := l.j.String()
	inOrder(t, log, "delete workload", "operator delete eni-idle", "audit within 3m0s", "deploy", "add fault", "restart",
		"remove fault", "wait ready 3", "connectivity over 3 pods, service true", "delete workload", "audit within 1m0s")
	if strings.Contains(log, "eni-a") || strings.Contains(log, "eni-other") || strings.Contains(log, "eni-primary") {
		t.Errorf("cold pools deleted an ENI in use, another instance's or a primary one:\n%s", log)
	}
	if !o.Passed() || o.Err() != nil {
		var b strings.Builder
		_ = o.WriteViolations(&b)
		t.Fatalf("verdict %s, error %q, err %v:\n%s", o.Run.Verdict(), o.Run.Error, o.Err(), b.String())
	}
	status := map[string]string{}
	for _, r := range o.Run.Invariants {
		status[r.Invariant] = r.Status()
	}
	for _, inv := range []string{report.InvFaultsFired, report.InvAuditClean, report.InvUniqueAddrs, report.InvAddrsOnNodeENI,
		report.InvPodsReady, report.InvConnectivity, report.InvRestarts} {
		if status[inv] != report.VerdictPass {
			t.Errorf("%s: %s, want pass (invariants %v)", inv, status[inv], status)
		}
	}
	if status[report.InvMachine] != "skipped" {
		t.Errorf("machine-unchanged %s: the runner does not compare the machine", status[report.InvMachine])
	}
	notes := strings.Join(o.Run.Notes, "\n")
	if !strings.Contains(notes, "cold pools: an operator deleted 1 idle secondary ENI(s) before the rollout: eni-idle (i-2)") ||
		!strings.Contains(notes, "rolling restart 1 of 1") {
		t.Errorf("notes %q", notes)
	}
	dir, err := o.WriteReport(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{report.JSONFile, report.MarkdownFile, "schedule.json", "result.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := report.ReadJSON(filepath.Join(dir, report.JSONFile)); err != nil {
		t.Errorf("run.json does not read back: %v", err)
	}
}

// A pod address that two pods hold, one outside its node's ENIs and a
// failed probe fail the run; each violation is printed once, and the
// error is one line that does not repeat them.
func TestRunViolations(t *testing.T) {
	l := newTestLab()
	l.workld.pods = append(l.workld.pods, [2]string{"lab-2", "192.168.0.10"})
	l.prober.fail = true
	p := testPlan(false, 0)
	p.Workload.Pods = 4
	o, err := Run(t.Context(), l.cfg, resolve(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if o.Passed() {
		t.Fatal("a run with a shared address passed")
	}
	var b strings.Builder
	if err := o.WriteViolations(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	vs := o.Run.Violations()
	if got := strings.Count(out, "violation of "); got != len(vs) || len(vs) < 3 {
		t.Errorf("%d violations printed, %d found (want at least 3: unique, on ENIs, connectivity):\n%s", got, len(vs), out)
	}
	for _, want := range []string{"violation of unique-addresses in plan test-plan, seed 7", "replay: terway-lab chaos --plan test-plan --seed 7", "audit: clean", "timeline from"} {
		if !strings.Contains(out, want) {
			t.Errorf("violations lack %q:\n%s", want, out)
		}
	}
	if err := o.Err(); err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "invariant violation(s) in plan test-plan, seed 7") {
		t.Errorf("Err() = %v, want one line with the count", err)
	}
	if strings.Contains(l.j.String(), "operator delete") {
		t.Error("a plan on warm pools deleted ENIs")
	}
}

// Pods that never get Ready leave the address checks skipped with a
// note and fail pods-ready; a dirty audit fails audit-clean.
func TestRunPodsNotReadyAuditDirty(t *testing.T) {
	l := newTestLab()
	l.workld.pods = l.workld.pods[:2]
	l.audit.dirty = true
	o, err := Run(t.Context(), l.cfg, resolve(t, testPlan(false, 0)))
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, r := range o.Run.Invariants {
		status[r.Invariant] = r.Status()
	}
	if status[report.InvPodsReady] != report.VerdictFail || status[report.InvAuditClean] != report.VerdictFail ||
		status[report.InvUniqueAddrs] != "skipped" || status[report.InvConnectivity] != "skipped" {
		t.Errorf("invariants %v", status)
	}
	if !strings.Contains(strings.Join(o.Run.Notes, "\n"), "pods not Ready within 5s") {
		t.Errorf("notes %q", o.Run.Notes)
	}
}

// A node whose terway is not Ready keeps the run from starting, naming
// the node; nothing is deployed.
func TestRunSettleTimeout(t *testing.T) {
	l := newTestLab(labObjects("chaos-test", false, true, false)...)
	l.cfg.SettleTimeout = 200 * 1e6
	_, err := Run(t.Context(), l.cfg, resolve(t, testPlan(false, 0)))
	if err == nil || !strings.Contains(err.Error(), "terway not Ready on lab-2") {
		t.Fatalf("Run: %v, want a settle failure naming lab-2", err)
	}
	if strings.Contains(l.j.String(), "deploy") {
		t.Error("deployed on a lab that did not settle")
	}
}

// A terway pod whose container restarted (an earlier plan killed
// terwayd) is replaced before the run starts, so that the kubelet's crash
// back-off does not hold this plan's kills back; the others are kept.
func TestRunSettleFreshTerway(t *testing.T) {
	objs := labObjects("chaos-test", false)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Name == "terway-lab-2" {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "terway", RestartCount: 3}}
		}
	}
	l := newTestLab(objs...)
	// The DaemonSet controller: a deleted terway pod comes back new and
	// Ready.
	kube := l.cfg.Kube.(*fake.Clientset)
	kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		if !strings.HasPrefix(name, "terway-") {
			return false, nil, nil
		}
		old, err := kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), workload.TerwayNamespace, name)
		if err != nil {
			return true, nil, err
		}
		p := old.(*corev1.Pod).DeepCopy()
		p.Name, p.Status.ContainerStatuses = name+"-new", nil
		if err := kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), workload.TerwayNamespace, name); err != nil {
			return true, nil, err
		}
		l.j.add("replaced terway pod %s", name)
		return true, nil, kube.Tracker().Add(p)
	})
	if _, err := Run(t.Context(), l.cfg, resolve(t, testPlan(false, 0))); err != nil {
		t.Fatal(err)
	}
	log := l.j.String()
	inOrder(t, log, "replaced terway pod terway-lab-2", "deploy")
	if strings.Contains(log, "terway-lab-1") {
		t.Errorf("a terway pod that never restarted was replaced:\n%s", log)
	}
	if !strings.Contains(l.progres.String(), "new terway pods on lab-2") {
		t.Errorf("progress does not say which pods were replaced:\n%s", l.progres.String())
	}
}

// Check refuses before touching the lab: a process kind without the
// supervisor's control, cold pools without an operator or an audit.
func TestCheckRefuses(t *testing.T) {
	l := newTestLab()
	kill, err := chaos.Lookup("kill-terwayd")
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(l.cfg, resolve(t, kill)); err == nil || !strings.Contains(err.Error(), "Engine.Lab") {
		t.Errorf("kill-terwayd without Lab: %v", err)
	}
	cold := resolve(t, testPlan(true, 0))
	noAudit := l.cfg
	noAudit.Audit = nil
	if err := Check(noAudit, cold); err == nil || !strings.Contains(err.Error(), "Config.Audit") {
		t.Errorf("cold pools without an audit: %v", err)
	}
	eng := *l.cfg.Engine
	eng.Operator = nil
	noOp := l.cfg
	noOp.Engine = &eng
	if err := Check(noOp, cold); err == nil || !strings.Contains(err.Error(), "Engine.Operator") {
		t.Errorf("cold pools without an operator: %v", err)
	}
	vpc := l.cfg
	vpc.VPC = true
	if err := Check(vpc, cold); err == nil {
		t.Error("cold pools in VPC mode accepted")
	}
	if _, err := Run(t.Context(), noAudit, cold); err == nil || l.j.String() != "" {
		t.Errorf("Run of a refused schedule: %v, journal %q", err, l.j.String())
	}
}
