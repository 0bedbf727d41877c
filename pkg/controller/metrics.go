package controller

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/tools/leaderelection"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

// Metrics: the Prometheus client library, because its text exposition format and metric
// types are what every scraper expects, and writing them by hand would be an imitation.
const metricsNamespace = "llama_stack_controller"

var (
	// Registry holds every metric the controller exports; cmd/controller serves it.
	Registry = prometheus.NewRegistry()

	syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "sync_duration_seconds",
		Help:    "Time to sync one LlamaStackDistribution, by result (success, error, conflict).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"result"})
	syncTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "syncs_total",
		Help: "Syncs of LlamaStackDistributions, by result (success, error, conflict).",
	}, []string{"result"})
	rollbacksTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "rollbacks_total",
		Help: "Automatic rollbacks of a failed rollout to the last ReplicaSet that served.",
	})
	readyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "llamastackdistribution_ready",
		Help: "1 when the LlamaStackDistribution's Ready condition is True, else 0.",
	}, []string{"namespace", "name"})

	leaderGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "1 while this process holds the named leader election Lease, else 0 (standing by).",
	}, []string{"name"})

	restRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Requests to the Kubernetes API server, by status code, method and host.",
	}, []string{"code", "method", "host"})
	restLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Latency of requests to the Kubernetes API server, by verb, the wait for the client's rate limiter included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"verb"})
	restLimiterWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_rate_limiter_duration_seconds",
		Help:    "Time requests to the Kubernetes API server waited for the client's rate limiter (--kube-api-qps, --kube-api-burst, and the Event client's), by verb.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"verb"})

	workqueueMetrics = struct {
		depth, unfinished, longest *prometheus.GaugeVec
		adds, retries              *prometheus.CounterVec
		latency, duration          *prometheus.HistogramVec
	}{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of the workqueue."}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total",
			Help: "Adds handled by the workqueue."}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help: "Time an item waits in the workqueue before it is processed.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12)}, []string{"name"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "work_duration_seconds",
			Help: "Time processing an item takes.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12)}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration."}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "Seconds the longest running processor has been running."}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total",
			Help: "Retries handled by the workqueue."}, []string{"name"}),
	}

	registerOnce sync.Once
)

// RegisterMetrics registers the controller's metrics, the workqueue's, the REST
// client's and leader election's with Registry. It must run before the first queue and client are made; later
// calls do nothing.
func RegisterMetrics() {
	registerOnce.Do(func() {
		wq := workqueueMetrics
		Registry.MustRegister(syncDuration, syncTotal, rollbacksTotal, readyGauge, leaderGauge, restRequests, restLatency, restLimiterWait,
			wq.depth, wq.adds, wq.latency, wq.duration, wq.unfinished, wq.longest, wq.retries,
			collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		workqueue.SetProvider(queueMetricsProvider{})
		leaderelection.SetProvider(leaderMetricsProvider{})
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestResult:      requestResult{},
			RequestLatency:     requestLatency{},
			RateLimiterLatency: limiterWait{},
		})
	})
}

type queueMetricsProvider struct{}

func (queueMetricsProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return workqueueMetrics.depth.WithLabelValues(name)
}
func (queueMetricsProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return workqueueMetrics.adds.WithLabelValues(name)
}
func (queueMetricsProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return workqueueMetrics.latency.WithLabelValues(name)
}
func (queueMetricsProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return workqueueMetrics.duration.WithLabelValues(name)
}
func (queueMetricsProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return workqueueMetrics.unfinished.WithLabelValues(name)
}
func (queueMetricsProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return workqueueMetrics.longest.WithLabelValues(name)
}
func (queueMetricsProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return workqueueMetrics.retries.WithLabelValues(name)
}

type leaderMetricsProvider struct{}

func (leaderMetricsProvider) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetric{} }

type leaderMetric struct{}

func (leaderMetric) On(name string)           { leaderGauge.WithLabelValues(name).Set(1) }
func (leaderMetric) Off(name string)          { leaderGauge.WithLabelValues(name).Set(0) }
func (leaderMetric) SlowpathExercised(string) {}

type requestResult struct{}

func (requestResult) Increment(_ context.Context, code, method, host string) {
	restRequests.WithLabelValues(code, method, host).Inc()
}

type requestLatency struct{}

func (requestLatency) Observe(_ context.Context, verb string, _ url.URL, latency time.Duration) {
	restLatency.WithLabelValues(verb).Observe(latency.Seconds())
}

type limiterWait struct{}

func (limiterWait) Observe(_ context.Context, verb string, _ url.URL, wait time.Duration) {
	restLimiterWait.WithLabelValues(verb).Observe(wait.Seconds())
}

// observeSync records one sync's duration and result.
func observeSync(start time.Time, result string) {
	syncDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	syncTotal.WithLabelValues(result).Inc()
}
