package workload

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPairs(t *testing.T) {
	terminating := podOn("a9", "n1", "10.0.0.9")
	terminating.DeletionTimestamp = &metav1.Time{}
	hostNet := podOn("a8", "n1", "192.168.0.1")
	hostNet.Spec.HostNetwork = true
	pods := []corev1.Pod{
		podOn("b2", "n2", "10.0.1.2"), podOn("a2", "n1", "10.0.0.2"), podOn("a1", "n1", "10.0.0.1"),
		podOn("c1", "n3", "10.0.2.1"), notReady(podOn("c0", "n3", "10.0.2.0")), podOn("b1", "n2", "10.0.1.1"),
		podOn("x", "", ""), podOn("noip", "n2", ""), terminating, hostNet,
	}
	if got, want := names(SameNodePairs(pods)), []string{"a1>a2", "b1>b2"}; !slices.Equal(got, want) {
		t.Errorf("SameNodePairs = %v, want %v (n3 has one usable pod)", got, want)
	}
	want := []string{"a1>b2", "a1>c1", "b1>a2", "b1>c1", "c1>a2", "c1>b2"}
	if got := names(CrossNodePairs(pods)); !slices.Equal(got, want) {
		t.Errorf("CrossNodePairs = %v, want %v", got, want)
	}
	var src []string
	for _, p := range OnePerNode(pods) {
		src = append(src, p.Name)
	}
	if !slices.Equal(src, []string{"a1", "b1", "c1"}) {
		t.Errorf("OnePerNode = %v", src)
	}
	if got := Nodes(pods); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Errorf("Nodes = %v", got)
	}
}

func TestPairsOneNode(t *testing.T) {
	pods := []corev1.Pod{podOn("a1", "n1", "10.0.0.1"), podOn("a2", "n1", "10.0.0.2")}
	if got := CrossNodePairs(pods); len(got) != 0 {
		t.Errorf("CrossNodePairs on one node = %v, want none", names(got))
	}
	if got := SameNodePairs(pods[:1]); len(got) != 0 {
		t.Errorf("SameNodePairs of one pod = %v, want none", names(got))
	}
}
