package runner

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/chaos"
	"github.com/terway-sim/terway/lab/workload"
)

// journal records what the fakes were asked to do, in order, from any
// goroutine.
type journal struct {
	mu  sync.Mutex
	log []string
}

func (j *journal) add(format string, a ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.log = append(j.log, fmt.Sprintf(format, a...))
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.log, "\n")
}

// fakeCloud is fakecloud's admin API as the engine and the runner use
// it: faults that fire each time they are read (as on a busy lab), and a
// world of ENIs.
type fakeCloud struct {
	mu     sync.Mutex
	j      *journal
	faults map[string]admin.FaultStatus
	world  admin.WorldView
}

func (c *fakeCloud) AddFault(_ context.Context, f admin.Fault) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults[f.Name] = admin.FaultStatus{Fault: f}
	c.j.add("add fault")
	return f.Name, nil
}

func (c *fakeCloud) RemoveFault(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.faults, name)
	c.j.add("remove fault")
	return nil
}

func (c *fakeCloud) Faults(context.Context) ([]admin.FaultStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []admin.FaultStatus
	for name, f := range c.faults {
		f.Fired++
		c.faults[name] = f
		out = append(out, f)
	}
	return out, nil
}

func (c *fakeCloud) Settings(context.Context) (admin.Settings, error) { return admin.Settings{}, nil }
func (c *fakeCloud) UpdateSettings(context.Context, map[string]any) (admin.Settings, error) {
	return admin.Settings{}, nil
}
func (c *fakeCloud) DrainVSwitch(context.Context, string, int) error { return nil }
func (c *fakeCloud) RefillVSwitch(context.Context, string) error     { return nil }

func (c *fakeCloud) World(context.Context) (*admin.WorldView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.world
	w.ENIs = append([]admin.ENIView(nil), c.world.ENIs...)
	return &w, nil
}

func (c *fakeCloud) Calls(context.Context) ([]admin.CallStat, error) { return nil, nil }

// addENI puts an ENI into the world, as a daemon's create and attach do.
func (c *fakeCloud) addENI(e admin.ENIView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.world.ENIs = append(c.world.ENIs, e)
}

// deleteENI takes an ENI out of the world, as an operator's delete does.
func (c *fakeCloud) deleteENI(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.world.ENIs {
		if e.ID == id {
			c.world.ENIs = append(c.world.ENIs[:i], c.world.ENIs[i+1:]...)
			return
		}
	}
}

func eni(id, instance string, ips ...string) admin.ENIView {
	e := admin.ENIView{ENIInfo: admin.ENIInfo{ID: id, Type: admin.ENITypeSecondary}, Status: admin.ENIInUse, InstanceID: instance}
	for _, ip := range ips {
		e.IPv4 = append(e.IPv4, netip.MustParseAddr(ip))
	}
	return e
}

// fakeOperator deletes ENIs from the fake cloud's world.
type fakeOperator struct {
	j     *journal
	cloud *fakeCloud
}

func (o *fakeOperator) DetachENI(_ context.Context, id, inst string) error {
	o.j.add("operator detach %s", id)
	return nil
}

func (o *fakeOperator) DeleteENI(_ context.Context, id string) error {
	o.j.add("operator delete %s", id)
	o.cloud.deleteENI(id)
	return nil
}

func (o *fakeOperator) UnassignIPs(context.Context, string, []netip.Addr) error { return nil }

// fakeWorkload keeps its pods in a fake API server, Ready at once on
// the nodes and addresses given, so that the timeline sees them.
type fakeWorkload struct {
	j    *journal
	kube kubernetes.Interface
	ns   string
	// pods are the nodes and addresses of the pods Deploy creates.
	pods [][2]string
	// cloud gains newENIs on Deploy, as a cold node's daemon creates them.
	cloud   *fakeCloud
	newENIs []admin.ENIView
}

func (w *fakeWorkload) Deploy(ctx context.Context) error {
	w.j.add("deploy")
	for _, e := range w.newENIs {
		w.cloud.addENI(e)
	}
	if _, err := w.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i, p := range w.pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: w.ns},
			Spec: corev1.PodSpec{NodeName: p[0]},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p[1], PodIPs: []corev1.PodIP{{IP: p[1]}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		if _, err := w.kube.CoreV1().Pods(w.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func (w *fakeWorkload) Restart(_ context.Context, _ time.Time) error {
	w.j.add("restart")
	return nil
}

func (w *fakeWorkload) WaitReady(ctx context.Context, n int) ([]corev1.Pod, error) {
	w.j.add("wait ready %d", n)
	list, err := w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	if len(list.Items) != n {
		<-ctx.Done()
		return nil, fmt.Errorf("%d pods, want %d: %w", len(list.Items), n, ctx.Err())
	}
	return list.Items, nil
}

func (w *fakeWorkload) ServiceObject(context.Context) (*corev1.Service, error) {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: w.ns}}, nil
}

func (w *fakeWorkload) Delete(ctx context.Context) error {
	w.j.add("delete workload")
	list, err := w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		if err := w.kube.CoreV1().Pods(w.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	err = w.kube.CoreV1().Namespaces().Delete(ctx, w.ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// fakeProber answers every pair and the service.
type fakeProber struct {
	j    *journal
	fail bool
}

func (p *fakeProber) CheckAll(_ context.Context, pods []corev1.Pod, svc *corev1.Service) []workload.Check {
	p.j.add("connectivity over %d pods, service %v", len(pods), svc != nil)
	c := workload.Check{Kind: workload.KindCrossNode, From: "a", To: "b", OK: !p.fail}
	if p.fail {
		c.Error = "timed out"
	}
	return []workload.Check{c}
}

// auditor returns clean reports, or one finding while dirty is set.
type auditor struct {
	j     *journal
	dirty bool
}

func (a *auditor) audit(_ context.Context, within time.Duration) (*audit.Report, error) {
	a.j.add("audit within %s", within)
	r := &audit.Report{Time: time.Now()}
	if a.dirty {
		r.Findings = []audit.Finding{{Kind: "leaked-ip", Node: "lab-1", Object: "192.168.0.99"}}
	}
	return r, nil
}

// labObjects are two nodes with a Ready terway pod each (ready[i] false
// leaves node i's not Ready) and, optionally, a leftover workload
// namespace.
func labObjects(ns string, leftover bool, ready ...bool) []runtime.Object {
	sel := map[string]string{"app": "terway"}
	objs := []runtime.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: workload.TerwayDaemonSet, Namespace: workload.TerwayNamespace},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}}}}
	for i, name := range []string{"lab-1", "lab-2"} {
		status := corev1.ConditionTrue
		if i < len(ready) && !ready[i] {
			status = corev1.ConditionFalse
		}
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "terway-" + name, Namespace: workload.TerwayNamespace, Labels: sel},
				Spec:   corev1.PodSpec{NodeName: name},
				Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}})
	}
	objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
		Spec:   corev1.PodSpec{NodeName: "lab-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "192.168.0.12"}}}})
	if leftover {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	return objs
}

// testLab is a Config over the fakes, with its journal.
type testLab struct {
	j       *journal
	cfg     Config
	cloud   *fakeCloud
	audit   *auditor
	prober  *fakeProber
	workld  *fakeWorkload
	progres strings.Builder
}

func newTestLab(objs ...runtime.Object) *testLab {
	const ns = "chaos-test"
	if len(objs) == 0 {
		objs = labObjects(ns, true)
	}
	j := &journal{}
	kube := fake.NewClientset(objs...)
	cloud := &fakeCloud{j: j, faults: map[string]admin.FaultStatus{}, world: admin.WorldView{ENIs: []admin.ENIView{
		eni("eni-a", "i-1", "192.168.0.10", "192.168.0.11", "192.168.0.12"), // coredns holds .12
		eni("eni-idle", "i-2", "192.168.1.30"),
		eni("eni-other", "i-9", "192.168.9.9"), // not a lab node's
		{ENIInfo: admin.ENIInfo{ID: "eni-primary", Type: admin.ENITypePrimary}, Status: admin.ENIInUse, InstanceID: "i-1"},
	}}}
	l := &testLab{j: j, cloud: cloud, audit: &auditor{j: j}, prober: &fakeProber{j: j}}
	l.workld = &fakeWorkload{j: j, kube: kube, ns: ns, cloud: cloud, newENIs: []admin.ENIView{eni("eni-new", "i-2", "192.168.1.20")},
		pods: [][2]string{{"lab-1", "192.168.0.10"}, {"lab-1", "192.168.0.11"}, {"lab-2", "192.168.1.20"}}}
	eng := &chaos.Engine{Cloud: cloud, Operator: &fakeOperator{j: j, cloud: cloud},
		Nodes: []chaos.Node{{Name: "lab-1", InstanceID: "i-1"}, {Name: "lab-2", InstanceID: "i-2"}}}
	l.cfg = Config{Engine: eng, Kube: kube, Namespace: ns, Workload: l.workld, Prober: l.prober, Audit: l.audit.audit,
		Progress: &l.progres, Interval: 20 * time.Millisecond, PollEvery: 10 * time.Millisecond,
		SettleTimeout: 5 * time.Second}
	return l
}

// testPlan is a short plan of three pods: a cloud-errors step of 200 ms.
func testPlan(cold bool, restarts int) chaos.Plan {
	return chaos.Plan{Name: "test-plan", Workload: chaos.Workload{Pods: 3, ColdPools: cold, Restarts: restarts},
		Invariants: chaos.Invariants{AuditClean: admin.Duration(time.Minute), PodsReady: admin.Duration(5 * time.Second)},
		Steps:      []chaos.Step{{Kind: chaos.CloudErrors, Start: admin.Duration(50 * time.Millisecond), Duration: admin.Duration(200 * time.Millisecond)}}}
}
