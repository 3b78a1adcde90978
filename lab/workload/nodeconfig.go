package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/terway-sim/terway/daemon/dynconfig"
	"github.com/terway-sim/terway/daemon/k8s"
)

// SetNodeConfig gives node a dynamic config, as an operator does: a
// ConfigMap name in TerwayNamespace whose eni_conf is patch (a JSON merge
// patch over eni-config's eni_conf), and the node label terway-config=name.
// terwayd reads it at start: RestartTerway makes the node's daemon use it.
// An existing ConfigMap of that name is replaced.
func SetNodeConfig(ctx context.Context, kube kubernetes.Interface, node, name string, patch map[string]any) error {
	doc, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("node config %s: %w", name, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: TerwayNamespace, Labels: map[string]string{ManagedLabel: "true"}},
		Data:       map[string]string{dynconfig.Key: string(doc)},
	}
	cms := kube.CoreV1().ConfigMaps(TerwayNamespace)
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update configmap %s/%s: %w", TerwayNamespace, name, err)
		}
	} else if err != nil {
		return fmt.Errorf("create configmap %s/%s: %w", TerwayNamespace, name, err)
	}
	return labelNode(ctx, kube, node, &name)
}

// ClearNodeConfig undoes SetNodeConfig: the label goes, then the
// ConfigMap (one already gone is fine). The daemon keeps the config it
// started with until RestartTerway.
func ClearNodeConfig(ctx context.Context, kube kubernetes.Interface, node, name string) error {
	if err := labelNode(ctx, kube, node, nil); err != nil {
		return err
	}
	err := kube.CoreV1().ConfigMaps(TerwayNamespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete configmap %s/%s: %w", TerwayNamespace, name, err)
	}
	return nil
}

// labelNode sets (value non-nil) or removes the node's terway-config
// label with a merge patch.
func labelNode(ctx context.Context, kube kubernetes.Interface, node string, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{k8s.LabelDynamicConfig: value}}})
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label node %s %s: %w", node, k8s.LabelDynamicConfig, err)
	}
	return nil
}

// TerwayPod is the terway DaemonSet's pod on node that is not being
// deleted.
func TerwayPod(ctx context.Context, kube kubernetes.Interface, node string) (*corev1.Pod, error) {
	list, err := kube.CoreV1().Pods(TerwayNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: AppLabel + "=" + TerwayDaemonSet, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list terway pods on %s: %w", node, err)
	}
	for i := range list.Items {
		// The node is checked again: not every client applies field
		// selectors (client-go's fake does not).
		if p := &list.Items[i]; p.DeletionTimestamp == nil && p.Spec.NodeName == node {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no terway pod on node %s", node)
}

// RestartTerway deletes the terway pod of node and waits until the
// DaemonSet's new one is Ready: terwayd starts again, restores what the
// node's pods hold and reads its config (the node's dynamic config too)
// afresh.
func RestartTerway(ctx context.Context, kube kubernetes.Interface, node string) error {
	old, err := TerwayPod(ctx, kube, node)
	if err != nil {
		return err
	}
	err = kube.CoreV1().Pods(TerwayNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete terway pod %s: %w", old.Name, err)
	}
	var last string
	for {
		p, err := TerwayPod(ctx, kube, node)
		switch {
		case err != nil:
			last = err.Error()
		case p.UID == old.UID:
			last = "the old pod " + p.Name + " is still there"
		case IsReady(p):
			return nil
		default:
			last = "new pod " + p.Name + ": " + waitReason(p)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for terway on %s to restart: %w (last: %s)", node, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}
