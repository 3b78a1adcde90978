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
// back before this plan's timeline takes its baseline.
func settle(ctx context.Context, cfg *Config) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(cfg.SettleTimeout, DefaultSettleTimeout))
	defer cancel()
	cfg.progress("settling: the previous workload gone, terway Ready on every node")
	if err := cfg.Workload.Delete(ctx); err != nil {
		return fmt.Errorf("chaos runner: settle: %w", err)
	}
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
	nodes, err := cfg.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	ready := map[string]bool{}
	for _, p := range pods.Items {
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

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
