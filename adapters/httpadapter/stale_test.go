package httpadapter

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/adapters/metrics"
	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

// staleEngine serves the example bundle, and says of two more routes that
// they are retired: one in its transition (answered by the bundle's first
// group, standing in for the bundle that had it), one past it.
type staleEngine struct {
	*engine.Engine
	retired, ended policy.Route
}

func (s staleEngine) RouteState(rt policy.Route) engine.RouteState {
	switch {
	case rt == s.retired:
		return engine.RouteRetired
	case rt == s.ended:
		return engine.RouteEnded
	case s.HasRoute(rt):
		return engine.RouteServed
	}
	return engine.RouteUnknown
}

func (s staleEngine) Review(ctx context.Context, rt policy.Route, req *review.Request) (*engine.Result, error) {
	switch rt {
	case s.retired:
		return s.Engine.Review(ctx, s.Groups()[0].Route(), req)
	case s.ended:
		return nil, fmt.Errorf("%w %q: bundle x served it; its transition ended at 2026-11-29T11:00:00Z", engine.ErrRetiredRoute, rt.Path())
	}
	return s.Engine.Review(ctx, rt, req)
}

// A review on a retired route is answered and logged as such; one past its
// transition is a 404 that says what to do; both are counted by state, the
// retired routes' paths being the bundle's, not the caller's.
func TestRetiredRoutes(t *testing.T) {
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	s := staleEngine{Engine: eng, retired: policy.Route{Type: policy.Validating, Group: "aaaaaaaaaa"}, ended: policy.Route{Type: policy.Validating, Group: "bbbbbbbbbb"}}
	rec := &recorder{}
	var logs bytes.Buffer
	h := New(s, zerolog.New(&logs), WithMetrics(rec))
	good, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := serve(t, h, exchange{method: "POST", path: "/validate/aaaaaaaaaa", contentType: "application/json", body: string(good)}); got.Code != http.StatusOK {
		t.Errorf("retired route: HTTP %d %s", got.Code, got.Body)
	}
	if !strings.Contains(logs.String(), `"route_state":"retired"`) {
		t.Errorf("the review on a retired route is not logged as such:\n%s", logs.String())
	}
	got := serve(t, h, exchange{method: "POST", path: "/validate/bbbbbbbbbb", contentType: "application/json", body: string(good)})
	code, reason, message := statusBody(t, got)
	if code != http.StatusNotFound || reason != "NotFound" || message != `policy group "/validate/bbbbbbbbbb" was retired by a later bundle and its transition is over: apply the webhook configurations rendered for the current bundle` {
		t.Errorf("ended route: %d %s %q", code, reason, message)
	}
	if !strings.Contains(logs.String(), `"route_state":"ended"`) || !strings.Contains(logs.String(), "transition ended at 2026-11-29T11:00:00Z") {
		t.Errorf("the review on an ended route is not logged as such:\n%s", logs.String())
	}
	id := eng.BundleID()
	want := []metrics.Review{
		{Route: "/validate/aaaaaaaaaa", Decision: metrics.Denied, Status: 200, Bundle: id, FailedPolicies: rec.reviews[0].FailedPolicies, RouteState: "retired"},
		{Route: "/validate/bbbbbbbbbb", Decision: metrics.Error, Status: 404, Bundle: id, RouteState: "ended"},
	}
	if !reflect.DeepEqual(rec.reviews, want) {
		t.Errorf("recorded %+v\nwant %+v", rec.reviews, want)
	}
}
