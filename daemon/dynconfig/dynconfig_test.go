package dynconfig

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
)

const base = `{"max_pool_size":5,"min_pool_size":1,"vswitches":{"z":["vsw-a"]},"cluster_id":"c-base"}`

func node(name, dynamic string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if dynamic != "" {
		n.Labels = map[string]string{k8s.LabelDynamicConfig: dynamic}
	}
	return n
}

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func TestLoad(t *testing.T) {
	kube := fake.NewClientset(
		node("plain", ""),
		node("big", "big-pool"),
		node("elsewhere", "terway-pool"),
		node("lost", "no-such-config"),
		node("garbled", "garbled"),
		node("invalid", "invalid"),
		node("empty", "empty"),
		configMap("kube-system", "big-pool", map[string]string{
			Key: `{"max_pool_size":20,"vswitches":{"z":["vsw-b"]},"min_pool_size":null}`}),
		configMap("terway", "terway-pool", map[string]string{Key: `{"max_pool_size":30}`}),
		configMap("kube-system", "garbled", map[string]string{Key: `{"max_pool_size":`}),
		configMap("kube-system", "invalid", map[string]string{Key: `{"max_pool_size":-1}`}),
		configMap("kube-system", "empty", map[string]string{"other": `{"max_pool_size":40}`}),
	)
	ctx := context.Background()
	load := func(node, ns string) (maxPool, minPool int, vsw, cluster string, err error) {
		t.Helper()
		cfg, err := Load(ctx, clientset.Wrap(kube), node, []byte(base), ns)
		if err != nil {
			return 0, 0, "", "", err
		}
		return cfg.MaxPoolSize, cfg.MinPoolSize, strings.Join(cfg.VSwitches["z"], ","), cfg.ClusterID, nil
	}

	for _, tc := range []struct {
		name, node, ns   string
		maxPool, minPool int
		vsw              string
	}{
		{"no label: the base", "plain", "", 5, 1, "vsw-a"},
		{"unknown node: the base", "nobody", "", 5, 1, "vsw-a"},
		{"label: merged (kube-system by default)", "big", "", 20, 0, "vsw-b"},
		{"label: merged, namespace given", "big", "kube-system", 20, 0, "vsw-b"},
		{"label: ConfigMap of the namespace given", "elsewhere", "terway", 30, 1, "vsw-a"},
		{"ConfigMap without eni_conf: the base", "empty", "", 5, 1, "vsw-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxPool, minPool, vsw, cluster, err := load(tc.node, tc.ns)
			if err != nil {
				t.Fatal(err)
			}
			if maxPool != tc.maxPool || minPool != tc.minPool || vsw != tc.vsw || cluster != "c-base" {
				t.Errorf("max_pool_size %d min_pool_size %d vswitches %s cluster_id %s, want %d %d %s c-base",
					maxPool, minPool, vsw, cluster, tc.maxPool, tc.minPool, tc.vsw)
			}
		})
	}

	for _, tc := range []struct {
		name, node, ns string
		want           []string
		notFound       bool
	}{
		{"missing ConfigMap", "lost", "", []string{"dynamic config kube-system/no-such-config of node lost", "not found"}, true},
		{"ConfigMap in another namespace", "elsewhere", "", []string{"dynamic config kube-system/terway-pool of node elsewhere"}, true},
		{"malformed eni_conf", "garbled", "", []string{"dynamic config kube-system/garbled of node garbled", "patch", "malformed JSON"}, false},
		{"merged eni_conf invalid", "invalid", "", []string{"dynamic config kube-system/invalid of node invalid merged over the base",
			"eni_conf: max_pool_size: must be >= 0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, _, err := load(tc.node, tc.ns)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.notFound && !apierrors.IsNotFound(err) {
				t.Errorf("error %q does not wrap the API server's NotFound", err)
			}
		})
	}

	if _, err := Load(ctx, clientset.Wrap(kube), "plain", []byte(`{"max_pool_size":-1}`), ""); err == nil ||
		strings.Contains(err.Error(), "dynamic config") || !strings.Contains(err.Error(), "max_pool_size") {
		t.Errorf("invalid base without dynamic config: %v", err)
	}
}
