// Package metrics records what reviews and bundle checks do, under one set
// of names on every platform: Prometheus on the server (prommetrics),
// CloudWatch Embedded Metric Format lines on Lambda and structured log
// fields on Cloud Functions (Lines).
package metrics

import (
	"context"
	"time"
)

// The metric names, the same everywhere.
const (
	ReviewsTotal          = "admitfn_reviews_total"
	ReviewDurationMS      = "admitfn_review_duration_ms"
	BundleAgeSeconds      = "admitfn_bundle_age_seconds"
	BundleLoadErrorsTotal = "admitfn_bundle_load_errors_total"
	BundleRefusedTotal    = "admitfn_bundle_refused_total"
	RejectedTotal         = "admitfn_rejected_requests_total"
	// StaleRouteReviewsTotal counts reviews on routes the bundle serving
	// does not have, by RouteState: a webhook configuration older (or
	// newer) than the bundle.
	StaleRouteReviewsTotal = "admitfn_stale_route_reviews_total"
	// ClusterReviewsTotal counts reviews on a cluster's URL, by cluster
	// and decision; ClusterReadErrorsTotal, the reads of a cluster that a
	// review got an error for (unreachable, slow, refused credentials, too
	// many in flight), each of which failed a policy.
	ClusterReviewsTotal    = "admitfn_cluster_reviews_total"
	ClusterReadErrorsTotal = "admitfn_cluster_read_errors_total"
	// IdleReviewsTotal counts, by route, the reviews no binding acted on
	// (none matched, or every match condition left the request out):
	// calls kube-apiserver made for nothing.
	IdleReviewsTotal = "admitfn_idle_reviews_total"
	// CELFallbackProgramsTotal counts, by fast path, the CEL programs
	// planned without it because it could not be planned (a cel-go that
	// changed what it reads): evaluation is cel-go's own, the same
	// decisions, slower. Zero on a build whose fast paths all work.
	CELFallbackProgramsTotal = "admitfn_cel_fallback_programs_total"
	// CELFastPathInUse is 1 for each fast path in use, 0 for one that
	// fell back.
	CELFastPathInUse = "admitfn_cel_fast_path_in_use"
)

// Decisions of a review.
const (
	Allowed = "allowed"
	Denied  = "denied"
	// Error: no decision; the answer was an error status, so the webhook's
	// failurePolicy decided.
	Error = "error"
)

// UnknownRoute stands for any path that is no route of the bundle, so that
// callers cannot create label values.
const UnknownRoute = "unknown"

// Review is one answered review request.
type Review struct {
	// Route is the group's path (/validate/<id>), or UnknownRoute.
	Route    string
	Decision string
	// Status is the HTTP status of the answer.
	Status  int
	Latency time.Duration
	Bundle  string
	// FailedPolicies denied, warned about or failed the request.
	FailedPolicies []string
	// RouteState is "" for a route of the bundle serving; else "retired"
	// (an earlier bundle's, answered with it during its transition),
	// "ended" (retired, transition over) or "unknown".
	RouteState string
	// Cluster is the cluster named by the URL, one of the deployment's;
	// "" for a URL without one. ClusterReadErrors counts the review's
	// reads of it that failed.
	Cluster           string
	ClusterReadErrors int
	// Idle: answered, and no binding acted on the request.
	Idle bool
}

// Recorder receives reviews and rejected requests.
type Recorder interface {
	Review(ctx context.Context, r Review)
	// Rejected counts a request refused before review: no valid path token
	// or credentials.
	Rejected(ctx context.Context)
}

// Bundle is what the metrics say of the served bundle.
type Bundle struct {
	Age time.Duration
	// LoadErrors counts the bundle checks that failed since start; Refused,
	// those among them that refused a manifest (a bad signature, another
	// location, expired, a rollback): what a bucket writer without the
	// signing key can cause, and worth an alert of its own.
	LoadErrors, Refused int64
}

// BundleStatus reports the served bundle's state.
type BundleStatus func() Bundle

// Nop records nothing.
type Nop struct{}

func (Nop) Review(context.Context, Review) {}
func (Nop) Rejected(context.Context)       {}
