package timeline

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/fakecloud"
	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/internal/fakecloudtest"
	"github.com/terway-sim/terway/internal/noproxy"
	"github.com/terway-sim/terway/internal/testwait"
)

func TestMain(m *testing.M) { noproxy.Main(m) }

const (
	testAK, testSecret = "LTAItimeline0001", "timeline-secret"
	adminToken         = "timeline-admin"
	workloadNS         = "chaos-workload"
)

// cloud is an in-process fakecloud with its admin client and a VPC
// client of the real SDK.
type cloud struct {
	admin *admin.Client
	vpc   *vpc.Client
}

func startCloud(t *testing.T) *cloud {
	t.Helper()
	spec := fakecloud.DefaultSpec()
	spec.AccessKeys = []fakecloud.AccessKeySpec{{ID: testAK, Secret: testSecret}}
	srv := fakecloudtest.Start(t, fakecloud.Options{Spec: &spec, Seed: 11, AdminToken: adminToken}, "")
	return &cloud{admin: &admin.Client{URL: srv.API.URL, Token: adminToken}, vpc: fakecloudtest.VPCClient(t, srv.API.URL, testAK, testSecret)}
}

// describe makes n DescribeVSwitches calls, whatever they answer.
func (c *cloud) describe(n int) {
	for range n {
		_, _ = c.vpc.DescribeVSwitches(vpc.CreateDescribeVSwitchesRequest())
	}
}

func workloadPod(name string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: workloadNS, UID: types.UID("uid-" + name)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "192.168.0.9",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func daemonPod(name, node string, restarts int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID("uid-" + name),
			Labels: map[string]string{"app": "terway"}},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "terwayd", RestartCount: restarts}, {Name: "sidecar"}}},
	}
}

func daemonSet() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "terway", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "terway"}}}}
}

func update(t *testing.T, kube kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	if _, err := kube.CoreV1().Pods(p.Namespace).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestSamplerFollowsTheLab: calls by outcome since Start (throttling
// summed apart), pods Ready against all, and daemon restarts with their
// node and cause, next to the bands the engine handed in.
func TestSamplerFollowsTheLab(t *testing.T) {
	ctx := context.Background()
	c := startCloud(t)
	c.describe(2) // before Start: not the run's
	kube := fake.NewClientset(daemonSet(),
		daemonPod("terway-a", "node-1", 4), daemonPod("terway-b", "node-2", 0),
		workloadPod("web-1", true), workloadPod("web-2", false), workloadPod("web-3", false))
	s, err := Start(ctx, Config{Calls: c.admin, Kube: kube, Namespace: workloadNS, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.describe(3)
	end := s.Begin("storm", "cloud", "DescribeVSwitches")
	if _, err := c.admin.AddFault(ctx, admin.Fault{Kind: admin.FaultError, Action: "DescribeVSwitches", Code: "Throttling.User", Status: 400, Count: 4}); err != nil {
		t.Fatal(err)
	}
	c.describe(4)
	end()
	testwait.Until(t, 10*time.Second, "the throttled calls sampled", func() bool { return sumThrottled(s.Snapshot()) == 4 })

	for _, name := range []string{"web-2", "web-3"} {
		update(t, kube, workloadPod(name, true))
	}
	restarted := daemonPod("terway-a", "node-1", 5)
	restarted.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
		Reason: "Error", ExitCode: 137, FinishedAt: metav1.NewTime(time.Unix(1_700_000_000, 0))}
	update(t, kube, restarted)
	if err := kube.CoreV1().Pods("kube-system").Delete(ctx, "terway-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Pods("kube-system").Create(ctx, daemonPod("terway-c", "node-2", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "the restarts sampled", func() bool { return len(s.Snapshot().Restarts) == 2 })
	before := len(s.Snapshot().Samples)
	s.SampleNow()
	if got := s.Snapshot(); len(got.Samples) <= before || got.Samples[len(got.Samples)-1].PodsReady != 3 {
		t.Errorf("SampleNow did not add a sample showing the 3 Ready pods: %d samples before, %+v", before, got.Samples[len(got.Samples)-1])
	}
	s.Begin("kill", "process", "node-1") // left open: Stop closes it
	tl := s.Stop()

	if got := sumCalls(tl, admin.OutcomeSuccess); got != 3 {
		t.Errorf("%d successful calls in the timeline, want the 3 made after Start", got)
	}
	if got := tl.Outcomes(); strings.Join(got, ",") != "Success,Throttling.User" {
		t.Errorf("outcomes %v, want Success first, then the throttling code", got)
	}
	last := tl.Samples[len(tl.Samples)-1]
	if last.PodsReady != 3 || last.Pods != 3 || last.Restarts != 2 || last.Errors != nil {
		t.Errorf("last sample %+v, want 3/3 ready, 2 restarts, no errors", last)
	}
	if first := tl.Samples[0]; first.PodsReady != 1 || first.Pods != 3 || first.At != 0 {
		t.Errorf("first sample %+v, want 1/3 ready at 0", first)
	}
	r := tl.Restarts
	if r[0].Node != "node-1" || r[0].Container != "terwayd" || r[0].Count != 1 || r[0].Cause != "Error, exit code 137" || r[0].FinishedAt.Unix() != 1_700_000_000 {
		t.Errorf("container restart %+v", r[0])
	}
	if r[1].Node != "node-2" || r[1].Pod != "terway-c" || r[1].Cause != "pod replaced terway-b" {
		t.Errorf("pod replacement %+v", r[1])
	}
	if len(tl.Bands) != 2 || tl.Bands[0].End.After(tl.Bands[1].Start) || !tl.Bands[1].End.Equal(tl.End) {
		t.Errorf("bands %+v (end %v), want storm closed by the engine, kill closed by Stop", tl.Bands, tl.End)
	}
	if again := s.Stop(); len(again.Samples) != len(tl.Samples) {
		t.Error("a second Stop sampled again")
	}
}

func sumCalls(tl *Timeline, outcome string) int64 {
	var n int64
	for _, s := range tl.Samples {
		n += s.Calls[outcome]
	}
	return n
}

func sumThrottled(tl *Timeline) int64 {
	var n int64
	for _, s := range tl.Samples {
		n += s.Throttled
	}
	return n
}

// scripted is a CallCounter that answers its script, one entry per
// read, then the last one again.
type scripted struct {
	mu     sync.Mutex
	script [][]admin.CallStat
	err    error
}

func (c *scripted) Calls(context.Context) ([]admin.CallStat, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	out := c.script[0]
	if len(c.script) > 1 {
		c.script = c.script[1:]
	}
	return out, nil
}

// TestSamplerCounterResetAndErrors: calls are deltas over the time they
// span, a counter reset counts what it shows as new, and a source that
// cannot be read is an error of its sample, the next read covering the
// gap.
func TestSamplerCounterResetAndErrors(t *testing.T) {
	calls := &scripted{script: [][]admin.CallStat{
		{{Action: "A", Outcome: "Success", Count: 10}},
		{{Action: "A", Outcome: "Success", Count: 16}, {Action: "B", Outcome: "Throttling", Count: 2}},
		{{Action: "A", Outcome: "Success", Count: 3}},
		{{Action: "A", Outcome: "Success", Count: 7}},
	}}
	// The clock advances a second per reading; the test goroutine is its
	// only reader, as the Sampler never ticks in an hour.
	clock := time.Unix(0, 0)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	// No DaemonSet and no workload namespace: pods list empty, daemon
	// unreadable.
	s, err := Start(context.Background(), Config{Calls: calls, Kube: fake.NewClientset(), Namespace: "none", Interval: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	s.sample(now())
	s.sample(now())
	calls.mu.Lock()
	calls.err = context.DeadlineExceeded
	calls.mu.Unlock()
	s.sample(now())
	calls.mu.Lock()
	calls.err = nil
	calls.mu.Unlock()
	tl := s.Stop()
	got := tl.Samples
	if len(got) != 5 {
		t.Fatalf("%d samples, want 5", len(got))
	}
	if got[0].Calls != nil || got[1].Calls["Success"] != 6 || got[1].Throttled != 2 || got[1].Rate(got[1].Calls["Success"]) != 6 || got[1].At.D() != time.Second {
		t.Errorf("baseline then deltas: %+v, %+v", got[0], got[1])
	}
	if got[2].Calls["Success"] != 3 || got[2].Calls["Throttling"] != 0 {
		t.Errorf("after a counter reset: %+v, want the 3 calls it shows", got[2])
	}
	if !strings.Contains(got[3].Errors[SourceCalls], "deadline") || got[4].Calls["Success"] != 4 || got[4].CallsOver.D() != 2*time.Second {
		t.Errorf("a failed read, then one covering the gap: %+v, %+v", got[3], got[4])
	}
	if !strings.Contains(got[0].Errors[SourceDaemon], "daemonset kube-system/terway") {
		t.Errorf("daemon read error %q", got[0].Errors[SourceDaemon])
	}
	if _, err := Start(context.Background(), Config{}); err == nil {
		t.Error("a Sampler with nothing to sample started")
	}
	if _, err := Start(context.Background(), Config{Kube: fake.NewClientset()}); err == nil {
		t.Error("a Sampler of pods without a namespace started")
	}
}
