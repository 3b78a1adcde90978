package workload

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Pair is a source and a destination pod of a connectivity check.
type Pair struct {
	From, To corev1.Pod
}

// probeable are the pods a check can use, grouped by node: Ready, with an
// IP, not terminating, not on the host network. Nodes and the pods of each
// are sorted by name, so the choice is the same on every call.
func probeable(pods []corev1.Pod) (nodes []string, byNode map[string][]corev1.Pod) {
	byNode = map[string][]corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Spec.HostNetwork || p.Status.PodIP == "" || p.Spec.NodeName == "" || !IsReady(p) {
			continue
		}
		if _, ok := byNode[p.Spec.NodeName]; !ok {
			nodes = append(nodes, p.Spec.NodeName)
		}
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], *p)
	}
	sort.Strings(nodes)
	for _, ps := range byNode {
		sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	}
	return nodes, byNode
}

// SameNodePairs picks, for every node with at least two usable pods, its
// first pod → its second pod (by name).
func SameNodePairs(pods []corev1.Pod) []Pair {
	nodes, byNode := probeable(pods)
	var out []Pair
	for _, n := range nodes {
		if ps := byNode[n]; len(ps) >= 2 {
			out = append(out, Pair{From: ps[0], To: ps[1]})
		}
	}
	return out
}

// CrossNodePairs picks, for every ordered pair of distinct nodes (a, b),
// a pod of a → a pod of b: both directions, since a datapath can fail one
// way only. The pod used on a node is its first one as a source and its
// last one as a destination, so two pods per node are exercised when
// there are two.
func CrossNodePairs(pods []corev1.Pod) []Pair {
	nodes, byNode := probeable(pods)
	var out []Pair
	for _, a := range nodes {
		for _, b := range nodes {
			if a == b {
				continue
			}
			dst := byNode[b]
			out = append(out, Pair{From: byNode[a][0], To: dst[len(dst)-1]})
		}
	}
	return out
}

// OnePerNode picks the first usable pod of every node: the sources of the
// Service checks.
func OnePerNode(pods []corev1.Pod) []corev1.Pod {
	nodes, byNode := probeable(pods)
	out := make([]corev1.Pod, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, byNode[n][0])
	}
	return out
}

// Nodes lists the distinct nodes of the usable pods, sorted.
func Nodes(pods []corev1.Pod) []string {
	nodes, _ := probeable(pods)
	return nodes
}
