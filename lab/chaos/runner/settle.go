package runner

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/lab/workload"
)

// settle deletes what is left of a previous workload and waits until
// terway is Ready on every node: a daemon an earlier plan restarted is
// back before this plan's timeline takes its baseline. A terway pod whose
// terwayd an earlier plan killed is replaced by a new one first (see
// freshTerway), so that no plan inherits another's crash back-off.
func settle(ctx context.Context, cfg *Config) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(cfg.SettleTimeout, DefaultSettleTimeout))
	defer cancel()
	cfg.progress("settling: the previous workload gone, terway Ready on every node")
	if err := cfg.Workload.Delete(ctx); err != nil {
		return fmt.Errorf("chaos runner: settle: %w", err)
	}
	if err := waitSettled(ctx, cfg); err != nil {
		return err
	}
	nodes, err := freshTerway(ctx, cfg)
	if err != nil {
		return fmt.Errorf("chaos runner: settle: %w", err)
	}
	if len(nodes) == 0 {
		return nil
	}
	cfg.progress("settling: new terway pods on %s, whose terwayd restarted before (the kubelet's crash back-off stays with a pod)",
		strings.Join(nodes, ", "))
	return waitSettled(ctx, cfg)
}

// waitSettled waits until nothing keeps the lab from being settled.
func waitSettled(ctx context.Context, cfg *Config) error {
	var why string
	for {
		var err error
		why, err = unsettled(ctx, cfg)
		if err == nil && why == "" {
			return nil
		}
		if err != nil {
			why = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos runner: the lab did not settle: %s: %w", why, ctx.Err())
		case <-time.After(cmp.Or(cfg.PollEvery, time.Second)):
		}
	}
}

// freshTerway deletes the terway pods with a container that restarted,
// for the DaemonSet to replace, and returns their nodes. The kubelet
// backs off a container that keeps dying (10s, doubling to 5m, forgotten
// only after 10m of quiet): a plan after kill-terwayd-everywhere found
// terwayd down for minutes at each of its kills, and its run stretched
// from 2 to 8 minutes. A new pod starts with no back-off.
func freshTerway(ctx context.Context, cfg *Config) ([]string, error) {
	pods, err := terwayPods(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !slices.ContainsFunc(p.Status.ContainerStatuses, func(c corev1.ContainerStatus) bool { return c.RestartCount > 0 }) {
			continue
		}
		err := cfg.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nodes, fmt.Errorf("delete terway pod %s: %w", p.Name, err)
		}
		nodes = append(nodes, p.Spec.NodeName)
	}
	slices.Sort(nodes)
	return nodes, nil
}

// unsettled says what keeps the lab from being settled ("" when it is):
// the workload's namespace still there, a node without a Ready terway.
func unsettled(ctx context.Context, cfg *Config) (string, error) {
	_, err := cfg.Kube.CoreV1().Namespaces().Get(ctx, cfg.Namespace, metav1.GetOptions{})
	switch {
	case err == nil:
		return "namespace " + cfg.Namespace + " still there", nil
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("get namespace %s: %w", cfg.Namespace, err)
	}
	notReady, err := daemonNotReady(ctx, cfg)
	if err != nil || len(notReady) == 0 {
		return "", err
	}
	return "terway not Ready on " + strings.Join(notReady, ", "), nil
}

// daemonNotReady lists the nodes without a Ready terway pod that is not
// being deleted.
func daemonNotReady(ctx context.Context, cfg *Config) ([]string, error) {
	pods, err := terwayPods(ctx, cfg)
	if err != nil {
		return nil, err
	}
	nodes, err := cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	ready := map[string]bool{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && podReady(p) {
			ready[p.Spec.NodeName] = true
		}
	}
	var out []string
	for _, n := range nodes.Items {
		if !ready[n.Name] {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// terwayPods lists the pods of terway's DaemonSet.
func terwayPods(ctx context.Context, cfg *Config) ([]corev1.Pod, error) {
	ds, err := cfg.Kube.AppsV1().DaemonSets(workload.TerwayNamespace).Get(ctx, workload.TerwayDaemonSet, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get daemonset %s/%s: %w", workload.TerwayNamespace, workload.TerwayDaemonSet, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("daemonset %s selector: %w", ds.Name, err)
	}
	pods, err := cfg.Kube.CoreV1().Pods(workload.TerwayNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list terway pods: %w", err)
	}
	return pods.Items, nil
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
