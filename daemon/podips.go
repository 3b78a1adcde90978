package daemon

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/k8s"
)

// podIPsPatchTimeout bounds one patch of the pod-ips annotation; a hung
// API call then counts as a failure and is retried.
const podIPsPatchTimeout = 30 * time.Second

// podIPsWorkers patch in parallel, so that one slow pod does not hold up
// the others.
const podIPsWorkers = 2

// podIPsWriter writes the annotation k8s.aliyun.com/pod-ips
// (enable_patch_pod_ips) off the reply path: AllocIP records the wanted
// value and queues the pod (O(1), never waiting on the API server);
// workers patch it. The queue is keyed by pod, so a pod waiting to be
// patched is patched once, with the latest value wanted. A failed patch is
// retried with the backoff "kubernetes" (backoff_override), without limit;
// its InitialDelay, when set, is waited before a pod's first patch. A pod
// that is gone, or replaced by another of the same name, is dropped.
type podIPsWriter struct {
	kube  podIPsPatcher
	queue workqueue.TypedRateLimitingInterface[string]
	log   *slog.Logger
	// initialDelay is the policy's InitialDelay, which the rate limiter
	// (a wait.Backoff) has no place for.
	initialDelay time.Duration

	mu   sync.Mutex
	want map[string]podIPsWant // pod key → latest wanted value
}

// podIPsPatcher is k8s.Client.PatchPodIPs.
type podIPsPatcher interface {
	PatchPodIPs(ctx context.Context, namespace, name, uid, value string) (bool, error)
}

type podIPsWant struct{ namespace, name, uid, value string }

func newPodIPsWriter(kube podIPsPatcher, p backoff.Policy, clk clock.WithTicker, log *slog.Logger) *podIPsWriter {
	q := workqueue.NewTypedRateLimitingQueueWithConfig[string](newBackoffLimiter(p.Backoff()),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk})
	return &podIPsWriter{kube: kube, queue: q, log: log, initialDelay: p.InitialDelay, want: map[string]podIPsWant{}}
}

// enqueue asks for the pod's annotation to become value. It never blocks
// on the API server; a nil writer (enable_patch_pod_ips off) does nothing.
func (w *podIPsWriter) enqueue(pod k8s.Pod, value string) {
	if w == nil || value == "" {
		return
	}
	key := pod.Key()
	w.mu.Lock()
	w.want[key] = podIPsWant{namespace: pod.Namespace, name: pod.Name, uid: pod.UID, value: value}
	w.mu.Unlock()
	if w.initialDelay > 0 {
		w.queue.AddAfter(key, w.initialDelay)
		return
	}
	w.queue.Add(key)
}

// run patches until ctx ends; then the queue shuts down and what is left
// in it is dropped (the next daemon's restore has the store).
func (w *podIPsWriter) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range podIPsWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
}

// next patches one pod; false when the queue has shut down.
func (w *podIPsWriter) next(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	w.mu.Lock()
	want, ok := w.want[key]
	w.mu.Unlock()
	if !ok {
		w.queue.Forget(key)
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, podIPsPatchTimeout)
	patched, err := w.kube.PatchPodIPs(pctx, want.namespace, want.name, want.uid, want.value)
	cancel()
	if err != nil && ctx.Err() == nil && !k8s.IsNotFound(err) && !errors.Is(err, k8s.ErrPodReplaced) {
		w.log.Warn("annotating a pod with its addresses failed; will retry", "pod", key, "annotation", k8s.AnnotationPodIPs,
			"value", want.value, "attempt", w.queue.NumRequeues(key)+1, "err", err)
		w.queue.AddRateLimited(key)
		return true
	}
	switch {
	case err == nil && patched:
		w.log.Debug("pod annotated with its addresses", "pod", key, "annotation", k8s.AnnotationPodIPs, "value", want.value)
	case err != nil && ctx.Err() == nil:
		w.log.Info("not annotating a pod that is gone", "pod", key, "err", err)
	}
	w.queue.Forget(key)
	w.mu.Lock()
	if w.want[key] == want { // a newer value stays, and the key is queued again
		delete(w.want, key)
	}
	w.mu.Unlock()
	return true
}

// pending is how many pods wait for their annotation (tests).
func (w *podIPsWriter) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.want)
}

// backoffLimiter is a workqueue rate limiter following a backoff policy:
// the n-th retry of an item waits Duration × Factor^(n-1) with the policy's
// jitter, growing for Steps retries (or up to Cap) and then staying there.
type backoffLimiter struct {
	b   wait.Backoff
	max time.Duration

	mu       sync.Mutex
	failures map[string]int
}

func newBackoffLimiter(b wait.Backoff) *backoffLimiter {
	if b.Duration <= 0 {
		b.Duration = time.Millisecond
	}
	if b.Factor < 1 {
		b.Factor = 1
	}
	steps := max(b.Steps, 1)
	top := float64(b.Duration) * math.Pow(b.Factor, float64(steps-1))
	if b.Cap > 0 {
		top = math.Min(top, float64(b.Cap))
	}
	return &backoffLimiter{b: b, max: time.Duration(math.Min(top, float64(time.Hour))), failures: map[string]int{}}
}

func (l *backoffLimiter) When(item string) time.Duration {
	l.mu.Lock()
	n := l.failures[item]
	l.failures[item] = n + 1
	l.mu.Unlock()
	d := time.Duration(math.Min(float64(l.b.Duration)*math.Pow(l.b.Factor, float64(n)), float64(l.max)))
	if l.b.Jitter > 0 {
		d += time.Duration(rand.Float64() * l.b.Jitter * float64(d))
	}
	return d
}

func (l *backoffLimiter) Forget(item string) {
	l.mu.Lock()
	delete(l.failures, item)
	l.mu.Unlock()
}

func (l *backoffLimiter) NumRequeues(item string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[item]
}
