package workload

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/internal/testwait"
)

// clock is a settable time source for the recorder.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func readyAt(p corev1.Pod, transition time.Time) corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(transition)}}
	return p
}

func created(p corev1.Pod, at time.Time) corev1.Pod {
	p.CreationTimestamp = metav1.NewTime(at)
	return p
}

func TestObserve(t *testing.T) {
	r := newRecorder(nil, labels.Everything(), nil)
	pending := created(notReady(podOn("a", "", "")), t0)
	r.observe(&pending, t0.Add(20*time.Millisecond), false)
	scheduled := pending
	scheduled.Spec.NodeName = "n1"
	r.observe(&scheduled, t0.Add(30*time.Millisecond), false)
	ready := readyAt(scheduled, t0.Add(time.Second))
	r.observe(&ready, t0.Add(1500*time.Millisecond), false)
	r.observe(&ready, t0.Add(9*time.Second), false) // later events change nothing

	got := r.Samples()
	if len(got) != 1 {
		t.Fatalf("samples: %+v", got)
	}
	s := got[0]
	if s.Node != "n1" || s.Latency() != 1500*time.Millisecond || s.WatchLatency() != 1480*time.Millisecond ||
		!s.ReadyTransition.Equal(t0.Add(time.Second)) || s.Resumed {
		t.Errorf("sample: %+v (latency %v, watch latency %v)", s, s.Latency(), s.WatchLatency())
	}

	// A pod deleted before it was ready leaves no sample.
	b := created(notReady(podOn("b", "n1", "")), t0)
	r.observe(&b, t0, false)
	r.forget(b.UID)
	if len(r.pending) != 0 || len(r.Samples()) != 1 {
		t.Errorf("forgotten pod kept: pending %v", r.pending)
	}
}

func TestRecorderWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	already := created(readyAt(podOn("old", "n1", "10.0.0.1"), t0), t0)
	inflight := created(notReady(podOn("inflight", "n1", "")), t0)
	other := created(notReady(podOn("other", "n1", "")), t0)
	other.Labels = map[string]string{AppLabel: "other"}
	for _, p := range []*corev1.Pod{&already, &inflight, &other} {
		p.Namespace = "wl"
	}
	kube := fake.NewClientset(&already, &inflight, &other)
	clk := &clock{t: t0.Add(100 * time.Millisecond)}
	r, err := startRecorder(ctx, kube.CoreV1().Pods("wl"), Spec{}.Selector(), clk.now)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()

	pods := kube.CoreV1().Pods("wl")
	fresh := created(notReady(podOn("fresh", "n2", "")), t0.Add(time.Second))
	fresh.Namespace = "wl"
	clk.set(t0.Add(1200 * time.Millisecond))
	if _, err := pods.Create(ctx, &fresh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPending(t, r, 2)
	clk.set(t0.Add(2 * time.Second))
	for _, p := range []corev1.Pod{readyAt(fresh, t0.Add(2*time.Second)), readyAt(inflight, t0.Add(2*time.Second)),
		readyAt(other, t0)} {
		if _, err := pods.UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Wait(ctx, 2); err != nil {
		t.Fatal(err)
	}
	byName := map[string]Sample{}
	for _, s := range r.Samples() {
		byName[s.Pod] = s
	}
	if len(byName) != 2 {
		t.Fatalf("samples %v: want fresh and inflight only (old was ready, other is not selected)", byName)
	}
	if f := byName["fresh"]; f.Latency() != time.Second || f.WatchLatency() != 800*time.Millisecond || f.Node != "n2" {
		t.Errorf("fresh: %+v", f)
	}
	if i := byName["inflight"]; i.Latency() != 2*time.Second || i.WatchLatency() != 1900*time.Millisecond {
		t.Errorf("inflight (created before the recorder): %+v", i)
	}
	if s := Summarize(r.Latencies()); s.Count != 2 || s.Max != 2*time.Second {
		t.Errorf("summary %v", s)
	}
	if got := r.WatchLatencies(); len(got) != 2 {
		t.Errorf("watch latencies %v", got)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := r.Wait(short, 3); err == nil {
		t.Error("Wait for a third sample returned without one")
	}
}

// waitPending waits until the recorder has seen n pods that are not ready
// yet, so that a later clock change is not taken for their first sight.
func waitPending(t *testing.T, r *LatencyRecorder, n int) {
	t.Helper()
	testwait.Until(t, 5*time.Second, fmt.Sprintf("%d pending pods seen by the recorder", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.pending) >= n
	})
}
