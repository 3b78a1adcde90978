package scenarios

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/audit"
	"github.com/terway-sim/terway/lab/cluster"
	"github.com/terway-sim/terway/lab/workload"
)

// The environment the suite reads (terway-lab env prints all four).
const (
	envKubeconfig = "KUBECONFIG"
	envCloudURL   = "FAKECLOUD_URL"
	envCloudToken = "FAKECLOUD_ADMIN_TOKEN"
	envLabDir     = "TERWAY_LAB_DIR"
)

// Env is what the suite may use, by tier:
//
//  1. the API server (KUBECONFIG): always, or the suite is skipped;
//  2. fakecloud's admin API (FAKECLOUD_URL + FAKECLOUD_ADMIN_TOKEN, or
//     the lab state's): Cloud;
//  3. the nodes themselves (TERWAY_LAB_DIR: the lab state, for the audit
//     of stores, pools and network namespaces): Lab.
//
// A missing tier leaves its field empty and its reason in noCloud/noLab.
type Env struct {
	Config *rest.Config
	Kube   kubernetes.Interface
	Exec   *workload.Executor

	CloudURL, CloudToken string
	Lab                  *cluster.State

	noCloud, noLab string
}

// loadEnv reads the environment. skip is the reason to skip the whole
// suite (no KUBECONFIG); err is a KUBECONFIG that is there but broken.
func loadEnv() (env *Env, skip string, err error) {
	kubeconfig := os.Getenv(envKubeconfig)
	if kubeconfig == "" {
		// ~/.kube/config is not used on purpose: `go test ./...` must not
		// start pods on whatever cluster a developer's default context is.
		return nil, "KUBECONFIG is not set: no cluster to run scenarios against (eval $(terway-lab env) for the lab)", nil
	}
	for _, p := range filepath.SplitList(kubeconfig) {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Sprintf("KUBECONFIG %s: %v (is the lab down?)", p, err), nil
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(),
		&clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load KUBECONFIG %s: %w", kubeconfig, err)
	}
	env = &Env{Config: cfg}
	if env.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, "", fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	if env.Exec, err = workload.NewExecutor(cfg); err != nil {
		return nil, "", err
	}
	env.loadLab()
	env.loadCloud()
	return env, "", nil
}

func (e *Env) loadLab() {
	dir := os.Getenv(envLabDir)
	if dir == "" {
		e.noLab = envLabDir + " is not set (tier 3 needs the lab's state and root on the lab's machine)"
		return
	}
	st, err := cluster.ReadState(dir)
	switch {
	case err != nil:
		e.noLab = fmt.Sprintf("%s=%s: %v", envLabDir, dir, err)
	case st.Phase != cluster.PhaseReady:
		e.noLab = fmt.Sprintf("lab in %s is %q, not %q", dir, st.Phase, cluster.PhaseReady)
	default:
		e.Lab = st
	}
}

func (e *Env) loadCloud() {
	e.CloudURL, e.CloudToken = os.Getenv(envCloudURL), os.Getenv(envCloudToken)
	if (e.CloudURL == "" || e.CloudToken == "") && e.Lab != nil {
		e.CloudURL, e.CloudToken = e.Lab.FakecloudURL, e.Lab.AdminToken
	}
	if e.CloudURL == "" || e.CloudToken == "" {
		e.CloudURL, e.CloudToken = "", ""
		e.noCloud = envCloudURL + " and " + envCloudToken + " are not both set (tier 2 needs fakecloud's admin API)"
	}
}

// Tiers says which tiers are available, for the suite's log.
func (e *Env) Tiers() string {
	s := "tier 1 (API server " + e.Config.Host + "): yes"
	if e.noCloud != "" {
		s += "; tier 2 (fakecloud): no: " + e.noCloud
	} else {
		s += "; tier 2 (fakecloud " + e.CloudURL + "): yes"
	}
	if e.noLab != "" {
		s += "; tier 3 (nodes): no: " + e.noLab
	} else {
		s += "; tier 3 (lab " + e.Lab.Name + ", mode " + string(e.Lab.Mode) + "): yes"
	}
	return s
}

// LabState reads the lab's state again (tier 3): nodes come and go
// (node add, remove and release, chaos plans), and a spec must see, audit
// and target the nodes the lab has now, not those it had when the suite
// started.
func (e *Env) LabState() *cluster.State {
	GinkgoHelper()
	e.RequireLab()
	st, err := cluster.ReadState(e.Lab.Dir)
	Expect(err).NotTo(HaveOccurred(), "read the lab's state in %s", e.Lab.Dir)
	return st
}

// RequireCloud skips the current spec without tier 2.
func (e *Env) RequireCloud() {
	if e.noCloud != "" {
		Skip("tier 2 unavailable: " + e.noCloud)
	}
}

// RequireLab skips the current spec without tier 3.
func (e *Env) RequireLab() {
	if e.noLab != "" {
		Skip("tier 3 unavailable: " + e.noLab)
	}
}

// World reads fakecloud's world (tier 2).
func (e *Env) World(ctx context.Context) *admin.WorldView {
	GinkgoHelper()
	w, err := (&admin.Client{URL: e.CloudURL, Token: e.CloudToken}).World(ctx)
	Expect(err).NotTo(HaveOccurred())
	return w
}

// Audit runs the lab's audit until it is clean or within has passed
// (tier 3) and returns the last report.
func (e *Env) Audit(ctx context.Context, within time.Duration) *audit.Report {
	GinkgoHelper()
	e.RequireLab()
	r, err := audit.RunUntilCleanOf(ctx, cluster.LiveAuditInput(e.Lab.Dir, e.Kube), within)
	Expect(err).NotTo(HaveOccurred())
	return r
}

// Terway reads terway's mode and pool settings; without a terway
// DaemonSet the spec is skipped (the cluster runs another CNI).
func (e *Env) Terway(ctx context.Context) workload.Terway {
	GinkgoHelper()
	t, err := workload.TerwayConfig(ctx, e.Kube)
	if err != nil {
		Skip("terway is not deployed as deploy/ does it: " + err.Error())
	}
	return t
}

// SchedulableNodes lists the Ready nodes without NoSchedule/NoExecute
// taints: where the workload's pods can go.
func (e *Env) SchedulableNodes(ctx context.Context) []corev1.Node {
	GinkgoHelper()
	list, err := e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var out []corev1.Node
	for _, n := range list.Items {
		if nodeReady(n) && !n.Spec.Unschedulable && !hardTainted(n) {
			out = append(out, n)
		}
	}
	return out
}

// Nodes lists every node.
func (e *Env) Nodes(ctx context.Context) []corev1.Node {
	GinkgoHelper()
	list, err := e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	return list.Items
}

// AllPods lists every pod of the cluster.
func (e *Env) AllPods(ctx context.Context) []corev1.Pod {
	GinkgoHelper()
	list, err := e.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	return list.Items
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hardTainted(n corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// uniqueNamespace is a fresh namespace name with the given prefix.
func uniqueNamespace(prefix string) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "scn-" + prefix + "-" + hex.EncodeToString(b)
}

// deployWorkload deploys spec, registers its deletion as cleanup (also
// when the spec fails) and waits for want Ready pods, recording their
// ready latency. It returns the workload, its pods and the recorder.
func deployWorkload(ctx context.Context, env *Env, spec workload.Spec, wait time.Duration) (*workload.Workload, []corev1.Pod, *workload.LatencyRecorder) {
	GinkgoHelper()
	w, err := workload.New(env.Kube, spec)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		By("deleting namespace " + spec.Namespace)
		Expect(w.Delete(ctx)).To(Succeed())
	}, NodeTimeout(3*time.Minute))
	rec, err := workload.RecordReadyLatency(ctx, env.Kube, spec.Namespace, w.Selector())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(rec.Stop)
	Expect(w.Deploy(ctx)).To(Succeed())
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	pods, err := w.WaitReady(waitCtx, int(spec.Replicas))
	Expect(err).NotTo(HaveOccurred())
	return w, pods, rec
}

// reportChecks logs connectivity checks and fails with the failed ones.
func reportChecks(checks []workload.Check) {
	GinkgoHelper()
	var lines []string
	for _, c := range checks {
		lines = append(lines, c.String())
	}
	AddReportEntry("connectivity", strings.Join(lines, "\n"), ReportEntryVisibilityFailureOrVerbose)
	Expect(checks).NotTo(BeEmpty(), "no checks could be made")
	Expect(workload.Failed(checks)).To(BeEmpty(), "failed checks:\n%s", strings.Join(lines, "\n"))
}

// Cloud is fakecloud's admin client (tier 2).
func (e *Env) Cloud() *admin.Client {
	return &admin.Client{URL: e.CloudURL, Token: e.CloudToken}
}

// NodeNetNS is the path of a lab node's network namespace (tier 3).
func (e *Env) NodeNetNS(node string) string {
	GinkgoHelper()
	for _, n := range e.LabState().Nodes {
		if n.Name == node {
			return n.NetNS
		}
	}
	Fail("node " + node + " is not in the lab's state")
	return ""
}

// PodNetNS is a path to the network namespace of a running pod, for
// reading it from the lab's machine (tier 3): the pod names its namespace
// (readlink /proc/self/ns/net, run through the API server), and a
// process of the machine in that namespace lends its /proc entry.
func (e *Env) PodNetNS(ctx context.Context, p corev1.Pod) string {
	GinkgoHelper()
	res, err := e.Exec.Exec(ctx, p.Namespace, p.Name, "", []string{"readlink", "/proc/self/ns/net"})
	Expect(err).NotTo(HaveOccurred())
	want := strings.TrimSpace(res.Stdout)
	Expect(want).To(HavePrefix("net:["), "readlink in %s/%s: %s", p.Namespace, p.Name, res.Stderr)
	procs, err := os.ReadDir("/proc")
	Expect(err).NotTo(HaveOccurred())
	for _, d := range procs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		path := filepath.Join("/proc", d.Name(), "ns", "net")
		if got, err := os.Readlink(path); err == nil && got == want {
			return path
		}
	}
	Fail(fmt.Sprintf("no process of this machine is in %s/%s's network namespace %s", p.Namespace, p.Name, want))
	return ""
}

// NodeConfig is one node's dynamic config (the terway-config label and
// its ConfigMap) for the length of a spec container.
type NodeConfig struct {
	env        *Env
	node, name string
}

// NodeConfig returns node's dynamic config, not set yet, and registers
// its removal: when the container (or spec) that called it ends, the
// label and ConfigMap go and the node's terway is restarted, so the next
// spec finds the daemon on the base config.
func (e *Env) NodeConfig(node string) *NodeConfig {
	c := &NodeConfig{env: e, node: node, name: uniqueNamespace("conf")}
	DeferCleanup(func(ctx SpecContext) {
		By("node " + node + ": dynamic config removed, terway restarted")
		Expect(workload.ClearNodeConfig(ctx, e.Kube, node, c.name)).To(Succeed())
		Expect(workload.RestartTerway(ctx, e.Kube, node)).To(Succeed())
	}, NodeTimeout(3*time.Minute))
	return c
}

// Apply sets the node's dynamic config to patch (merged over
// eni-config's eni_conf) and restarts its terway pod so that the daemon
// reads it.
func (c *NodeConfig) Apply(ctx context.Context, patch map[string]any) {
	GinkgoHelper()
	By(fmt.Sprintf("node %s: dynamic config %s %v, terway restarted", c.node, c.name, patch))
	Expect(workload.SetNodeConfig(ctx, c.env.Kube, c.node, c.name, patch)).To(Succeed())
	Expect(workload.RestartTerway(ctx, c.env.Kube, c.node)).To(Succeed())
}

// NodeCondition is the status and reason of the node's condition t
// ("" when it has none).
func (e *Env) NodeCondition(ctx context.Context, node string, t corev1.NodeConditionType) (corev1.ConditionStatus, string) {
	GinkgoHelper()
	n, err := e.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// EventReasons counts the events of each reason about the pods of a
// namespace.
func (e *Env) EventReasons(ctx context.Context, namespace string) map[string]int {
	GinkgoHelper()
	list, err := e.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod"})
	Expect(err).NotTo(HaveOccurred())
	out := map[string]int{}
	for _, ev := range list.Items {
		out[ev.Reason] += int(max(ev.Count, 1))
	}
	return out
}

// NodeInstance is the instance of a node in the world (tier 2).
func (e *Env) NodeInstance(ctx context.Context, node corev1.Node) (admin.InstanceInfo, *admin.WorldView) {
	GinkgoHelper()
	world := e.World(ctx)
	id, ok := NodeInstance(node, world)
	Expect(ok).To(BeTrue(), "node %s has no instance in the world", node.Name)
	for _, in := range world.Instances {
		if in.ID == id {
			return in, world
		}
	}
	panic("unreachable")
}

// SchedulableNode is the first schedulable node by name, for the specs
// that work on one node's daemon; the spec is skipped without one.
func (e *Env) SchedulableNode(ctx context.Context) corev1.Node {
	GinkgoHelper()
	nodes := e.SchedulableNodes(ctx)
	if len(nodes) == 0 {
		Skip("no schedulable node")
	}
	return slices.MinFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
}

// RequireMode skips the spec unless terway runs in mode m, and returns
// terway's settings.
func (e *Env) RequireMode(ctx context.Context, m mode.Mode) workload.Terway {
	GinkgoHelper()
	tw := e.Terway(ctx)
	if tw.Mode != m {
		Skip(fmt.Sprintf("terway runs in %s mode, this scenario needs %s", tw.Mode, m))
	}
	return tw
}

// NodeCounts runs the audit once (tier 3) and returns its counts for
// node, with the report.
func (e *Env) NodeCounts(ctx context.Context, node string) (audit.Counts, *audit.Report) {
	GinkgoHelper()
	r, err := audit.Run(ctx, e.LabState().AuditInput(e.Kube))
	Expect(err).NotTo(HaveOccurred())
	for _, n := range r.Nodes {
		if n.Name == node {
			return n.Counts, r
		}
	}
	Fail("the audit has no node " + node)
	return audit.Counts{}, r
}

// WorldIdle counts the addresses the world shows attached to node's
// instance that no pod holds: its daemon's idle pool as the cloud sees
// it (tier 2; see IdleAddresses).
func (e *Env) WorldIdle(ctx context.Context, m mode.Mode, node corev1.Node) int {
	GinkgoHelper()
	inst, world := e.NodeInstance(ctx, node)
	return IdleAddresses(m, world, inst.ID, HeldAddresses(e.AllPods(ctx))[node.Name])
}
