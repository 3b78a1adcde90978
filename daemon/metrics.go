package daemon

import (
	"strconv"
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
	// heals counts the heal's outcomes (heal.go; ours, not Terway's).
	heals *prometheus.CounterVec
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
			Help: "ECS/VPC API calls by action and outcome (Success, the error code, TransportError, Degraded, or Canceled when the caller gave up or the daemon stopped)."}, []string{"api", "outcome"}),
		limiterLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rate_limiter_latency",
			Help: "Time API calls waited for the client-side rate limiter in milliseconds.", Buckets: prometheus.ExponentialBuckets(1, 2, 18)},
			[]string{"api"}),
		metadataLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "aliyun_metadata_latency",
			Help: "Latency of instance metadata reads in milliseconds.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)},
			[]string{"url", "error"}),
		heals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terway_pool_heals_total",
			Help: "What the heal did about changes an operator made out of band: reassigned (an unassigned address assigned back), lost (an address on no ENI any more: the pod is evicted), eni_deleted (a detached ENI deleted once its pods were gone), eni_forgotten (an idle ENI detached or deleted out of band, dropped from the pool)."},
			[]string{"outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.rpcLatency, m.apiLatency, m.apiCalls, m.limiterLatency, m.metadataLatency, m.heals)
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

// poolCollector reports the pool's counts at scrape time, so that the
// gauges can never disagree with the pool.
type poolCollector struct {
	d                        *Daemon
	total, idle, inUse, enis *prometheus.Desc
}

func newPoolCollector(d *Daemon) *poolCollector {
	labels := []string{"type", "capacity"}
	return &poolCollector{d: d,
		total: prometheus.NewDesc("terway_resource_pool_total_count", "Addresses (or ENIs) the node's pool holds.", labels, nil),
		idle:  prometheus.NewDesc("terway_resource_pool_idle_count", "Idle addresses (or ENIs) in the node's pool.", labels, nil),
		inUse: prometheus.NewDesc("terway_resource_pool_inuse_count", "Addresses (or ENIs) held by pods, sticky reservations included.", labels, nil),
		enis:  prometheus.NewDesc("terway_eniip_factory_eni_count", "Secondary ENIs attached to the node by the daemon.", []string{"max_eni"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.idle
	ch <- c.inUse
	ch <- c.enis
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.d.pool.Stats()
	kind, capa := modes[c.d.mode].metric, strconv.Itoa(c.d.capacity)
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(st.Total), kind, capa)
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(st.Idle), kind, capa)
	ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(st.InUse+st.Reserved), kind, capa)
	ch <- prometheus.MustNewConstMetric(c.enis, prometheus.GaugeValue, float64(st.ENIs), strconv.Itoa(c.d.limits.Adapters-1))
}
