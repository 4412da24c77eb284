package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestEMFLines(t *testing.T) {
	var buf bytes.Buffer
	loadErrors, refused := int64(0), int64(0)
	l := NewEMF(zerolog.New(&buf), func() Bundle { return Bundle{Age: 90 * time.Second, LoadErrors: loadErrors, Refused: refused} })
	l.now = func() time.Time { return time.UnixMilli(1795339377987) }
	l.Rejected(context.Background())
	l.Rejected(context.Background())
	loadErrors, refused = 3, 1
	l.Review(context.Background(), Review{Route: "/validate/abc", Decision: Denied, Status: 200, Latency: 1500 * time.Microsecond, Bundle: "b1", FailedPolicies: []string{"p1"}})
	loadErrors, refused = 4, 2
	// The request's logger, from the context, carries its fields.
	ctx := zerolog.New(&buf).With().Str("requestId", "r2").Logger().WithContext(context.Background())
	l.Review(ctx, Review{Route: UnknownRoute, Decision: Error, Status: 404, Latency: time.Millisecond, Bundle: "b1", RouteState: "unknown"})

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	var first, second map[string]any
	json.Unmarshal([]byte(lines[0]), &first)
	json.Unmarshal([]byte(lines[1]), &second)
	want := map[string]any{
		"level": "info", "message": "admitfn metrics", "route": "/validate/abc", "decision": "denied", "status": float64(200), "bundle": "b1",
		"failed_policies": []any{"p1"}, "admitfn_reviews_total": float64(1), "admitfn_review_duration_ms": 1.5,
		"admitfn_bundle_age_seconds": float64(90), "admitfn_bundle_load_errors_total": float64(3), "admitfn_bundle_refused_total": float64(1), "admitfn_rejected_requests_total": float64(2),
		"_aws": map[string]any{"Timestamp": float64(1795339377987), "CloudWatchMetrics": []any{map[string]any{
			"Namespace": "admitfn", "Dimensions": []any{[]any{"route", "decision"}},
			"Metrics": []any{
				map[string]any{"Name": "admitfn_reviews_total", "Unit": "Count"},
				map[string]any{"Name": "admitfn_review_duration_ms", "Unit": "Milliseconds"},
				map[string]any{"Name": "admitfn_bundle_age_seconds", "Unit": "Seconds"},
				map[string]any{"Name": "admitfn_bundle_load_errors_total", "Unit": "Count"},
				map[string]any{"Name": "admitfn_bundle_refused_total", "Unit": "Count"},
				map[string]any{"Name": "admitfn_rejected_requests_total", "Unit": "Count"},
			}}}},
	}
	if !reflect.DeepEqual(first, want) {
		t.Errorf("first line\n got %v\nwant %v", first, want)
	}
	// Counters are increments since the previous line.
	if second["admitfn_bundle_load_errors_total"] != float64(1) || second["admitfn_bundle_refused_total"] != float64(1) || second["admitfn_rejected_requests_total"] != float64(0) || second["requestId"] != "r2" || second["route"] != "unknown" {
		t.Errorf("second line: %v", second)
	}
	// A review on a route the bundle does not have says so, and counts it.
	if _, ok := first["admitfn_stale_route_reviews_total"]; ok {
		t.Errorf("first line counts a stale route: %v", first)
	}
	metrics := second["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Metrics"].([]any)
	if second["route_state"] != "unknown" || second["admitfn_stale_route_reviews_total"] != float64(1) || !reflect.DeepEqual(metrics[2], map[string]any{"Name": "admitfn_stale_route_reviews_total", "Unit": "Count"}) {
		t.Errorf("second line: %v", second)
	}
}

// A review on a cluster's URL names the cluster, counts it and its failed
// reads, under a second dimension set: cluster and decision; an idle one
// says so and is counted.
func TestEMFLineOfACluster(t *testing.T) {
	var buf bytes.Buffer
	l := NewEMF(zerolog.New(&buf), nil)
	l.Review(context.Background(), Review{Route: "/validate", Decision: Denied, Status: 200, Bundle: "b1", Cluster: "prod-eu", ClusterReadErrors: 2, Idle: true})
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	cw := m["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	wantDims := []any{[]any{"route", "decision"}, []any{"cluster", "decision"}}
	if m["idle"] != true || m["admitfn_idle_reviews_total"] != float64(1) || m["cluster"] != "prod-eu" || m["admitfn_cluster_reviews_total"] != float64(1) || m["admitfn_cluster_read_errors_total"] != float64(2) || !reflect.DeepEqual(cw["Dimensions"], wantDims) {
		t.Errorf("line %v", m)
	}
}

func TestLogFieldLines(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogFields(zerolog.New(&buf), nil)
	l.Review(context.Background(), Review{Route: "/mutate", Decision: Allowed, Status: 200, Latency: 2 * time.Millisecond, Bundle: "b2"})
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if _, emf := m["_aws"]; emf || m["admitfn_reviews_total"] != float64(1) || m["admitfn_review_duration_ms"] != float64(2) || m["decision"] != "allowed" {
		t.Errorf("line: %v", m)
	}
	if _, ok := m["admitfn_bundle_age_seconds"]; ok {
		t.Error("bundle fields without a bundle status")
	}
}
