package k8s

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeEventNow records an event on the node through the API server before
// it returns, as NodeEvent's recorder would have written it. NodeEvent
// queues: what a daemon records just before it exits (why it refuses to
// start) would be lost with the queue, which Stop does not flush.
func (c *Client) NodeEventNow(ctx context.Context, t EventType, reason, message string) error {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", c.node, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: c.node, UID: types.UID(c.node), APIVersion: "v1"},
		Reason:         reason,
		Message:        message,
		Type:           string(t),
		Count:          1,
		FirstTimestamp: now,
		LastTimestamp:  now,
		Source:         corev1.EventSource{Component: "terway-daemon", Host: c.node},
		// As the recorder fills them from the source.
		ReportingController: "terway-daemon",
		ReportingInstance:   c.node,
	}
	if _, err := c.cs.Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("record node event %s on %s: %w", reason, c.node, err)
	}
	return nil
}
