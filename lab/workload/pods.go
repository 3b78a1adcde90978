package workload

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// IsReady reports whether the pod's Ready condition is True.
func IsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodCensus sorts a pod list by state, for waits and their error messages.
type PodCensus struct {
	// Live counts pods that are not terminating.
	Live int
	// Terminating counts pods with a deletion timestamp.
	Terminating int
	// Ready are the live pods that are Ready and have an IP, by name.
	Ready []corev1.Pod
	// Waiting says, per live pod that is not ready, why ("Pending:
	// Unschedulable: 0/2 nodes are available: ...").
	Waiting map[string]string
}

// Census takes a PodCensus of pods.
func Census(pods []corev1.Pod) PodCensus {
	c := PodCensus{Waiting: map[string]string{}}
	for i := range pods {
		p := &pods[i]
		switch {
		case p.DeletionTimestamp != nil:
			c.Terminating++
		case IsReady(p) && p.Status.PodIP != "":
			c.Live++
			c.Ready = append(c.Ready, *p)
		default:
			c.Live++
			c.Waiting[p.Name] = waitReason(p)
		}
	}
	sort.Slice(c.Ready, func(i, j int) bool { return c.Ready[i].Name < c.Ready[j].Name })
	return c
}

// String summarises the census, naming up to three waiting pods.
func (c PodCensus) String() string {
	s := fmt.Sprintf("%d live, %d ready, %d terminating", c.Live, len(c.Ready), c.Terminating)
	names := make([]string, 0, len(c.Waiting))
	for n := range c.Waiting {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		if i == 3 {
			s += fmt.Sprintf("; %d more waiting", len(names)-3)
			break
		}
		s += fmt.Sprintf("; %s: %s", n, c.Waiting[n])
	}
	return s
}

// waitReason says why a pod is not ready: the phase, plus the reason of
// a false condition or of a waiting container.
func waitReason(p *corev1.Pod) string {
	parts := []string{string(p.Status.Phase)}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && (cond.Reason != "" || cond.Message != "") {
			parts = append(parts, strings.TrimSpace(cond.Reason+" "+cond.Message))
			break
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, strings.TrimSpace(w.Reason+" "+w.Message))
		}
	}
	if p.Status.PodIP == "" && p.Spec.NodeName != "" {
		parts = append(parts, "no IP yet")
	}
	return strings.Join(parts, ": ")
}
