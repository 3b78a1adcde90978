package workload

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func TestSetAndClearNodeConfig(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lab-1", Labels: map[string]string{"keep": "me"}}})
	if err := SetNodeConfig(ctx, kube, "lab-1", "small-pool", map[string]any{"max_pool_size": 2}); err != nil {
		t.Fatal(err)
	}
	// A second call replaces the ConfigMap.
	if err := SetNodeConfig(ctx, kube, "lab-1", "small-pool", map[string]any{"max_pool_size": 3}); err != nil {
		t.Fatal(err)
	}
	cm, err := kube.CoreV1().ConfigMaps(TerwayNamespace).Get(ctx, "small-pool", metav1.GetOptions{})
	if err != nil || cm.Data["eni_conf"] != `{"max_pool_size":3}` {
		t.Fatalf("configmap %v, %v", cm, err)
	}
	n, _ := kube.CoreV1().Nodes().Get(ctx, "lab-1", metav1.GetOptions{})
	if n.Labels["terway-config"] != "small-pool" || n.Labels["keep"] != "me" {
		t.Fatalf("labels after set: %v", n.Labels)
	}
	if err := ClearNodeConfig(ctx, kube, "lab-1", "small-pool"); err != nil {
		t.Fatal(err)
	}
	n, _ = kube.CoreV1().Nodes().Get(ctx, "lab-1", metav1.GetOptions{})
	if _, ok := n.Labels["terway-config"]; ok || n.Labels["keep"] != "me" {
		t.Fatalf("labels after clear: %v", n.Labels)
	}
	if _, err := kube.CoreV1().ConfigMaps(TerwayNamespace).Get(ctx, "small-pool", metav1.GetOptions{}); err == nil {
		t.Fatal("configmap left after clear")
	}
	if err := ClearNodeConfig(ctx, kube, "lab-1", "small-pool"); err != nil {
		t.Fatalf("clear twice: %v", err)
	}
}

func terwayPodOn(name, node, uid string, ready bool) *corev1.Pod {
	p := podOn(name, node, "192.168.0.10")
	p.Namespace, p.UID, p.Labels = TerwayNamespace, types.UID(uid), map[string]string{AppLabel: TerwayDaemonSet}
	if !ready {
		p = notReady(p)
	}
	return &p
}

func TestRestartTerwayWaitsForTheNewPod(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kube := fake.NewClientset(terwayPodOn("terway-a", "lab-1", "old", true), terwayPodOn("terway-b", "lab-2", "other", true))
	done := make(chan error, 1)
	go func() { done <- RestartTerway(ctx, kube, "lab-1") }()
	// The DaemonSet controller's part: once the old pod is gone, a new
	// one comes, not ready at first.
	for {
		if _, err := kube.CoreV1().Pods(TerwayNamespace).Get(ctx, "terway-a", metav1.GetOptions{}); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := kube.CoreV1().Pods(TerwayNamespace).Create(ctx, terwayPodOn("terway-c", "lab-1", "new", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("RestartTerway returned before the new pod was ready: %v", err)
	case <-time.After(3 * pollInterval):
	}
	if _, err := kube.CoreV1().Pods(TerwayNamespace).UpdateStatus(ctx, terwayPodOn("terway-c", "lab-1", "new", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Pods(TerwayNamespace).Get(ctx, "terway-b", metav1.GetOptions{}); err != nil {
		t.Errorf("the other node's terway pod: %v", err)
	}
}
