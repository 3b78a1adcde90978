package kubeapi_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/terway-sim/terway/daemon/kubeapi"
	"github.com/terway-sim/terway/internal/kubeserve"
)

func pod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node}}
}

// serve returns a client of an HTTP server over cs.
func serve(t *testing.T, cs *fake.Clientset) kubeapi.Interface {
	t.Helper()
	srv := kubeserve.New(cs)
	t.Cleanup(srv.Close)
	api, err := kubeapi.NewForConfig(&rest.Config{Host: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// Every request the daemon makes goes over the wire (protobuf bodies,
// JSON answers) and lands on the right object.
func TestCoreV1OverHTTP(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelInstanceTypeStable: "ecs.g7.large"}}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cfg"}, Data: map[string]string{"eni_conf": "{}"}}
	cs := fake.NewSimpleClientset(node, other, cm, pod("a", "p1", "n1"), pod("b", "p2", "n2"))
	var evicted []string
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		evicted = append(evicted, ev.Namespace+"/"+ev.Name)
		return true, nil, nil
	})
	api := serve(t, cs)

	l, err := api.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "p1" {
		t.Fatalf("pods of n1: %v, %v", l, err)
	}
	if p, err := api.Pods("b").Get(ctx, "p2", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "n2" {
		t.Errorf("get b/p2: %v, %v", p, err)
	}
	if _, err := api.Pods("a").Get(ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get a missing pod: %v, want NotFound", err)
	}
	if _, err := api.Pods("a").Patch(ctx, "p1", types.MergePatchType, []byte(`{"metadata":{"annotations":{"k":"v"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, _ := cs.CoreV1().Pods("a").Get(ctx, "p1", metav1.GetOptions{}); p.Annotations["k"] != "v" {
		t.Errorf("pod annotations after the patch: %v", p.Annotations)
	}
	if err := api.Pods("a").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p1"}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(evicted, []string{"a/p1"}) {
		t.Errorf("evictions %v, want a/p1", evicted)
	}

	nl, err := api.Nodes().List(ctx, metav1.ListOptions{LabelSelector: corev1.LabelInstanceTypeStable + "=ecs.g7.large", Limit: 5})
	if err != nil || len(nl.Items) != 1 || nl.Items[0].Name != "n1" {
		t.Fatalf("nodes of the type: %v, %v", nl, err)
	}
	if _, err := api.Nodes().Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"annotations":{"a":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, _ := api.Nodes().Get(ctx, "n1", metav1.GetOptions{}); n.Annotations["a"] != "b" {
		t.Errorf("node annotations after the patch: %v", n.Annotations)
	}
	if got, err := api.ConfigMaps("kube-system").Get(ctx, "cfg", metav1.GetOptions{}); err != nil || got.Data["eni_conf"] != "{}" {
		t.Errorf("ConfigMap: %v, %v", got, err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e1"}, Reason: "Test"}
	if _, err := api.Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := cs.CoreV1().Events("default").Get(ctx, "e1", metav1.GetOptions{}); err != nil || got.Reason != "Test" {
		t.Errorf("event: %v, %v", got, err)
	}
}

// A watch streams the changes its selector matches, and only those.
func TestWatchOverHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := fake.NewSimpleClientset()
	api := serve(t, cs)
	w, err := api.Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, p := range []*corev1.Pod{pod("a", "elsewhere", "n2"), pod("a", "here", "n1")} {
		if _, err := cs.CoreV1().Pods("a").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case ev := <-w.ResultChan():
		if p, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Added || !ok || p.Name != "here" {
			t.Errorf("first event %s %#v, want the pod of n1 added", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
}

// A selector the server cannot apply is refused, not ignored.
func TestUnknownFieldSelectorRefused(t *testing.T) {
	api := serve(t, fake.NewSimpleClientset())
	_, err := api.Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "status.phase=Running"})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("list by status.phase: %v, want BadRequest", err)
	}
}

// An informer (client-go's reflector asks for a watch-list first) syncs
// with what the server holds and sees what comes after.
func TestInformerSyncsOverHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := fake.NewSimpleClientset(pod("a", "before", "n1"), pod("a", "other", "n2"))
	api := serve(t, cs)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = "spec.nodeName=n1"
			return api.Pods("").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = "spec.nodeName=n1"
			return api.Pods("").Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if keys := inf.GetStore().ListKeys(); !slices.Equal(keys, []string{"a/before"}) {
		t.Errorf("synced with %v, want a/before", keys)
	}
	if _, err := cs.CoreV1().Pods("a").Create(ctx, pod("a", "after", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for len(inf.GetStore().ListKeys()) != 2 {
		select {
		case <-ctx.Done():
			t.Fatalf("the new pod never came: %v", inf.GetStore().ListKeys())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
