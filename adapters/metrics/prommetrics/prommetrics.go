// Package prommetrics is the Prometheus Recorder of the server's /metrics:
// the metrics package's names, in a registry of its own.
package prommetrics

import (
	"context"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/admitfn/admitfn/adapters/metrics"
	"github.com/admitfn/admitfn/core/celeval"
)

// Recorder collects review metrics for Prometheus.
type Recorder struct {
	registry *prometheus.Registry
	reviews  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	rejected prometheus.Counter
	stale    *prometheus.CounterVec
	clusters *prometheus.CounterVec
	readErrs *prometheus.CounterVec
	idle     *prometheus.CounterVec
}

var _ metrics.Recorder = (*Recorder)(nil)

// New returns a Recorder; bundle, when set, is read at each scrape for the
// bundle's age and failed checks.
func New(bundle metrics.BundleStatus) *Recorder {
	r := &Recorder{
		registry: prometheus.NewRegistry(),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.ReviewsTotal,
			Help: "Review requests answered, by route, decision (allowed, denied, error) and HTTP status."}, []string{"route", "decision", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metrics.ReviewDurationMS,
			Help:    "Time from request to answer, in milliseconds.",
			Buckets: []float64{0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}}, []string{"route", "decision"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: metrics.RejectedTotal,
			Help: "Requests refused before review: no valid path token or credentials."}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.StaleRouteReviewsTotal,
			Help: "Reviews on routes the serving bundle does not have, by state: retired (answered with the earlier bundle that had it), ended (retired, transition over: 404) or unknown (404)."}, []string{"state"}),
		clusters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.ClusterReviewsTotal,
			Help: "Reviews on a cluster's URL, by cluster and decision."}, []string{"cluster", "decision"}),
		readErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.ClusterReadErrorsTotal,
			Help: "Reads of a cluster that failed a policy: unreachable, slow, refused credentials or too many in flight."}, []string{"cluster"}),
		idle: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.IdleReviewsTotal,
			Help: "Reviews no binding acted on (none matched, or every match condition left the request out), by route: calls kube-apiserver made for nothing."}, []string{"route"}),
	}
	r.registry.MustRegister(r.reviews, r.duration, r.rejected, r.stale, r.clusters, r.readErrs, r.idle,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, path := range []string{celeval.PathUntracked, celeval.PathLinear, celeval.PathPlanned} {
		fallback := func() (celeval.Fallback, bool) {
			for _, f := range celeval.Fallbacks() {
				if f.Path == path {
					return f, true
				}
			}
			return celeval.Fallback{}, false
		}
		labels := prometheus.Labels{"path": path}
		r.registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metrics.CELFastPathInUse, ConstLabels: labels,
				Help: "1 for each CEL fast path in use, 0 for one that could not be planned on this cel-go (evaluation then is cel-go's own: the same decisions, slower)."},
				func() float64 {
					if _, fell := fallback(); fell {
						return 0
					}
					return 1
				}),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metrics.CELFallbackProgramsTotal, ConstLabels: labels,
				Help: "CEL programs planned without a fast path that could not be planned."},
				func() float64 {
					f, _ := fallback()
					return float64(f.Programs)
				}),
		)
	}
	if bundle != nil {
		r.registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metrics.BundleAgeSeconds,
				Help: "Age of the served bundle: since its manifest was created, or since it was loaded."},
				func() float64 { return bundle().Age.Seconds() }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metrics.BundleLoadErrorsTotal,
				Help: "Bundle checks that failed (the last good bundle kept serving)."},
				func() float64 { return float64(bundle().LoadErrors) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metrics.BundleRefusedTotal,
				Help: "Bundle manifests refused: unsigned, a bad signature, another location, expired or a rollback."},
				func() float64 { return float64(bundle().Refused) }),
		)
	}
	return r
}

func (r *Recorder) Review(_ context.Context, rv metrics.Review) {
	r.reviews.WithLabelValues(rv.Route, rv.Decision, strconv.Itoa(rv.Status)).Inc()
	r.duration.WithLabelValues(rv.Route, rv.Decision).Observe(float64(rv.Latency.Microseconds()) / 1000)
	if rv.RouteState != "" {
		r.stale.WithLabelValues(rv.RouteState).Inc()
	}
	if rv.Idle {
		r.idle.WithLabelValues(rv.Route).Inc()
	}
	if rv.Cluster != "" {
		r.clusters.WithLabelValues(rv.Cluster, rv.Decision).Inc()
		if rv.ClusterReadErrors > 0 {
			r.readErrs.WithLabelValues(rv.Cluster).Add(float64(rv.ClusterReadErrors))
		}
	}
}

func (r *Recorder) Rejected(context.Context) { r.rejected.Inc() }

// Handler serves the registry in the Prometheus text format.
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{})
}
