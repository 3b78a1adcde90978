package workload

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// CheckKind names what a connectivity check tests.
type CheckKind string

// The checks.
const (
	// KindSameNode: pod → pod IP on the same node.
	KindSameNode CheckKind = "pod-pod-same-node"
	// KindCrossNode: pod → pod IP on another node.
	KindCrossNode CheckKind = "pod-pod-cross-node"
	// KindService: pod → Service ClusterIP (kube-proxy's DNAT to a
	// backend, which may be on any node).
	KindService CheckKind = "pod-service"
)

// Check is the result of one connectivity check: an HTTP GET by wget
// from a pod, answered with the serving pod's name.
type Check struct {
	Kind CheckKind `json:"kind"`
	// From is the source pod ("namespace/name"), FromNode its node.
	From     string `json:"from"`
	FromNode string `json:"fromNode"`
	// To is the address asked (IP:port).
	To string `json:"to"`
	// Target is the pod expected to answer, or the Service
	// ("namespace/name"); TargetNode the target pod's node.
	Target     string `json:"target"`
	TargetNode string `json:"targetNode,omitempty"`
	OK         bool   `json:"ok"`
	// Output is what answered (pod names, one per try for a Service).
	Output string `json:"output,omitempty"`
	// Error says why the check failed.
	Error string `json:"error,omitempty"`
	// Duration covers all tries, execs included.
	Duration time.Duration `json:"duration"`
	// Tries is how many GETs were made; Backends the distinct pods that
	// answered (Service checks).
	Tries    int      `json:"tries"`
	Backends []string `json:"backends,omitempty"`
}

// String is one line for logs and failure messages.
func (c Check) String() string {
	verdict := "ok"
	if !c.OK {
		verdict = "FAIL: " + c.Error
	}
	s := fmt.Sprintf("%s %s (%s) -> %s %s", c.Kind, c.From, c.FromNode, c.To, c.Target)
	if c.TargetNode != "" {
		s += " (" + c.TargetNode + ")"
	}
	s += fmt.Sprintf(": %s in %s", verdict, c.Duration.Round(time.Millisecond))
	if len(c.Backends) > 0 {
		s += fmt.Sprintf(", backends %v", c.Backends)
	}
	return s
}

// Failed returns the checks that did not pass.
func Failed(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// Runner runs a command in a pod; *Executor is one.
type Runner interface {
	Exec(ctx context.Context, namespace, pod, container string, cmd []string) (ExecResult, error)
}

// Defaults of a Prober's zero fields.
const (
	DefaultProbeTimeout = 5 * time.Second
	DefaultServiceTries = 6
)

// Prober runs connectivity checks from the workload's pods.
type Prober struct {
	Runner Runner
	// Timeout bounds each GET, exec included (busybox wget has no working
	// timeout of its own here).
	Timeout time.Duration
	// ServiceTries is the most GETs to a Service per source; it stops
	// earlier once two different backends answered.
	ServiceTries int
}

func (p Prober) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultProbeTimeout
}

func (p Prober) serviceTries() int {
	if p.ServiceTries > 0 {
		return p.ServiceTries
	}
	return DefaultServiceTries
}

// get fetches http://addr/ from the pod and returns the trimmed body.
func (p Prober) get(ctx context.Context, from corev1.Pod, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	res, err := p.Runner.Exec(ctx, from.Namespace, from.Name, "", []string{"wget", "-qO-", "http://" + addr + "/"})
	if err != nil {
		if msg := strings.TrimSpace(res.Stderr); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return strings.TrimSpace(res.Stdout), err
	}
	return strings.TrimSpace(res.Stdout), nil
}

// PodToPod checks that from reaches to's IP and that to answers.
func (p Prober) PodToPod(ctx context.Context, kind CheckKind, pair Pair) Check {
	c := Check{Kind: kind, From: podRef(pair.From), FromNode: pair.From.Spec.NodeName,
		To: net.JoinHostPort(pair.To.Status.PodIP, strconv.Itoa(DefaultPort)), Target: podRef(pair.To),
		TargetNode: pair.To.Spec.NodeName, Tries: 1}
	start := time.Now()
	out, err := p.get(ctx, pair.From, c.To)
	c.Duration, c.Output = time.Since(start), out
	switch {
	case err != nil:
		c.Error = err.Error()
	case out != pair.To.Name:
		c.Error = fmt.Sprintf("answered %q, want %q", out, pair.To.Name)
	default:
		c.OK = true
	}
	return c
}

// PodToService checks that from reaches the Service's ClusterIP and that
// every answer comes from one of backends (the workload's pods). It asks
// up to ServiceTries times, stopping once two different backends have
// answered (or the only one has); every try must succeed.
func (p Prober) PodToService(ctx context.Context, from corev1.Pod, svc *corev1.Service, backends []corev1.Pod) Check {
	c := Check{Kind: KindService, From: podRef(from), FromNode: from.Spec.NodeName,
		Target: svc.Namespace + "/" + svc.Name}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		c.Error = "service has no ClusterIP or no port"
		return c
	}
	c.To = net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = b.Name
	}
	want := min(2, len(names))
	start := time.Now()
	var answers []string
	for c.Tries < p.serviceTries() && (len(c.Backends) < want || c.Tries == 0) {
		c.Tries++
		out, err := p.get(ctx, from, c.To)
		answers = append(answers, out)
		if err == nil && !slices.Contains(names, out) {
			err = fmt.Errorf("answered %q, not a backend", out)
		}
		if err != nil {
			c.Error = fmt.Sprintf("try %d: %v", c.Tries, err)
			break
		}
		if !slices.Contains(c.Backends, out) {
			c.Backends = append(c.Backends, out)
		}
	}
	c.Duration, c.Output = time.Since(start), strings.Join(answers, ",")
	c.OK = c.Error == ""
	return c
}

// CheckAll runs every check the pods allow: pod → pod on the same node
// for each node with two pods, across nodes for each ordered pair of
// nodes, and to the Service from one pod per node. Checks run one after
// another, so their durations are not skewed by each other.
func (p Prober) CheckAll(ctx context.Context, pods []corev1.Pod, svc *corev1.Service) []Check {
	var out []Check
	for _, pair := range SameNodePairs(pods) {
		out = append(out, p.PodToPod(ctx, KindSameNode, pair))
	}
	for _, pair := range CrossNodePairs(pods) {
		out = append(out, p.PodToPod(ctx, KindCrossNode, pair))
	}
	if svc != nil {
		for _, from := range OnePerNode(pods) {
			out = append(out, p.PodToService(ctx, from, svc, pods))
		}
	}
	return out
}

func podRef(p corev1.Pod) string { return p.Namespace + "/" + p.Name }
