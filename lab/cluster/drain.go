package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// terwayLabel selects the terway DaemonSet's pods (deploy/).
const terwayLabel = "app.kubernetes.io/name=terway"

// waitNodeJoined waits until node name is Ready and terway's pod on it
// is Ready, or one of watch exits unexpectedly, or ctx ends.
func waitNodeJoined(ctx context.Context, kube kubernetes.Interface, name string, watch []*proc) error {
	return waitFor(ctx, nil, name+" Ready with terway", 5*time.Minute, func(ctx context.Context) error {
		for _, p := range watch {
			if p == nil {
				continue
			}
			if done, err := p.exited(); done && !p.expected.Load() {
				return stopWaiting{fmt.Errorf("%s exited (%v); log tail:\n%s", p.name, err, p.logTail())}
			}
		}
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(n) {
			return fmt.Errorf("node %s not Ready", name)
		}
		pods, err := kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: terwayLabel,
			FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if podReady(&p) {
				return nil
			}
		}
		return fmt.Errorf("terway not Ready on %s", name)
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// drainNode cordons node name and evicts every pod on it but DaemonSet
// and mirror pods, as kubectl drain does, then waits until they are gone.
// An eviction a disruption budget refuses is retried until ctx ends.
func drainNode(ctx context.Context, kube kubernetes.Interface, name string) error {
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": true}})
	if _, err := kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordon %s: %w", name, err)
	}
	return waitFor(ctx, nil, "drain of "+name, 10*time.Minute, func(ctx context.Context) error {
		pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			return err
		}
		var left []string
		for _, p := range pods.Items {
			if !drainable(&p) {
				continue
			}
			left = append(left, p.Namespace+"/"+p.Name)
			if p.DeletionTimestamp != nil {
				continue
			}
			err := kube.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) {
				return stopWaiting{fmt.Errorf("evict %s/%s: %w", p.Namespace, p.Name, err)}
			}
		}
		if len(left) > 0 {
			return errors.New(fmt.Sprint(len(left), " pods left: ", left))
		}
		return nil
	})
}

// drainable reports whether a drain evicts p: not a DaemonSet's pod
// (the DaemonSet would put it back), not a static pod's mirror, not
// finished.
func drainable(p *corev1.Pod) bool {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return false
		}
	}
	return true
}
