package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
)

func TestLoadConfigWithDynamicConfig(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "eni_conf")
	if err := os.WriteFile(base, []byte(`{"max_pool_size":5,"min_pool_size":1,"vswitches":{"z":["vsw-a"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"terway-config": "big-pool"}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "big-pool"},
			Data: map[string]string{"eni_conf": `{"max_pool_size":20,"vswitches":{"z":["vsw-b"]},"min_pool_size":null}`}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
	)
	t.Setenv("POD_NAMESPACE", "")
	t.Setenv("ECS_ENDPOINT", "http://127.0.0.1:1")
	cfg, err := loadConfig(context.Background(), base, clientset.Wrap(kube), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPoolSize != 20 || cfg.MinPoolSize != 0 || cfg.VSwitches["z"][0] != "vsw-b" || cfg.ECSEndpoint() != "http://127.0.0.1:1" {
		t.Fatalf("merged config: max %d min %d vswitches %v ecs %q", cfg.MaxPoolSize, cfg.MinPoolSize, cfg.VSwitches, cfg.ECSEndpoint())
	}
	plain, err := loadConfig(context.Background(), base, clientset.Wrap(kube), "n2")
	if err != nil || plain.MaxPoolSize != 5 {
		t.Fatalf("node without dynamic config: %v %v", plain, err)
	}
	// POD_NAMESPACE is where the ConfigMap is read.
	t.Setenv("POD_NAMESPACE", "elsewhere")
	if _, err := loadConfig(context.Background(), base, clientset.Wrap(kube), "n1"); err == nil || !strings.Contains(err.Error(), "elsewhere/big-pool") {
		t.Fatalf("dynamic config in POD_NAMESPACE elsewhere: %v", err)
	}
	t.Setenv("POD_NAMESPACE", "")
	if _, err := loadConfig(context.Background(), filepath.Join(dir, "missing"), clientset.Wrap(kube), "n2"); err == nil {
		t.Fatal("missing config accepted")
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte(`{"max_pool_size":-1,"ip_stack":"ipv6"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = loadConfig(context.Background(), bad, clientset.Wrap(kube), "n2")
	if err == nil || !strings.Contains(err.Error(), "max_pool_size") || !strings.Contains(err.Error(), "ip_stack") {
		t.Fatalf("bad config: %v", err)
	}
}

func TestRequiresNodeName(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	var out bytes.Buffer
	cmd := newCommand(&out)
	cmd.SetArgs([]string{"--kubeconfig", "/nonexistent"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "NODE_NAME") {
		t.Fatalf("without NODE_NAME: %v", err)
	}
}

func TestHelpDocumentsFlags(t *testing.T) {
	var out bytes.Buffer
	cmd := newCommand(&out)
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--daemon-mode", "--log-level", "--readonly-listen", "--kubeconfig", "--config", "NODE_NAME", "POD_NAMESPACE", "ECS_ENDPOINT",
		"--rebuild-store", "damaged"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("help lacks %s", f)
		}
	}
}
