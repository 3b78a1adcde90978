package k8s

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/terway-sim/terway/daemon/kubeapi"
)

// eventSink is where the event recorder writes: each event in its own
// namespace, as client-go's sink for typed clients does. The recorder
// gives no context; its writes end with the client's timeout.
type eventSink struct{ api kubeapi.Interface }

func (s eventSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	return s.api.Events(ev.Namespace).Create(context.Background(), ev, metav1.CreateOptions{})
}

func (s eventSink) Update(ev *corev1.Event) (*corev1.Event, error) {
	return s.api.Events(ev.Namespace).Update(context.Background(), ev, metav1.UpdateOptions{})
}

func (s eventSink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.api.Events(ev.Namespace).Patch(context.Background(), ev.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
