package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/terway-sim/terway/daemon/cloud"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/workload"
)

// opsLab is a running lab, as TestOperationsOnALab drives it.
type opsLab struct {
	t     *testing.T
	dir   string
	st    *cluster.State
	c     *cluster.Control
	kube  kubernetes.Interface
	cloud *admin.Client
	w     *workload.Workload
	pods  int
}

// TestOperationsOnALab drives every control operation on a running lab
// (terway-lab up; eval $(terway-lab env)) and checks that the lab comes
// back from each: nodes Ready, terway Ready, pods scheduled, fakecloud's
// instances as the operation left them, and the audit clean at the end.
func TestOperationsOnALab(t *testing.T) {
	dir := os.Getenv("TERWAY_LAB_DIR")
	if dir == "" {
		t.Skip("TERWAY_LAB_DIR is not set: this test needs a running lab (terway-lab up; eval $(terway-lab env))")
	}
	l := newOpsLab(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	l.deploy(ctx)
	target := l.st.Nodes[len(l.st.Nodes)-1].Name

	l.step("stop and start "+target, func() { l.stopStart(ctx, target) })
	l.step("kill terwayd on "+target, func() { l.killTerwayd(ctx, target) })
	for _, comp := range []string{cluster.ComponentContainerd, cluster.ComponentKubelet} {
		l.step("kill "+comp+" on "+target, func() { l.killAndBack(ctx, comp, target) })
	}
	l.step("kill kube-apiserver", func() { l.killAndBack(ctx, cluster.ComponentAPIServer, "") })
	var added cluster.NodeState
	l.step("add a node", func() { added = l.add(ctx) })
	l.step("remove "+added.Name, func() { l.remove(ctx, added) })
	l.step("audit", func() { l.audit(ctx) })
}

func newOpsLab(t *testing.T, dir string) *opsLab {
	st, err := cluster.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != cluster.PhaseReady {
		t.Fatalf("the lab in %s is %s, not ready", dir, st.Phase)
	}
	c, err := cluster.DialControl(dir)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	l := &opsLab{t: t, dir: dir, st: st, c: c, kube: kube, cloud: &admin.Client{URL: st.FakecloudURL, Token: st.AdminToken},
		pods: 2 * len(st.Nodes)}
	l.w, err = workload.New(kube, workload.Spec{Namespace: "terway-lab-ops", Replicas: int32(l.pods),
		ExclusiveENI: st.Mode == mode.ENIOnly, Spread: true})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// step runs one part and logs how long it took.
func (l *opsLab) step(what string, f func()) {
	l.t.Helper()
	start := time.Now()
	l.t.Logf("%s ...", what)
	f()
	l.t.Logf("%s: done in %s", what, time.Since(start).Round(100*time.Millisecond))
}

func (l *opsLab) deploy(ctx context.Context) {
	t := l.t
	if err := l.w.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := l.w.Delete(dctx); err != nil {
			t.Errorf("delete the workload: %v", err)
		}
	})
	l.podsReady(ctx)
}

// podsReady waits until the workload's pods are all Ready.
func (l *opsLab) podsReady(ctx context.Context) []corev1.Pod {
	l.t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	pods, err := l.w.WaitReady(wctx, l.pods)
	if err != nil {
		l.t.Fatal(err)
	}
	return pods
}

// instanceStatus is fakecloud's status of instance id, "" if it has none.
func (l *opsLab) instanceStatus(ctx context.Context, id string) string {
	l.t.Helper()
	w, err := l.cloud.World(ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	for _, in := range w.Instances {
		if in.ID == id {
			return in.Status
		}
	}
	return ""
}

func (l *opsLab) node(name string) cluster.NodeState {
	l.t.Helper()
	st, err := cluster.ReadState(l.dir)
	if err != nil {
		l.t.Fatal(err)
	}
	n, ok := st.Node(name)
	if !ok {
		l.t.Fatalf("the state has no node %s", name)
	}
	return n
}

func (l *opsLab) stopStart(ctx context.Context, name string) {
	t := l.t
	n := l.node(name)
	if err := l.c.StopNode(ctx, name); err != nil {
		t.Fatal(err)
	}
	if s := l.instanceStatus(ctx, n.InstanceID); s != "Stopped" {
		t.Errorf("instance %s is %q after stop, want Stopped", n.InstanceID, s)
	}
	if got := l.node(name).Status; got != cluster.NodeStopped {
		t.Errorf("state says %s is %q, want stopped", name, got)
	}
	// A power-off empties /run: the daemon's socket is gone with it.
	if _, err := os.Stat(n.HostPath("/run/eni/eni.socket")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the daemon's socket survived the power-off: %v", err)
	}
	if err := l.c.StopNode(ctx, name); !errors.Is(err, cluster.ErrNodeState) {
		t.Errorf("stop of a stopped node: %v, want ErrNodeState", err)
	}
	started := time.Now()
	if err := l.c.StartNode(ctx, name); err != nil {
		t.Fatal(err)
	}
	if s := l.instanceStatus(ctx, n.InstanceID); s != "Running" {
		t.Errorf("instance %s is %q after start, want Running", n.InstanceID, s)
	}
	l.nodeBack(ctx, name, started)
	l.podsReady(ctx)
}

// nodeBack waits until node name's kubelet renewed its lease after since,
// the node is Ready, and terway on it runs a container started after
// since and is Ready.
func (l *opsLab) nodeBack(ctx context.Context, name string, since time.Time) {
	l.t.Helper()
	l.waitFor(ctx, name+" Ready with a new terwayd", func(ctx context.Context) error {
		lease, err := l.kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(since.Truncate(time.Second)) {
			return fmt.Errorf("lease of %s last renewed %v", name, lease.Spec.RenewTime)
		}
		if err := l.nodeReady(ctx, name); err != nil {
			return err
		}
		p, err := l.terwayPod(ctx, name)
		if err != nil {
			return err
		}
		if started := terwaydStarted(p); started.Before(since.Truncate(time.Second)) {
			return fmt.Errorf("terwayd on %s started %v, before %v", name, started, since)
		}
		if !workload.IsReady(p) {
			return fmt.Errorf("terway on %s not Ready", name)
		}
		return nil
	})
}

func (l *opsLab) nodeReady(ctx context.Context, name string) error {
	n, err := l.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("node %s not Ready", name)
}

// terwayPod is the terway DaemonSet's pod on node.
func (l *opsLab) terwayPod(ctx context.Context, node string) (*corev1.Pod, error) {
	pods, err := l.kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=terway", FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no terway pod on %s", node)
}

// terwaydStarted is when the pod's running terwayd container started
// (zero when none runs).
func terwaydStarted(p *corev1.Pod) time.Time {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "terwayd" && c.State.Running != nil {
			return c.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}

func (l *opsLab) killTerwayd(ctx context.Context, name string) {
	t := l.t
	p, err := l.terwayPod(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	restarts := int32(-1)
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "terwayd" {
			restarts = c.RestartCount
		}
	}
	if err := l.c.Kill(ctx, cluster.ComponentTerwayd, name, 0); err != nil {
		t.Fatal(err)
	}
	l.waitFor(ctx, "terwayd on "+name+" restarted by the kubelet", func(ctx context.Context) error {
		p, err := l.terwayPod(ctx, name)
		if err != nil {
			return err
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "terwayd" && c.RestartCount > restarts && workload.IsReady(p) {
				return nil
			}
		}
		return fmt.Errorf("terwayd on %s: restarts %d, ready %v", name, restarts, workload.IsReady(p))
	})
}

// killAndBack kills component (on node, or the API server) and waits
// until the supervisor ran it again (a new process in its pid file) and
// the cluster works: nodes Ready, pods schedule.
func (l *opsLab) killAndBack(ctx context.Context, component, node string) {
	t := l.t
	pidFile := filepath.Join(l.dir, "pids", component+".pid")
	if node != "" {
		pidFile = filepath.Join(l.dir, "pids", node+"-"+component+".pid")
	}
	before := readPid(t, pidFile)
	killed := time.Now()
	if err := l.c.Kill(ctx, component, node, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.c.Kill(ctx, component, node, 2*time.Second); err != nil && !errors.Is(err, cluster.ErrNodeState) {
		t.Errorf("a second kill during the downtime: %v, want nil (back already) or ErrNodeState", err)
	}
	l.waitFor(ctx, component+" started again", func(context.Context) error {
		pid := readPid(t, pidFile)
		if pid == before {
			return fmt.Errorf("%s still has pid %d", component, pid)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return fmt.Errorf("%s (pid %d) does not run", component, pid)
		}
		return nil
	})
	if component == cluster.ComponentKubelet {
		l.waitFor(ctx, node+" heartbeat after the kill", func(ctx context.Context) error {
			lease, err := l.kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.Time.After(killed) {
				return fmt.Errorf("lease renewed %v", lease.Spec.RenewTime)
			}
			return nil
		})
	}
	for _, n := range l.liveNodes() {
		l.waitFor(ctx, n+" Ready", func(ctx context.Context) error { return l.nodeReady(ctx, n) })
	}
	// Pods schedule and start again: one more, then back.
	l.scale(ctx, l.pods+1)
	l.scale(ctx, l.pods-1)
}

func (l *opsLab) liveNodes() []string {
	st, err := cluster.ReadState(l.dir)
	if err != nil {
		l.t.Fatal(err)
	}
	var out []string
	for _, n := range st.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// scale sets the workload to n pods and waits until they are Ready.
func (l *opsLab) scale(ctx context.Context, n int) []corev1.Pod {
	l.t.Helper()
	l.pods = n
	if err := l.w.Scale(ctx, int32(n)); err != nil {
		l.t.Fatal(err)
	}
	return l.podsReady(ctx)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

func (l *opsLab) add(ctx context.Context) cluster.NodeState {
	t := l.t
	before := len(l.liveNodes())
	n, err := l.c.AddNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("added %s: instance %s in %s", n.Name, n.InstanceID, n.Zone)
	if s := l.instanceStatus(ctx, n.InstanceID); s != "Running" {
		t.Errorf("new instance %s is %q, want Running", n.InstanceID, s)
	}
	if err := l.nodeReady(ctx, n.Name); err != nil {
		t.Error(err)
	}
	if p, err := l.terwayPod(ctx, n.Name); err != nil || !workload.IsReady(p) {
		t.Errorf("terway on %s: %v", n.Name, err)
	}
	if got := len(l.liveNodes()); got != before+1 {
		t.Errorf("state has %d nodes after add, want %d", got, before+1)
	}
	// Spread puts pods on the new node too.
	pods := l.scale(ctx, 2*(before+1))
	if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Spec.NodeName == n.Name }) {
		t.Errorf("no pod of %d on the new node %s", len(pods), n.Name)
	}
	return n
}

func (l *opsLab) remove(ctx context.Context, n cluster.NodeState) {
	t := l.t
	if n.Name == "" {
		t.Fatal("no added node to remove")
	}
	if err := l.c.RemoveNode(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := l.kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node %s after remove: %v, want NotFound", n.Name, err)
	}
	w, err := l.cloud.World(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range w.Instances {
		if in.ID == n.InstanceID {
			t.Errorf("instance %s still in the cloud (%s)", in.ID, in.Status)
		}
	}
	for _, e := range w.ENIs {
		if e.InstanceID == n.InstanceID || e.Tags[cloud.TagInstanceID] == n.InstanceID && e.Status == admin.ENIAvailable {
			t.Errorf("ENI %s of the removed node left: %s on %q", e.ID, e.Status, e.InstanceID)
		}
	}
	if got := l.node(n.Name).Status; got != cluster.NodeReleased {
		t.Errorf("state says %s is %q, want released", n.Name, got)
	}
	if _, err := os.Stat(filepath.Dir(n.Root)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the removed node's disks are still there: %v", err)
	}
	// Its pods were evicted and run elsewhere.
	pods := l.podsReady(ctx)
	for _, p := range pods {
		if p.Spec.NodeName == n.Name {
			t.Errorf("pod %s still on the removed node", p.Name)
		}
	}
	if err := l.c.StartNode(ctx, n.Name); !errors.Is(err, cluster.ErrNodeState) {
		t.Errorf("start of a released node: %v, want ErrNodeState", err)
	}
}

func (l *opsLab) audit(ctx context.Context) {
	st, err := cluster.ReadState(l.dir)
	if err != nil {
		l.t.Fatal(err)
	}
	r, err := audit.RunUntilClean(ctx, st.AuditInput(l.kube), 3*time.Minute)
	if err != nil {
		l.t.Fatal(err)
	}
	if !r.Clean() {
		var b strings.Builder
		_ = r.WriteText(&b)
		l.t.Errorf("audit not clean:\n%s", b.String())
	}
}

// waitFor polls check until it succeeds, for up to five minutes.
func (l *opsLab) waitFor(ctx context.Context, what string, check func(context.Context) error) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return
		}
		select {
		case <-ctx.Done():
			l.t.Fatalf("waiting for %s: %v (last: %v)", what, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
