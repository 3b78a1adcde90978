package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/internal/testwait"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(fake.NewClientset(), Spec{}); err == nil {
		t.Error("a spec without namespace was accepted")
	}
	if _, err := New(fake.NewClientset(), Spec{Namespace: "x", Replicas: -1}); err == nil {
		t.Error("negative replicas were accepted")
	}
}

func TestDeployScaleWaitDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kube := fake.NewClientset()
	w, err := New(kube, Spec{Namespace: "wl", Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Deploy(ctx); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if err := w.Deploy(ctx); err != nil {
		t.Fatalf("Deploy again: %v", err)
	}
	if err := w.Scale(ctx, 3); err != nil {
		t.Fatalf("Scale: %v", err)
	}
	d, err := kube.AppsV1().Deployments("wl").Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("after Scale(3): %v, %v", d, err)
	}
	if _, err := kube.CoreV1().Services("wl").Get(ctx, DefaultName, metav1.GetOptions{}); err != nil {
		t.Fatalf("service: %v", err)
	}

	// The fake has no controllers: create the pods the Deployment would.
	for _, p := range []corev1.Pod{podOn("a", "n1", "10.0.0.1"), podOn("b", "n2", "10.0.0.2"), notReady(podOn("c", "n2", ""))} {
		p.Namespace = "wl"
		if _, err := kube.CoreV1().Pods("wl").Create(ctx, &p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 700*time.Millisecond)
	_, err = w.WaitReady(short, 3)
	cancelShort()
	if err == nil || !strings.Contains(err.Error(), "3 live, 2 ready") {
		t.Fatalf("WaitReady with a pod not ready: %v", err)
	}
	c := podOn("c", "n2", "10.0.0.3")
	c.Namespace = "wl"
	if _, err := kube.CoreV1().Pods("wl").UpdateStatus(ctx, &c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, err := w.WaitReady(ctx, 3)
	if err != nil || len(ready) != 3 {
		t.Fatalf("WaitReady: %d pods, %v", len(ready), err)
	}

	// The fake does not delete a namespace's pods: Delete waits for them.
	// Two listings of them while they are there show it did not return
	// after the first.
	lists := podLists(kube)
	done := make(chan error, 1)
	go func() { done <- w.Delete(ctx) }()
	testwait.Until(t, 5*time.Second, "two listings of the pods left", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Delete returned with pods left: %v", err)
		default:
		}
		return podLists(kube) >= lists+2
	})
	for _, n := range []string{"a", "b", "c"} {
		if err := kube.CoreV1().Pods("wl").Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := w.Delete(ctx); err != nil {
		t.Fatalf("Delete of a gone namespace: %v", err)
	}
}

// podLists counts the pod listings the fake clientset served.
func podLists(kube *fake.Clientset) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

// Restart changes the pod template, as kubectl rollout restart does, so
// that the Deployment replaces every pod.
func TestRestart(t *testing.T) {
	ctx := t.Context()
	kube := fake.NewClientset()
	w, err := New(kube, Spec{Namespace: "wl", Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Restart(ctx, time.Now()); err == nil {
		t.Error("Restart of a workload not deployed succeeded")
	}
	if err := w.Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
	if err := w.Restart(ctx, at); err != nil {
		t.Fatal(err)
	}
	d, err := kube.AppsV1().Deployments("wl").Get(ctx, w.Spec().Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Annotations[RestartedAtAnnotation]; got != at.Format(time.RFC3339Nano) {
		t.Errorf("template annotation %q = %q, want %q", RestartedAtAnnotation, got, at.Format(time.RFC3339Nano))
	}
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d after a restart, want 2", *d.Spec.Replicas)
	}
}

func TestDeployAndScaleStatefulSet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kube := fake.NewClientset()
	w, err := New(kube, Spec{Namespace: "wl", Replicas: 1, StatefulSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Deploy(ctx); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if err := w.Scale(ctx, 2); err != nil {
		t.Fatalf("Scale: %v", err)
	}
	s, err := kube.AppsV1().StatefulSets("wl").Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil || *s.Spec.Replicas != 2 {
		t.Fatalf("after Scale(2): %v, %v", s, err)
	}
	if _, err := kube.AppsV1().Deployments("wl").Get(ctx, DefaultName, metav1.GetOptions{}); err == nil {
		t.Error("a StatefulSet workload created a Deployment too")
	}
}
