// Package dynconfig builds a node daemon's configuration the way terwayd
// does at start: the base eni_conf document, with Terway's dynamic per-node
// configuration merged over it. A node labelled terway-config=<name>
// (k8s.LabelDynamicConfig) takes key eni_conf of ConfigMap <name>, in the
// daemon's namespace, as an RFC 7396 merge patch over the base
// ([config.Merge]); the result is parsed with [config.Parse].
//
// It is a library so that every daemon is configured along this one path:
// terwayd (which reads the file and the environment and passes them in),
// the bench's in-process nodes and the lab's tests, whose nodes may be
// labelled like real ones.
package dynconfig

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/config"
	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/kubeapi"
)

const (
	// DefaultNamespace is where the ConfigMaps are read when no namespace
	// is given (terwayd: POD_NAMESPACE unset).
	DefaultNamespace = "kube-system"
	// Key is the ConfigMap key holding the patch.
	Key = "eni_conf"
)

// Load returns the configuration of node: base (an eni_conf document) with
// the node's dynamic config merged over it, parsed. namespace is where the
// ConfigMaps live ("": DefaultNamespace).
//
// A node without the label, or one that cannot be read (the API server is
// down at start: the daemon then serves from its local sources), gets base
// alone. A label naming a ConfigMap that cannot be read, or whose eni_conf
// is not JSON, is an error naming the ConfigMap and the node; so is a
// merged document that does not parse. A ConfigMap without eni_conf
// changes nothing.
func Load(ctx context.Context, kube kubeapi.Interface, node string, base []byte, namespace string) (*config.Config, error) {
	data, source, err := document(ctx, kube, node, base, namespace)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(data)
	if err != nil && source != "" {
		return nil, fmt.Errorf("%s merged over the base: %w", source, err)
	}
	return cfg, err
}

// document is Load without the parse: the merged eni_conf document, and
// source, which names the dynamic config applied ("dynamic config
// <namespace>/<name> of node <node>"), empty when base is returned as it is.
func document(ctx context.Context, kube kubeapi.Interface, node string, base []byte, namespace string) (data []byte, source string, err error) {
	n, err := kube.Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return base, "", nil
	}
	name := n.Labels[k8s.LabelDynamicConfig]
	if name == "" {
		return base, "", nil
	}
	if namespace == "" {
		namespace = DefaultNamespace
	}
	source = fmt.Sprintf("dynamic config %s/%s of node %s", namespace, name, node)
	cm, err := kube.ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	patch := cm.Data[Key]
	if strings.TrimSpace(patch) == "" {
		return base, "", nil
	}
	if data, err = config.Merge(base, []byte(patch)); err != nil {
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	return data, source, nil
}
