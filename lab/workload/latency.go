package workload

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Sample is one pod's way to Ready.
//
// Two latencies come from it. Latency is creationTimestamp → ReadySeen,
// the usual definition; but the API server keeps creationTimestamp in
// whole seconds (truncated), so it overstates by 0–1 s. WatchLatency is
// FirstSeen → ReadySeen, both on this process's clock with sub-millisecond
// resolution; for a pod created while the recorder runs, FirstSeen is
// within a watch delivery (milliseconds) of the creation, so it is the
// sharper figure. ReadyTransition, the kubelet's lastTransitionTime, is
// kept for reference only: whole seconds again, and the node's clock.
type Sample struct {
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	UID       types.UID `json:"uid"`
	Node      string    `json:"node"`
	// Created is the pod's creationTimestamp.
	Created time.Time `json:"created"`
	// FirstSeen is when the recorder first saw the pod (watch event or
	// the list it started or resumed with).
	FirstSeen time.Time `json:"firstSeen"`
	// ReadySeen is when the watch first delivered the pod with Ready=True.
	ReadySeen time.Time `json:"readySeen"`
	// ReadyTransition is the Ready condition's lastTransitionTime.
	ReadyTransition time.Time `json:"readyTransition"`
	// Resumed is set when Ready was first seen in a list after the watch
	// broke rather than in a watch event, so ReadySeen may be late.
	Resumed bool `json:"resumed,omitempty"`
}

// Latency is creationTimestamp → Ready as seen by the watch.
func (s Sample) Latency() time.Duration { return s.ReadySeen.Sub(s.Created) }

// WatchLatency is first seen → Ready seen, both by the watch.
func (s Sample) WatchLatency() time.Duration { return s.ReadySeen.Sub(s.FirstSeen) }

// LatencyRecorder watches pods and records a Sample for each pod that
// becomes Ready while it runs. Pods already Ready when it starts are not
// recorded; pods that were created earlier but become Ready later are.
type LatencyRecorder struct {
	pods     podWatcher
	selector string
	// match re-checks the selector on every pod: cheap, and some watch
	// sources (client-go's fake) do not filter.
	match   labels.Selector
	now     func() time.Time
	cancel  context.CancelFunc
	stopped chan struct{}

	mu      sync.Mutex
	ignored map[types.UID]bool
	pending map[types.UID]*Sample
	done    map[types.UID]Sample
	// changed is closed (and replaced) whenever a sample is added.
	changed chan struct{}
	err     error
}

// podWatcher is the part of the pod client the recorder uses.
type podWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// RecordReadyLatency starts a LatencyRecorder for the pods matching
// selector in namespace (which need not exist yet). The watch is open
// when it returns, so pods created afterwards are all seen from their
// creation. Stop ends it; so does the end of ctx.
func RecordReadyLatency(ctx context.Context, kube kubernetes.Interface, namespace, selector string) (*LatencyRecorder, error) {
	return startRecorder(ctx, kube.CoreV1().Pods(namespace), selector, time.Now)
}

func newRecorder(pods podWatcher, selector labels.Selector, now func() time.Time) *LatencyRecorder {
	return &LatencyRecorder{
		pods: pods, selector: selector.String(), match: selector, now: now, stopped: make(chan struct{}),
		ignored: map[types.UID]bool{}, pending: map[types.UID]*Sample{}, done: map[types.UID]Sample{},
		changed: make(chan struct{}),
	}
}

func startRecorder(ctx context.Context, pods podWatcher, selector string, now func() time.Time) (*LatencyRecorder, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("latency recorder: selector %q: %w", selector, err)
	}
	r := newRecorder(pods, sel, now)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("latency recorder: list pods %s: %w", selector, err)
	}
	at := now()
	for i := range list.Items {
		if IsReady(&list.Items[i]) {
			r.ignored[list.Items[i].UID] = true
			continue
		}
		r.observe(&list.Items[i], at, false)
	}
	w, err := r.watch(ctx, list.ResourceVersion)
	if err != nil {
		return nil, err
	}
	ctx, r.cancel = context.WithCancel(ctx)
	go r.run(ctx, w)
	return r, nil
}

func (r *LatencyRecorder) watch(ctx context.Context, rv string) (watch.Interface, error) {
	w, err := r.pods.Watch(ctx, metav1.ListOptions{LabelSelector: r.selector, ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return nil, fmt.Errorf("latency recorder: watch pods %s: %w", r.selector, err)
	}
	return w, nil
}

// run consumes the watch and, when it ends or fails, lists again and
// opens a new one, until ctx ends.
func (r *LatencyRecorder) run(ctx context.Context, w watch.Interface) {
	defer close(r.stopped)
	for {
		rv := r.consume(ctx, w)
		w.Stop()
		var err error
		for w = nil; w == nil && ctx.Err() == nil; {
			if rv == "" {
				rv, err = r.resync(ctx)
			}
			if err == nil {
				w, err = r.watch(ctx, rv)
			}
			if err != nil {
				r.setErr(err)
				rv = ""
				sleep(ctx, time.Second)
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// consume handles events until the watch ends; it returns the resource
// version to resume from, or "" when a new list is needed.
func (r *LatencyRecorder) consume(ctx context.Context, w watch.Interface) string {
	rv := ""
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
				pod, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					continue
				}
				rv = pod.ResourceVersion
				switch ev.Type {
				case watch.Deleted:
					r.forget(pod.UID)
				case watch.Added, watch.Modified:
					r.observe(pod, r.now(), false)
				}
			case watch.Error:
				// Mostly 410 Gone: the resource version is too old.
				err := apierrors.FromObject(ev.Object)
				slog.Debug("latency recorder: watch error, listing again", "selector", r.selector, "err", err)
				return ""
			}
		}
	}
}

// resync lists the pods after a broken watch; a pod found Ready is
// recorded as Resumed.
func (r *LatencyRecorder) resync(ctx context.Context) (string, error) {
	list, err := r.pods.List(ctx, metav1.ListOptions{LabelSelector: r.selector})
	if err != nil {
		return "", fmt.Errorf("latency recorder: list pods %s again: %w", r.selector, err)
	}
	at := r.now()
	for i := range list.Items {
		r.observe(&list.Items[i], at, true)
	}
	return list.ResourceVersion, nil
}

// observe notes a state of a pod seen at the given time.
func (r *LatencyRecorder) observe(pod *corev1.Pod, at time.Time, resumed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ignored[pod.UID] || !r.match.Matches(labels.Set(pod.Labels)) {
		return
	}
	if _, ok := r.done[pod.UID]; ok {
		return
	}
	s := r.pending[pod.UID]
	if s == nil {
		s = &Sample{Namespace: pod.Namespace, Pod: pod.Name, UID: pod.UID,
			Created: pod.CreationTimestamp.Time, FirstSeen: at}
		r.pending[pod.UID] = s
	}
	if pod.Spec.NodeName != "" {
		s.Node = pod.Spec.NodeName
	}
	if !IsReady(pod) {
		return
	}
	s.ReadySeen, s.Resumed = at, resumed
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			s.ReadyTransition = c.LastTransitionTime.Time
		}
	}
	r.done[pod.UID] = *s
	delete(r.pending, pod.UID)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *LatencyRecorder) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pending, uid)
}

func (r *LatencyRecorder) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// Err is the last error the watch met (it keeps retrying).
func (r *LatencyRecorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Samples returns the samples recorded so far, in the order the pods
// became Ready.
func (r *LatencyRecorder) Samples() []Sample {
	r.mu.Lock()
	out := make([]Sample, 0, len(r.done))
	for _, s := range r.done {
		out = append(out, s)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ReadySeen.Equal(out[j].ReadySeen) {
			return out[i].ReadySeen.Before(out[j].ReadySeen)
		}
		return out[i].Pod < out[j].Pod
	})
	return out
}

// Latencies are the samples' Latency values.
func (r *LatencyRecorder) Latencies() []time.Duration {
	return durations(r.Samples(), Sample.Latency)
}

// WatchLatencies are the samples' WatchLatency values.
func (r *LatencyRecorder) WatchLatencies() []time.Duration {
	return durations(r.Samples(), Sample.WatchLatency)
}

func durations(ss []Sample, f func(Sample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// Wait waits until at least n samples are recorded.
func (r *LatencyRecorder) Wait(ctx context.Context, n int) error {
	for {
		r.mu.Lock()
		got, changed := len(r.done), r.changed
		r.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d ready samples (%d so far): %w", n, got, ctx.Err())
		case <-changed:
		}
	}
}

// Stop ends the watch and waits for it to be closed.
func (r *LatencyRecorder) Stop() {
	r.cancel()
	<-r.stopped
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
