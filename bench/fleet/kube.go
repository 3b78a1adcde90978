package fleet

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

// fleetKube is what a fleet daemon sees of Kubernetes: its own fake API
// server for its pods and events (a thousand daemons each listing every
// pod of the fleet would be the bottleneck), and the fleet's shared one
// for nodes, so that a daemon can read what the others published on
// theirs (their instance type's limits).
type fleetKube struct {
	kubernetes.Interface
	nodes kubernetes.Interface
}

// CoreV1 is the node's own API server, but for nodes.
func (k fleetKube) CoreV1() corev1client.CoreV1Interface {
	return fleetCoreV1{CoreV1Interface: k.Interface.CoreV1(), shared: k.nodes.CoreV1()}
}

type fleetCoreV1 struct {
	corev1client.CoreV1Interface
	shared corev1client.CoreV1Interface
}

// Nodes are the fleet's.
func (c fleetCoreV1) Nodes() corev1client.NodeInterface { return c.shared.Nodes() }

// newFleetNodes is the fleet's shared node API server. Lists honour
// their limit, as a real API server does: the fake one returns every
// node, and a thousand starting daemons would copy a thousand nodes each.
func newFleetNodes() *fake.Clientset {
	cs := fake.NewSimpleClientset()
	tracker := cs.Tracker()
	cs.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, kruntime.Object, error) {
		la := a.(k8stesting.ListAction)
		obj, err := tracker.List(corev1.SchemeGroupVersion.WithResource("nodes"), corev1.SchemeGroupVersion.WithKind("Node"), "")
		if err != nil {
			return true, nil, err
		}
		sel := la.GetListRestrictions().Labels
		if sel == nil {
			sel = labels.Everything()
		}
		var opts metav1.ListOptions
		if lo, ok := a.(interface{ GetListOptions() metav1.ListOptions }); ok {
			opts = lo.GetListOptions()
		}
		out := &corev1.NodeList{}
		for _, n := range obj.(*corev1.NodeList).Items {
			if opts.Limit > 0 && int64(len(out.Items)) == opts.Limit {
				break
			}
			if sel.Matches(labels.Set(n.Labels)) {
				out.Items = append(out.Items, n)
			}
		}
		return true, out, nil
	})
	return cs
}

// IsWatchListSemanticsUnSupported tells client-go's informers, as the fake
// clientset inside does, that this API server sends no watch-list
// bookmarks: without it the daemon's pod informer waits for one that
// never comes.
func (k fleetKube) IsWatchListSemanticsUnSupported() bool { return true }
