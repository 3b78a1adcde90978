package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/terway-sim/terway/daemon/mode"
)

func TestModeFromArgs(t *testing.T) {
	cases := []struct {
		args []string
		want mode.Mode
		err  bool
	}{
		{[]string{"--daemon-mode=ENIOnly", "--config=/etc/eni/eni_conf"}, "ENIOnly", false},
		{[]string{"/usr/bin/terwayd", "--log-level=info", "--daemon-mode", "VPC"}, "VPC", false},
		{[]string{"-daemon-mode=ENIMultiIP"}, "ENIMultiIP", false},
		{[]string{"--config=/x"}, mode.Default, false},
		{[]string{"--daemon-mode"}, "", true},
	}
	for _, c := range cases {
		got, err := modeFromArgs(c.args)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("modeFromArgs(%q) = %q, %v; want %q (error %v)", c.args, got, err, c.want, c.err)
		}
	}
}

func TestParseENIConf(t *testing.T) {
	got, err := ParseENIConf([]byte(`{"version":"1","max_pool_size":5,"min_pool_size":2,"ip_pool_sync_period":"30s"}`))
	if err != nil || got.MinPoolSize != 2 || got.MaxPoolSize != 5 || got.PoolSyncPeriod != 30*time.Second || got.IPStack != "ipv4" {
		t.Errorf("ParseENIConf = %+v, %v", got, err)
	}
	if got, err = ParseENIConf([]byte(`{"ip_stack":"dual"}`)); err != nil || got.IPStack != "dual" {
		t.Errorf("dual stack: %+v, %v", got, err)
	}
	got, err = ParseENIConf([]byte(`{"max_pool_size":3,"min_pool_size":9}`))
	if err != nil || got.MinPoolSize != 3 || got.MaxPoolSize != 3 {
		t.Errorf("min above max is lowered to max: %+v, %v", got, err)
	}
	got, err = ParseENIConf([]byte(`{"max_pool_size":30,"min_pool_size":2,"min_eni":1}`))
	if err != nil || got.MinPoolSize != 0 || got.MinENI != 1 {
		t.Errorf("min_eni leaves the lower bound to the instance type: %+v, %v", got, err)
	}
	if _, err := ParseENIConf([]byte(`{"max_pool_size":`)); err == nil || !strings.Contains(err.Error(), "eni_conf") {
		t.Errorf("malformed eni_conf: %v", err)
	}
}

func TestTerwayConfig(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: TerwayDaemonSet, Namespace: TerwayNamespace},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Args: []string{"--daemon-mode=VPC"}},
			{Name: TerwayContainer, Command: []string{"/usr/bin/terwayd"}, Args: []string{"--daemon-mode=ENIOnly"}},
		}}}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: TerwayConfigMap, Namespace: TerwayNamespace},
		Data: map[string]string{ENIConfKey: `{"max_pool_size":5,"min_pool_size":0}`}}
	ctx := context.Background()
	got, err := TerwayConfig(ctx, fake.NewClientset(ds, cm))
	if err != nil || got.Mode != "ENIOnly" || got.MaxPoolSize != 5 || got.MinPoolSize != 0 {
		t.Fatalf("TerwayConfig = %+v, %v", got, err)
	}
	if _, err := TerwayConfig(ctx, fake.NewClientset(cm)); err == nil || !strings.Contains(err.Error(), "daemonset kube-system/terway") {
		t.Errorf("no daemonset: %v", err)
	}
	ds.Spec.Template.Spec.Containers = ds.Spec.Template.Spec.Containers[:1]
	if _, err := TerwayConfig(ctx, fake.NewClientset(ds, cm)); err == nil || !strings.Contains(err.Error(), "no container terwayd") {
		t.Errorf("no terwayd container: %v", err)
	}
}
