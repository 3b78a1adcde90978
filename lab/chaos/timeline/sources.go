package timeline

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/terway-sim/terway/fakecloud/admin"
	"github.com/terway-sim/terway/lab/workload"
)

// callState is the last read of fakecloud's counters.
type callState struct {
	read  bool
	at    time.Time
	total map[string]int64 // cumulative, by outcome
}

// readCalls puts the calls answered since the last successful read into
// smp. The first read is the baseline: calls made before Start are not
// the run's. A counter lower than before was reset (admin ResetCalls), so
// all it shows is new.
func (s *Sampler) readCalls(smp *Sample, now time.Time) error {
	ctx, cancel := s.readCtx()
	defer cancel()
	stats, err := s.cfg.Calls.Calls(ctx)
	if err != nil {
		return wrap("fakecloud calls", err)
	}
	total := map[string]int64{}
	for _, st := range stats {
		total[st.Outcome] += st.Count
	}
	prev := s.calls
	s.calls = callState{read: true, at: now, total: total}
	if !prev.read {
		return nil
	}
	smp.Calls = map[string]int64{}
	smp.CallsOver = admin.Duration(now.Sub(prev.at))
	for o, n := range total {
		if n < prev.total[o] {
			prev.total[o] = 0
		}
		if d := n - prev.total[o]; d > 0 {
			smp.Calls[o] = d
			if IsThrottling(o) {
				smp.Throttled += d
			}
		}
	}
	return nil
}

// IsThrottling reports whether a call outcome is one of the throttling
// codes (Throttling, Throttling.User, Throttling.Api).
func IsThrottling(outcome string) bool { return strings.HasPrefix(outcome, "Throttling") }

// readPods counts the workload's pods by state.
func (s *Sampler) readPods(smp *Sample) error {
	ctx, cancel := s.readCtx()
	defer cancel()
	list, err := s.cfg.Kube.CoreV1().Pods(s.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.cfg.Selector})
	if err != nil {
		return wrap("workload pods in "+s.cfg.Namespace, err)
	}
	c := workload.Census(list.Items)
	smp.PodsReady, smp.Pods, smp.PodsTerminating = len(c.Ready), c.Live, c.Terminating
	return nil
}

// daemonState is what the daemon's pods showed so far.
type daemonState struct {
	selector string // the DaemonSet's pod selector, once read
	read     bool
	// restarts is each container's last restartCount, by pod UID and
	// container name.
	restarts map[types.UID]map[string]int32
	// podOn names the daemon pod last seen on each node.
	podOn map[string]string
}

// readDaemon lists the daemon's pods and returns the restarts since the
// last read. The first read is the baseline: restarts before Start are
// not the run's.
func (s *Sampler) readDaemon(at admin.Duration) ([]Restart, error) {
	ctx, cancel := s.readCtx()
	defer cancel()
	d := &s.daemon
	what := "daemonset " + s.cfg.DaemonNamespace + "/" + s.cfg.DaemonSet
	if d.selector == "" {
		ds, err := s.cfg.Kube.AppsV1().DaemonSets(s.cfg.DaemonNamespace).Get(ctx, s.cfg.DaemonSet, metav1.GetOptions{})
		if err != nil {
			return nil, wrap(what, err)
		}
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil {
			return nil, wrap(what+": selector", err)
		}
		d.selector = sel.String()
	}
	list, err := s.cfg.Kube.CoreV1().Pods(s.cfg.DaemonNamespace).List(ctx, metav1.ListOptions{LabelSelector: d.selector})
	if err != nil {
		return nil, wrap(what+": pods", err)
	}
	baseline := !d.read
	if baseline {
		d.read, d.restarts, d.podOn = true, map[types.UID]map[string]int32{}, map[string]string{}
	}
	var out []Restart
	for i := range list.Items {
		out = append(out, d.observe(&list.Items[i], at, baseline)...)
	}
	return out, nil
}

// observe records p's restart counts and returns the restarts they show
// (none for the baseline): a container whose count grew, and p itself
// when it replaces another daemon pod on its node. A pod first seen after
// the baseline started from zero.
func (d *daemonState) observe(p *corev1.Pod, at admin.Duration, baseline bool) []Restart {
	var out []Restart
	node := p.Spec.NodeName
	seen, known := d.restarts[p.UID]
	if !known {
		seen = map[string]int32{}
		d.restarts[p.UID] = seen
	}
	if old, ok := d.podOn[node]; ok && !known && !baseline {
		out = append(out, Restart{At: at, Node: node, Pod: p.Name, Count: 1, Cause: "pod replaced " + old})
	}
	if node != "" {
		d.podOn[node] = p.Name
	}
	for _, cs := range p.Status.ContainerStatuses {
		prev := seen[cs.Name]
		seen[cs.Name] = cs.RestartCount
		if n := cs.RestartCount - prev; n > 0 && !baseline {
			r := Restart{At: at, Node: node, Pod: p.Name, Container: cs.Name, Count: int(n)}
			if t := cs.LastTerminationState.Terminated; t != nil {
				r.Cause, r.FinishedAt = terminationCause(t), t.FinishedAt.Time
			}
			out = append(out, r)
		}
	}
	return out
}

// terminationCause prints what the kubelet recorded of a termination.
func terminationCause(t *corev1.ContainerStateTerminated) string {
	parts := []string{}
	if t.Reason != "" {
		parts = append(parts, t.Reason)
	}
	parts = append(parts, fmt.Sprintf("exit code %d", t.ExitCode))
	if t.Signal != 0 {
		parts = append(parts, fmt.Sprintf("signal %d", t.Signal))
	}
	if t.Message != "" {
		parts = append(parts, strings.TrimSpace(t.Message))
	}
	return strings.Join(parts, ", ")
}
