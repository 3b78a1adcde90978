package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// pollInterval is how often the waits look again.
const pollInterval = 500 * time.Millisecond

// Workload is a Spec on a cluster.
type Workload struct {
	spec Spec
	kube kubernetes.Interface
}

// New returns the workload of spec on kube; nothing is created until
// Deploy.
func New(kube kubernetes.Interface, spec Spec) (*Workload, error) {
	if spec.Namespace == "" {
		return nil, errors.New("workload: Spec.Namespace is required")
	}
	if spec.Replicas < 0 {
		return nil, fmt.Errorf("workload: replicas %d < 0", spec.Replicas)
	}
	return &Workload{spec: spec.withDefaults(), kube: kube}, nil
}

// Spec is the workload's spec, defaults filled in.
func (w *Workload) Spec() Spec { return w.spec }

// Namespace is the workload's namespace.
func (w *Workload) Namespace() string { return w.spec.Namespace }

// Selector selects the workload's pods.
func (w *Workload) Selector() string { return w.spec.Selector() }

// Deploy creates the namespace, the Deployment and the Service; ones that
// exist already are left as they are, except the Deployment's replicas,
// which are set to the spec's. It does not wait for pods.
func (w *Workload) Deploy(ctx context.Context) error {
	_, err := w.kube.CoreV1().Namespaces().Create(ctx, w.spec.NamespaceObject(), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", w.spec.Namespace, err)
	}
	if w.spec.StatefulSet {
		_, err = w.kube.AppsV1().StatefulSets(w.spec.Namespace).Create(ctx, w.spec.StatefulSetObject(), metav1.CreateOptions{})
	} else {
		_, err = w.kube.AppsV1().Deployments(w.spec.Namespace).Create(ctx, w.spec.Deployment(), metav1.CreateOptions{})
	}
	switch {
	case apierrors.IsAlreadyExists(err):
		if err := w.Scale(ctx, w.spec.Replicas); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("create %s %s/%s: %w", w.kind(), w.spec.Namespace, w.spec.Name, err)
	}
	_, err = w.kube.CoreV1().Services(w.spec.Namespace).Create(ctx, w.spec.Service(), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service %s/%s: %w", w.spec.Namespace, w.spec.Name, err)
	}
	return nil
}

// Scale sets the Deployment's (or StatefulSet's) replicas; WaitReady or
// WaitGone waits for the pods. A merge patch of spec.replicas cannot
// conflict with the controllers' status updates.
func (w *Workload) Scale(ctx context.Context, replicas int32) error {
	if err := w.patch(ctx, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)); err != nil {
		return fmt.Errorf("scale %s %s/%s to %d: %w", w.kind(), w.spec.Namespace, w.spec.Name, replicas, err)
	}
	return nil
}

// patch applies a merge patch to the workload's controller.
func (w *Workload) patch(ctx context.Context, patch []byte) error {
	var err error
	if w.spec.StatefulSet {
		_, err = w.kube.AppsV1().StatefulSets(w.spec.Namespace).Patch(ctx, w.spec.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = w.kube.AppsV1().Deployments(w.spec.Namespace).Patch(ctx, w.spec.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}

// RestartedAtAnnotation is the pod template annotation Restart sets, as
// `kubectl rollout restart` does.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// Restart starts a rolling restart of the Deployment's (or StatefulSet's) pods, as
// `kubectl rollout restart` does: a new pod template, so every pod is
// replaced (new sandboxes, new addresses), a few at a time. It does not
// wait for the rollout.
func (w *Workload) Restart(ctx context.Context, at time.Time) error {
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
		RestartedAtAnnotation, at.Format(time.RFC3339Nano))
	if err := w.patch(ctx, patch); err != nil {
		return fmt.Errorf("restart %s %s/%s: %w", w.kind(), w.spec.Namespace, w.spec.Name, err)
	}
	return nil
}

// kind names the workload's controller for messages.
func (w *Workload) kind() string {
	if w.spec.StatefulSet {
		return "statefulset"
	}
	return "deployment"
}

// Pods lists the workload's pods, terminating ones included.
func (w *Workload) Pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := w.kube.CoreV1().Pods(w.spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: w.Selector()})
	if err != nil {
		return nil, fmt.Errorf("list pods %s in %s: %w", w.Selector(), w.spec.Namespace, err)
	}
	return list.Items, nil
}

// ServiceObject reads the workload's Service (for its ClusterIP).
func (w *Workload) ServiceObject(ctx context.Context) (*corev1.Service, error) {
	svc, err := w.kube.CoreV1().Services(w.spec.Namespace).Get(ctx, w.spec.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get service %s/%s: %w", w.spec.Namespace, w.spec.Name, err)
	}
	return svc, nil
}

// WaitReady waits until exactly n pods exist (not counting terminating
// ones), all Ready with an IP, and returns them. The error on ctx's end
// says what the pods were doing (Pending with the scheduler's reason,
// waiting containers).
func (w *Workload) WaitReady(ctx context.Context, n int) ([]corev1.Pod, error) {
	var last PodCensus
	for {
		pods, err := w.Pods(ctx)
		if err == nil {
			last = Census(pods)
			if last.Live == n && len(last.Ready) == n {
				return last.Ready, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %d ready pods in %s: %w (last: %s; list error: %v)",
				n, w.spec.Namespace, ctx.Err(), last, err)
		case <-time.After(pollInterval):
		}
	}
}

// WaitGone waits until no pod of the workload exists any more (the
// kubelet removes a pod object only after its containers stopped).
func (w *Workload) WaitGone(ctx context.Context) error {
	for {
		pods, err := w.Pods(ctx)
		if err == nil && len(pods) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for pods of %s to go: %w (%d left; list error: %v)",
				w.spec.Namespace, ctx.Err(), len(pods), err)
		case <-time.After(pollInterval):
		}
	}
}

// Delete deletes the namespace (and so everything in it) and waits until
// its pods and then the namespace itself are gone. A namespace that does
// not exist is fine.
func (w *Workload) Delete(ctx context.Context) error {
	err := w.kube.CoreV1().Namespaces().Delete(ctx, w.spec.Namespace,
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", w.spec.Namespace, err)
	}
	if err := w.WaitGone(ctx); err != nil {
		return err
	}
	for {
		_, err := w.kube.CoreV1().Namespaces().Get(ctx, w.spec.Namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for namespace %s to go: %w (last error: %v)", w.spec.Namespace, ctx.Err(), err)
		case <-time.After(pollInterval):
		}
	}
}
