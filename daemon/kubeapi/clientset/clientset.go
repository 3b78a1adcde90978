// Package clientset serves kubeapi.Interface from a client-go clientset:
// for tests, benchmarks and tools that hold one already (the fake
// clientset above all). terwayd itself never imports it, since a
// clientset links every API group.
package clientset

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"

	"github.com/terway-sim/terway/daemon/kubeapi"
)

// Wrap returns cs as the daemon sees the API server.
func Wrap(cs kubernetes.Interface) kubeapi.Interface { return wrapped{cs: cs} }

type wrapped struct{ cs kubernetes.Interface }

func (w wrapped) Pods(namespace string) kubeapi.Pods { return w.cs.CoreV1().Pods(namespace) }
func (w wrapped) Nodes() kubeapi.Nodes               { return w.cs.CoreV1().Nodes() }
func (w wrapped) ConfigMaps(namespace string) kubeapi.ConfigMaps {
	return w.cs.CoreV1().ConfigMaps(namespace)
}
func (w wrapped) Events(namespace string) kubeapi.Events { return w.cs.CoreV1().Events(namespace) }

// IsWatchListSemanticsUnSupported passes on what the clientset says (the
// fake one sends no watch-list bookmarks, and an informer waiting for one
// would never sync).
func (w wrapped) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(w.cs)
}
