package workload

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCensus(t *testing.T) {
	pending := notReady(podOn("p", "", ""))
	pending.Status.Phase = corev1.PodPending
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/2 nodes are available: 2 Insufficient aliyun/eni."}}
	creating := notReady(podOn("c", "n1", ""))
	creating.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	gone := podOn("g", "n1", "10.0.0.3")
	gone.DeletionTimestamp = &metav1.Time{}
	c := Census([]corev1.Pod{podOn("b", "n1", "10.0.0.2"), pending, creating, gone, podOn("a", "n2", "10.0.0.1")})
	if c.Live != 4 || c.Terminating != 1 || len(c.Ready) != 2 || c.Ready[0].Name != "a" {
		t.Fatalf("census = %+v", c)
	}
	if !strings.Contains(c.Waiting["p"], "Unschedulable 0/2 nodes are available") {
		t.Errorf("pending reason = %q", c.Waiting["p"])
	}
	if !strings.Contains(c.Waiting["c"], "ContainerCreating") || !strings.Contains(c.Waiting["c"], "no IP yet") {
		t.Errorf("creating reason = %q", c.Waiting["c"])
	}
	if s := c.String(); !strings.HasPrefix(s, "4 live, 2 ready, 1 terminating; c: ") {
		t.Errorf("String = %q", s)
	}
}
