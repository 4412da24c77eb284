package metrics

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Lines writes one log line per review with the metrics as fields, through
// the platform's logger (the request's, when the context carries one, so
// Lambda lines keep their requestId). In EMF mode the line carries the
// `_aws` directive, and CloudWatch turns it into metrics (namespace
// admitfn, dimensions route and decision, and cluster and decision on a
// cluster's URL); otherwise the fields serve
// log-based metrics (Cloud Logging). Counters are written as increments
// since the previous line, as both systems sum them.
type Lines struct {
	log    zerolog.Logger
	emf    bool
	now    func() time.Time
	bundle BundleStatus

	mu         sync.Mutex
	loadErrors int64 // reported so far
	refused    int64 // reported so far
	rejected   int64 // not yet reported
}

var _ Recorder = (*Lines)(nil)

// NewEMF returns a Recorder writing CloudWatch Embedded Metric Format lines.
func NewEMF(log zerolog.Logger, bundle BundleStatus) *Lines {
	return &Lines{log: log, emf: true, now: time.Now, bundle: bundle}
}

// NewLogFields returns a Recorder writing metric fields in structured log
// lines, for log-based metrics.
func NewLogFields(log zerolog.Logger, bundle BundleStatus) *Lines {
	return &Lines{log: log, now: time.Now, bundle: bundle}
}

type emfDirective struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []emfMetric `json:"CloudWatchMetrics"`
}

type emfMetric struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []emfMeasure `json:"Metrics"`
}

type emfMeasure struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

func (l *Lines) Review(ctx context.Context, r Review) {
	log := &l.log
	if c := zerolog.Ctx(ctx); c.GetLevel() != zerolog.Disabled {
		log = c
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := log.Info().Str("route", r.Route).Str("decision", r.Decision).Int("status", r.Status).Str("bundle", r.Bundle).
		Int(ReviewsTotal, 1).Float64(ReviewDurationMS, float64(r.Latency.Microseconds())/1000)
	if len(r.FailedPolicies) > 0 {
		e = e.Strs("failed_policies", r.FailedPolicies)
	}
	measures := []emfMeasure{{ReviewsTotal, "Count"}, {ReviewDurationMS, "Milliseconds"}}
	if r.RouteState != "" {
		e = e.Str("route_state", r.RouteState).Int(StaleRouteReviewsTotal, 1)
		measures = append(measures, emfMeasure{StaleRouteReviewsTotal, "Count"})
	}
	if r.Idle {
		e = e.Bool("idle", true).Int(IdleReviewsTotal, 1)
		measures = append(measures, emfMeasure{IdleReviewsTotal, "Count"})
	}
	dimensions := [][]string{{"route", "decision"}}
	if r.Cluster != "" {
		e = e.Str("cluster", r.Cluster).Int(ClusterReviewsTotal, 1).Int(ClusterReadErrorsTotal, r.ClusterReadErrors)
		measures = append(measures, emfMeasure{ClusterReviewsTotal, "Count"}, emfMeasure{ClusterReadErrorsTotal, "Count"})
		dimensions = append(dimensions, []string{"cluster", "decision"})
	}
	if l.bundle != nil {
		b := l.bundle()
		e = e.Float64(BundleAgeSeconds, b.Age.Seconds()).Int64(BundleLoadErrorsTotal, b.LoadErrors-l.loadErrors).Int64(BundleRefusedTotal, b.Refused-l.refused)
		l.loadErrors, l.refused = b.LoadErrors, b.Refused
		measures = append(measures, emfMeasure{BundleAgeSeconds, "Seconds"}, emfMeasure{BundleLoadErrorsTotal, "Count"}, emfMeasure{BundleRefusedTotal, "Count"})
	}
	e = e.Int64(RejectedTotal, l.rejected)
	l.rejected = 0
	measures = append(measures, emfMeasure{RejectedTotal, "Count"})
	if l.emf {
		d, _ := json.Marshal(emfDirective{ // plain structs: cannot fail
			Timestamp:         l.now().UnixMilli(),
			CloudWatchMetrics: []emfMetric{{Namespace: "admitfn", Dimensions: dimensions, Metrics: measures}},
		})
		e = e.RawJSON("_aws", d)
	}
	e.Msg("admitfn metrics")
}

// Rejected requests are counted and reported with the next review line:
// a line per rejection would let anyone who finds the URL fill the logs.
func (l *Lines) Rejected(context.Context) {
	l.mu.Lock()
	l.rejected++
	l.mu.Unlock()
}
