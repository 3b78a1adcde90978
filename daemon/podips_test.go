package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/terway-sim/terway/daemon/backoff"
	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/internal/testwait"
)

// podIPsAnnotation is k8s.AnnotationPodIPs, spelt out so that these tests
// also say what the daemon did before it wrote the annotation.
const podIPsAnnotation = "k8s.aliyun.com/pod-ips"

// fastKubeRetry makes the "kubernetes" backoff (the pod-ips patch retries)
// quick.
func fastKubeRetry(l *lab) {
	l.conf = strings.Replace(l.conf, `"backoff_override":{`,
		`"backoff_override":{"kubernetes":{"Duration":"5ms","Factor":2,"Steps":3},`, 1)
}

func (l *lab) podAnnotation(ns, name, key string) (string, bool) {
	l.t.Helper()
	p, err := l.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	v, ok := p.Annotations[key]
	return v, ok
}

func waitAnnotation(t *testing.T, l *lab, ns, name, want string) {
	t.Helper()
	testwait.Until(t, waitLimit, "annotation "+podIPsAnnotation+"="+want+" on "+ns+"/"+name, func() bool {
		v, _ := l.podAnnotation(ns, name, podIPsAnnotation)
		return v == want
	})
}

// TestPodIPsAnnotationAfterAllocIP: with enable_patch_pod_ips (the
// default) the pod gets k8s.aliyun.com/pod-ips with the address AllocIP
// answered; with it off, the pod is not patched.
func TestPodIPsAnnotationAfterAllocIP(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		l := newLab(t)
		l.pod("default", "web", nil)
		_, c, _ := l.daemon(nil)
		rep := allocOK(t, c, "default", "web", "c1")
		waitAnnotation(t, l, "default", "web", podIP(rep))
	})
	t.Run("off", func(t *testing.T) {
		l := newLab(t)
		l.conf = strings.Replace(l.conf, `"max_pool_size":5`, `"enable_patch_pod_ips":false,"max_pool_size":5`, 1)
		var patches atomic.Int64
		l.kube.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			patches.Add(1)
			return false, nil, nil
		})
		l.pod("default", "web", nil)
		_, c, stop := l.daemon(nil)
		allocOK(t, c, "default", "web", "c1")
		stop() // whatever was queued would have run by now
		if v, ok := l.podAnnotation("default", "web", podIPsAnnotation); ok || patches.Load() != 0 {
			t.Errorf("enable_patch_pod_ips false: pod annotated %q, %d patches", v, patches.Load())
		}
	})
}

// TestPodIPsPatchRetried: a patch the API server refuses is retried (with
// the "kubernetes" backoff) until it lands.
func TestPodIPsPatchRetried(t *testing.T) {
	l := newLab(t)
	fastKubeRetry(l)
	const failures = 3
	var calls atomic.Int64
	l.kube.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) <= failures {
			return true, nil, errors.New("etcdserver: request timed out (test)")
		}
		return false, nil, nil
	})
	l.pod("default", "web", nil)
	_, c, _ := l.daemon(nil)
	rep := allocOK(t, c, "default", "web", "c1")
	waitAnnotation(t, l, "default", "web", podIP(rep))
	if n := calls.Load(); n != failures+1 {
		t.Errorf("patch calls = %d, want %d failures and one success", n, failures+1)
	}
}

// TestPodIPsPatchNotOnReplyPath: AllocIP answers while the annotation's
// patch hangs in the API server, for the pod being patched and for others;
// the annotation lands once the API server answers.
func TestPodIPsPatchNotOnReplyPath(t *testing.T) {
	l := newLab(t)
	entered := make(chan string, 16)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	// (The fake clientset holds its lock while a reactor runs, so every
	// other call to it waits too; AllocIP of a pod the informer has seen
	// makes none.)
	l.kube.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		entered <- a.(k8stesting.PatchAction).GetName()
		<-release // hangs until the test lets go
		return false, nil, nil
	})
	for _, n := range []string{"a", "b", "c"} {
		l.pod("default", n, nil)
	}
	_, c, _ := l.daemon(nil)
	t.Cleanup(unblock) // runs before the daemon's stop (cleanups are LIFO)

	timed := func(name, container string) string {
		t.Helper()
		done := make(chan string, 1)
		errc := make(chan error, 1)
		go func() {
			rep, err := alloc(t, c, "default", name, container)
			if err != nil {
				errc <- err
				return
			}
			done <- podIP(rep)
		}()
		select {
		case ip := <-done:
			return ip
		case err := <-errc:
			t.Fatalf("alloc %s: %v", name, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("AllocIP of %s did not return while a pod-ips patch hangs", name)
		}
		return ""
	}
	ipA := timed("a", "ca")
	select {
	case <-entered: // a's patch is now hanging
	case <-time.After(20 * time.Second):
		t.Fatal("the pod-ips patch never started")
	}
	// Patches hang in both workers now or soon; AllocIP does not care.
	ipB := timed("b", "cb")
	ipC := timed("c", "cc")
	unblock()
	waitAnnotation(t, l, "default", "a", ipA)
	waitAnnotation(t, l, "default", "b", ipB)
	waitAnnotation(t, l, "default", "c", ipC)
}

// fakePatcher answers PatchPodIPs from a script.
type fakePatcher struct {
	mu    sync.Mutex
	calls []string // "ns/name=value"
	fail  func(n int) error
}

func (f *fakePatcher) PatchPodIPs(_ context.Context, ns, name, _, value string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, ns+"/"+name+"="+value)
	if f.fail != nil {
		if err := f.fail(len(f.calls)); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (f *fakePatcher) n() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.calls) }

// TestPodIPsWriterOnInjectedClock: retries wait the backoff on the
// daemon's clock (nothing happens until it moves); the latest value
// wanted for a pod wins; a pod that is gone is dropped, not retried.
func TestPodIPsWriterOnInjectedClock(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	fp := &fakePatcher{fail: func(n int) error {
		if n <= 2 {
			return errors.New("apiserver busy (test)")
		}
		return nil
	}}
	w := newPodIPsWriter(fp, backoff.Policy{Duration: time.Second, Factor: 2, Steps: 3}, clk, slog.New(slog.DiscardHandler))
	web := k8s.Pod{Namespace: "ns", Name: "web", UID: "u"}
	w.enqueue(web, "192.168.0.1")
	w.enqueue(web, "192.168.0.2") // before any worker runs: one patch, the latest value
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	armed := retryArmed(t, clk)
	testwait.Until(t, waitLimit, "the first attempt", func() bool { return fp.n() == 1 })
	armed("the first retry")
	if fp.n() != 1 {
		t.Fatalf("%d attempts before the clock moved, want 1", fp.n())
	}
	clk.Step(time.Second) // first retry after Duration
	testwait.Until(t, waitLimit, "the second attempt", func() bool { return fp.n() == 2 })
	armed("the second retry")
	clk.Step(time.Second) // the second retry waits Duration×Factor: not yet
	if clk.Waiters() != 2 || fp.n() != 2 {
		t.Fatalf("the second retry's timer fired after 1s of the 2s backoff (%d attempts, want 2)", fp.n())
	}
	clk.Step(time.Second)
	testwait.Until(t, waitLimit, "the third attempt", func() bool { return fp.n() == 3 })
	testwait.Until(t, waitLimit, "nothing pending", func() bool { return w.pending() == 0 })
	fp.mu.Lock()
	for _, c := range fp.calls {
		if c != "ns/web=192.168.0.2" {
			t.Errorf("patched %s, want only the latest value", c)
		}
	}
	fp.fail = func(int) error { return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "gone") }
	fp.mu.Unlock()
	w.enqueue(k8s.Pod{Namespace: "ns", Name: "gone"}, "192.168.0.3")
	testwait.Until(t, waitLimit, "the gone pod dropped", func() bool { return fp.n() == 4 && w.pending() == 0 })
	// A retry is counted by the rate limiter and waits on the clock: a
	// pod that is gone has neither.
	if n, waiters := w.queue.NumRequeues("ns/gone"), clk.Waiters(); n != 0 || waiters != 1 {
		t.Errorf("a pod that is gone is to be retried (%d requeues, %d timers on the clock)", n, waiters)
	}
}

// retryArmed returns a wait until the pod-ips writer's queue has armed a
// timer for a delayed patch on clk: the queue's heartbeat ticker and that
// timer are then the clock's two waiters. A timer that fires leaves the
// waiters at once, in Step.
func retryArmed(t *testing.T, clk *testingclock.FakeClock) func(what string) {
	return func(what string) {
		t.Helper()
		testwait.Until(t, waitLimit, what+" waiting on the clock", func() bool { return clk.Waiters() == 2 })
	}
}

// TestBackoffOverrideInitialDelayReachesDaemon: an InitialDelay written in
// backoff_override reaches the daemon's backoff set (which every cloud
// retry and poll uses) and the pod-ips writer, whose first patch of a pod
// waits it on the daemon's clock. The daemon used to copy
// backoff_override into wait.Backoffs and drop the field.
func TestBackoffOverrideInitialDelayReachesDaemon(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"backoff_override": {
		"wait_eni_status": {"InitialDelay": "7s"},
		"kubernetes": {"InitialDelay": "3s", "Duration": "1s"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Now())
	d := &Daemon{cfg: cfg, clock: clk}
	set := d.backoffSet()
	if got := set.Get(backoff.WaitENIStatus).InitialDelay; got != 7*time.Second {
		t.Errorf("the daemon's wait_eni_status InitialDelay = %v, want 7s", got)
	}
	if got := set.Get(backoff.ENIOps).InitialDelay; got != 0 {
		t.Errorf("eni_ops InitialDelay = %v, want the built-in 0", got)
	}

	fp := &fakePatcher{fail: func(int) error { return nil }}
	w := newPodIPsWriter(fp, set.Get(backoff.KubernetesAPIRetry), clk, slog.New(slog.DiscardHandler))
	w.enqueue(k8s.Pod{Namespace: "ns", Name: "web", UID: "u"}, "192.168.0.1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	retryArmed(t, clk)("the first patch")
	clk.Step(3*time.Second - time.Millisecond)
	if clk.Waiters() != 2 || fp.n() != 0 {
		t.Fatalf("the first patch's timer fired before the 3s InitialDelay passed (%d patches)", fp.n())
	}
	clk.Step(time.Millisecond)
	testwait.Until(t, waitLimit, "the patch after the InitialDelay", func() bool { return fp.n() == 1 })
}
