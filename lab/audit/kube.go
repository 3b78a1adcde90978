package audit

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeView is what the API server says: every pod, and the lab's nodes
// (nil for a node the API server does not have).
type kubeView struct {
	pods  map[string]*corev1.Pod // "namespace/name"
	nodes map[string]*corev1.Node
}

// readKube lists all pods once (a field selector per node would cost a
// request per node and fake clientsets ignore it) and gets each lab node.
func readKube(ctx context.Context, cs kubernetes.Interface, nodes []NodeInput) (*kubeView, error) {
	list, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	v := &kubeView{pods: map[string]*corev1.Pod{}, nodes: map[string]*corev1.Node{}}
	for i := range list.Items {
		p := &list.Items[i]
		v.pods[p.Namespace+"/"+p.Name] = p
	}
	for _, n := range nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			v.nodes[n.Name] = nil
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get node %s: %w", n.Name, err)
		}
		v.nodes[n.Name] = node
	}
	return v, nil
}

// terminal reports whether the pod has finished: it needs no network.
func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// networked reports whether the pod is one the CNI plugin wires up.
func networked(p *corev1.Pod) bool { return !p.Spec.HostNetwork }

// running reports whether the pod must hold its network now: it runs, or
// the kubelet already reported its addresses.
func running(p *corev1.Pod) bool {
	return !terminal(p) && (p.Status.Phase == corev1.PodRunning || len(podIPs(p)) > 0)
}

// podIPs are the pod's addresses as its status reports them.
func podIPs(p *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	for _, s := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(s.IP); err == nil {
			out = append(out, a)
		}
	}
	if len(out) == 0 && p.Status.PodIP != "" {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// nodePodCIDRs are the node's podCIDRs (VPC mode).
func nodePodCIDRs(n *corev1.Node) []netip.Prefix {
	if n == nil {
		return nil
	}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}
