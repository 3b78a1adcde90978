package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// metrics are the daemon's Prometheus collectors (names as Terway's where
// Terway has one). It implements cloud.Observer.
type metrics struct {
	rpcLatency      *prometheus.HistogramVec
	apiLatency      *prometheus.HistogramVec
	apiCalls        *prometheus.CounterVec
	limiterLatency  *prometheus.HistogramVec
	metadataLatency *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		rpcLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "terway_rpc_latency",
			Help: "Latency of the daemon's gRPC calls in milliseconds.", Buckets: prometheus.ExponentialBuckets(1, 2, 18)},
			[]string{"rpc_api", "error"}),
		apiLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "aliyun_openapi_latency",
			Help: "Latency of ECS/VPC API calls in milliseconds.", Buckets: prometheus.ExponentialBuckets(5, 2, 14)},
			[]string{"api", "error"}),
		apiCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terway_cloud_api_calls_total",
			Help: "ECS/VPC API calls by action and outcome (Success or the error code)."}, []string{"api", "outcome"}),
		limiterLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rate_limiter_latency",
			Help: "Time API calls waited for the client-side rate limiter in milliseconds.", Buckets: prometheus.ExponentialBuckets(1, 2, 18)},
			[]string{"api"}),
		metadataLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "aliyun_metadata_latency",
			Help: "Latency of instance metadata reads in milliseconds.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)},
			[]string{"url", "error"}),
	}
	if reg != nil {
		reg.MustRegister(m.rpcLatency, m.apiLatency, m.apiCalls, m.limiterLatency, m.metadataLatency)
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (m *metrics) rpc(method string, took time.Duration, err error) {
	m.rpcLatency.WithLabelValues(method, status.Code(err).String()).Observe(ms(took))
}

// APICall implements cloud.Observer.
func (m *metrics) APICall(action string, took time.Duration, outcome string) {
	errLabel := "false"
	if outcome != "Success" {
		errLabel = "true"
	}
	m.apiLatency.WithLabelValues(action, errLabel).Observe(ms(took))
	m.apiCalls.WithLabelValues(action, outcome).Inc()
}

// RateLimitWait implements cloud.Observer.
func (m *metrics) RateLimitWait(action string, waited time.Duration) {
	m.limiterLatency.WithLabelValues(action).Observe(ms(waited))
}

// MetadataCall implements cloud.Observer.
func (m *metrics) MetadataCall(path string, took time.Duration, err error) {
	m.metadataLatency.WithLabelValues(metadataLabel(path), boolLabel(err != nil)).Observe(ms(took))
}

// metadataLabel keeps the label's cardinality bounded: per-MAC paths
// collapse to their last element.
func metadataLabel(path string) string {
	const macs = "network/interfaces/macs/"
	if len(path) > len(macs) && path[:len(macs)] == macs {
		for i := len(path) - 1; i >= 0; i-- {
			if path[i] == '/' && i != len(path)-1 {
				return macs + "*/" + path[i+1:]
			}
		}
	}
	return path
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
