package workload

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeRunner answers wget like the workload's pods would: the pod owning
// the URL's IP answers its name; a Service IP answers the next backend in
// turn. Addresses in fail time out.
type fakeRunner struct {
	mu       sync.Mutex
	byIP     map[string]string
	svcIP    string
	backends []string
	next     int
	fail     map[string]bool
	calls    []string
}

func (f *fakeRunner) Exec(ctx context.Context, ns, pod, container string, cmd []string) (ExecResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(cmd) != 3 || cmd[0] != "wget" || cmd[1] != "-qO-" {
		return ExecResult{}, errors.New("unexpected command")
	}
	f.calls = append(f.calls, pod+" "+cmd[2])
	host := strings.TrimSuffix(strings.TrimPrefix(cmd[2], "http://"), "/")
	ip := host[:strings.LastIndex(host, ":")]
	if _, ok := ctx.Deadline(); !ok {
		return ExecResult{}, errors.New("no deadline")
	}
	if f.fail[ip] {
		return ExecResult{Stderr: "wget: can't connect\n"}, errors.New("command terminated with exit code 1")
	}
	if ip == f.svcIP {
		name := f.backends[f.next%len(f.backends)]
		f.next++
		return ExecResult{Stdout: name + "\n"}, nil
	}
	return ExecResult{Stdout: f.byIP[ip] + "\n"}, nil
}

func service() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}}}
}

func TestCheckAll(t *testing.T) {
	pods := []corev1.Pod{podOn("a1", "n1", "10.0.0.1"), podOn("a2", "n1", "10.0.0.2"),
		podOn("b1", "n2", "10.0.1.1"), podOn("b2", "n2", "10.0.1.2")}
	f := &fakeRunner{byIP: map[string]string{"10.0.0.1": "a1", "10.0.0.2": "a2", "10.0.1.1": "b1", "10.0.1.2": "b2"},
		svcIP: "10.96.0.10", backends: []string{"a1", "a1", "b2"}}
	checks := Prober{Runner: f, Timeout: time.Second}.CheckAll(context.Background(), pods, service())
	if failed := Failed(checks); len(failed) != 0 {
		t.Fatalf("failed checks: %v", failed)
	}
	var kinds []string
	for _, c := range checks {
		kinds = append(kinds, string(c.Kind)+" "+c.From+">"+c.To)
	}
	want := []string{
		"pod-pod-same-node ns/a1>10.0.0.2:8080", "pod-pod-same-node ns/b1>10.0.1.2:8080",
		"pod-pod-cross-node ns/a1>10.0.1.2:8080", "pod-pod-cross-node ns/b1>10.0.0.2:8080",
		"pod-service ns/a1>10.96.0.10:80", "pod-service ns/b1>10.96.0.10:80",
	}
	if strings.Join(kinds, "|") != strings.Join(want, "|") {
		t.Fatalf("checks:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
	svc := checks[4]
	if svc.Tries != 3 || len(svc.Backends) != 2 || svc.Output != "a1,a1,b2" {
		t.Errorf("service check asked until two backends answered: %+v", svc)
	}
	if !strings.Contains(checks[2].String(), "ok") || checks[2].TargetNode != "n2" {
		t.Errorf("cross-node check: %s", checks[2])
	}
}

func TestPodToPodFailures(t *testing.T) {
	from, to := podOn("a1", "n1", "10.0.0.1"), podOn("b1", "n2", "10.0.1.1")
	f := &fakeRunner{byIP: map[string]string{"10.0.1.1": "someone-else"}, fail: map[string]bool{}}
	p := Prober{Runner: f}
	c := p.PodToPod(context.Background(), KindCrossNode, Pair{From: from, To: to})
	if c.OK || !strings.Contains(c.Error, `answered "someone-else", want "b1"`) {
		t.Errorf("wrong answer not caught: %+v", c)
	}
	f.fail["10.0.1.1"] = true
	c = p.PodToPod(context.Background(), KindCrossNode, Pair{From: from, To: to})
	if c.OK || !strings.Contains(c.Error, "can't connect") || !strings.Contains(c.String(), "FAIL") {
		t.Errorf("exec failure not reported with stderr: %+v", c)
	}
}

func TestPodToServiceFailures(t *testing.T) {
	from := podOn("a1", "n1", "10.0.0.1")
	backends := []corev1.Pod{from, podOn("b1", "n2", "10.0.1.1")}
	f := &fakeRunner{svcIP: "10.96.0.10", backends: []string{"a1", "stranger"}}
	c := Prober{Runner: f}.PodToService(context.Background(), from, service(), backends)
	if c.OK || c.Tries != 2 || !strings.Contains(c.Error, `try 2: answered "stranger", not a backend`) {
		t.Errorf("foreign answer not caught: %+v", c)
	}
	f = &fakeRunner{svcIP: "10.96.0.10", backends: []string{"a1"}}
	c = Prober{Runner: f, ServiceTries: 4}.PodToService(context.Background(), from, service(), backends)
	if !c.OK || c.Tries != 4 || len(c.Backends) != 1 {
		t.Errorf("one backend answering every try is fine, up to ServiceTries: %+v", c)
	}
	c = Prober{Runner: f}.PodToService(context.Background(), from, service(), backends[:1])
	if !c.OK || c.Tries != 1 {
		t.Errorf("a single backend needs one answer: %+v", c)
	}
	headless := service()
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	if c := (Prober{Runner: f}).PodToService(context.Background(), from, headless, backends); c.OK || c.Tries != 0 {
		t.Errorf("headless service: %+v", c)
	}
}
