package prommetrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/adapters/metrics"
)

func TestScrape(t *testing.T) {
	r := New(func() metrics.Bundle { return metrics.Bundle{Age: 42 * time.Second, LoadErrors: 2, Refused: 1} })
	ctx := context.Background()
	r.Review(ctx, metrics.Review{Route: "/validate", Decision: metrics.Denied, Status: 200, Latency: 3 * time.Millisecond})
	r.Review(ctx, metrics.Review{Route: "/validate", Decision: metrics.Denied, Status: 200, Latency: 30 * time.Millisecond})
	r.Review(ctx, metrics.Review{Route: metrics.UnknownRoute, Decision: metrics.Error, Status: 404, Latency: time.Millisecond, RouteState: "unknown"})
	r.Review(ctx, metrics.Review{Route: "/validate/aaaaaaaaaa", Decision: metrics.Allowed, Status: 200, Latency: time.Millisecond, RouteState: "retired"})
	r.Review(ctx, metrics.Review{Route: "/validate/aaaaaaaaaa", Decision: metrics.Allowed, Status: 200, Latency: time.Millisecond, RouteState: "retired"})
	r.Review(ctx, metrics.Review{Route: "/validate", Decision: metrics.Denied, Status: 200, Latency: time.Millisecond, Cluster: "prod-eu", ClusterReadErrors: 2})
	r.Review(ctx, metrics.Review{Route: "/validate", Decision: metrics.Allowed, Status: 200, Latency: time.Millisecond, Cluster: "prod-eu", Idle: true})
	r.Rejected(ctx)
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`admitfn_reviews_total{decision="denied",route="/validate",status="200"} 3`,
		`admitfn_cluster_reviews_total{cluster="prod-eu",decision="denied"} 1`,
		`admitfn_cluster_reviews_total{cluster="prod-eu",decision="allowed"} 1`,
		`admitfn_cluster_read_errors_total{cluster="prod-eu"} 2`,
		`admitfn_idle_reviews_total{route="/validate"} 1`,
		`admitfn_reviews_total{decision="error",route="unknown",status="404"} 1`,
		`admitfn_review_duration_ms_bucket{decision="denied",route="/validate",le="5"} 2`,
		`admitfn_review_duration_ms_bucket{decision="denied",route="/validate",le="50"} 3`,
		`admitfn_review_duration_ms_sum{decision="denied",route="/validate"} 34`,
		"admitfn_rejected_requests_total 1",
		`admitfn_stale_route_reviews_total{state="retired"} 2`,
		`admitfn_stale_route_reviews_total{state="unknown"} 1`,
		"admitfn_bundle_age_seconds 42",
		"admitfn_bundle_load_errors_total 2",
		"admitfn_bundle_refused_total 1",
		// Every CEL fast path is in use on the cel-go admitfn builds with.
		`admitfn_cel_fast_path_in_use{path="linear"} 1`,
		`admitfn_cel_fast_path_in_use{path="planned"} 1`,
		`admitfn_cel_fast_path_in_use{path="untracked"} 1`,
		`admitfn_cel_fallback_programs_total{path="linear"} 0`,
		"process_resident_memory_bytes ",
		"go_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}
