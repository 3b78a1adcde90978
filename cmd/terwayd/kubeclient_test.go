package main

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/terway-sim/terway/daemon/config"
)

// TestKubeClientLimitsFromConfig: kube_client_qps and kube_client_burst
// reach the daemon's Kubernetes client; unset, client-go's defaults apply.
func TestKubeClientLimitsFromConfig(t *testing.T) {
	base := &rest.Config{Host: "https://127.0.0.1:6443", UserAgent: "terwayd"}
	for _, tc := range []struct {
		conf      string
		qps       float32
		burst     int
		clientQPS float32
	}{
		{`{"kube_client_qps": 20.5, "kube_client_burst": 40}`, 20.5, 40, 20.5},
		{`{"kube_client_qps": 50}`, 50, 50, 50},
		{`{"kube_client_qps": 2}`, 2, rest.DefaultBurst, 2},
		{`{"kube_client_burst": 30}`, 0, 30, rest.DefaultQPS},
		{`{}`, 0, 0, rest.DefaultQPS},
	} {
		cfg, err := config.Parse([]byte(tc.conf))
		if err != nil {
			t.Fatal(err)
		}
		rc := withLimits(base, cfg)
		if rc.QPS != tc.qps || rc.Burst != tc.burst || rc.UserAgent != "terwayd" || rc.Host != base.Host {
			t.Errorf("%s: rest config QPS %g burst %d (%q %q), want %g %d", tc.conf, rc.QPS, rc.Burst, rc.UserAgent, rc.Host, tc.qps, tc.burst)
		}
		if base.QPS != 0 || base.Burst != 0 {
			t.Fatalf("withLimits changed its argument: %+v", base)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		rest, ok := cs.CoreV1().RESTClient().(*rest.RESTClient)
		if !ok {
			t.Fatalf("RESTClient is %T", cs.CoreV1().RESTClient())
		}
		if got := rest.GetRateLimiter().QPS(); got != tc.clientQPS {
			t.Errorf("%s: the client's rate limiter allows %g QPS, want %g", tc.conf, got, tc.clientQPS)
		}
	}
}
