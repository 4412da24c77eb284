package reload_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/reload"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/test/syncbuf"
)

// selected is sources(tag) with the binding's namespaceSelector set to
// sel ("" for none): a change that gives the group another route.
func selected(tag, sel string) []policy.Source {
	s := sources(tag)
	if sel != "" {
		s[1].Data = []byte(strings.Replace(string(s[1].Data), "validationActions: [Deny]}", "validationActions: [Deny], matchResources: {namespaceSelector: {matchLabels: {"+sel+"}}}}", 1))
	}
	return s
}

func routeOf(t *testing.T, src []policy.Source) policy.Route {
	t.Helper()
	paths, err := bundle.Routes(src)
	if err != nil || len(paths) != 1 {
		t.Fatalf("routes %v, %v: want one", paths, err)
	}
	rt, _ := policy.ParseRoute(paths[0])
	return rt
}

// A publish that moves the binding to another route keeps the old route
// answering with the old bundle until the transition ends, while the new
// route answers with the new one; then the old route is a 404 that says
// why.
func TestRetiredRouteServedForTheTransition(t *testing.T) {
	dir := store.NewDir(t.TempDir())
	clk := &clock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	logs := &syncbuf.Buffer{}
	r := reload.New(reload.Config{Fetcher: &bundle.Fetcher{Bucket: dir}, Interval: interval, Wait: time.Minute, CheckTimeout: 3 * time.Second,
		Log: zerolog.New(logs), Now: clk.Now, Jitter: func(max time.Duration) time.Duration { return max }})
	publish := func(src []policy.Source, transition time.Duration) {
		t.Helper()
		if _, err := bundle.Publish(context.Background(), dir, src, bundle.PublishOptions{Now: clk.Now(), Transition: transition}); err != nil {
			t.Fatal(err)
		}
	}
	review := func(rt policy.Route) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := r.Review(ctx, rt, request)
		if err != nil {
			return "", err
		}
		return res.Response.Result.Message, nil
	}
	deniedBy := func(tag string) string {
		return "ValidatingAdmissionPolicy 'tag' with binding 'tag' denied request: bundle " + tag
	}

	a, b := selected("a", ""), selected("b", "env: prod")
	oldRoute, newRoute := routeOf(t, a), routeOf(t, b)
	if oldRoute == newRoute {
		t.Fatal("the selector change kept the route")
	}
	publish(a, 0)
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := review(oldRoute); err != nil || got != deniedBy("a") {
		t.Fatalf("before: %q, %v", got, err)
	}

	clk.Advance(time.Hour)
	publish(b, 0)
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := review(oldRoute); err != nil || got != deniedBy("a") {
		t.Errorf("old route after the publish: %q, %v; want bundle a's answer", got, err)
	}
	if got, err := review(newRoute); err != nil || got != deniedBy("b") {
		t.Errorf("new route after the publish: %q, %v; want bundle b's answer", got, err)
	}
	if s := r.RouteState(oldRoute); s != engine.RouteRetired {
		t.Errorf("old route state %q, want retired", s)
	}
	_, detail := r.Ready()
	wantRetired := "retired routes, served with bundle " + policy.ID(a) + " until 2026-11-29T11:00:00Z: " + oldRoute.Path()
	if !strings.Contains(detail, "\nroutes: "+newRoute.Path()) || !strings.Contains(detail, wantRetired) {
		t.Errorf("readyz detail:\n%s\nwant routes %s and %q", detail, newRoute.Path(), wantRetired)
	}

	// A later publish that does not touch the route keeps its transition.
	clk.Advance(24 * time.Hour)
	publish(append(selected("b", "env: prod"), policy.Source{Name: "params.yaml", Data: []byte("# a comment\n")}), 0)
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := review(oldRoute); err != nil || got != deniedBy("a") {
		t.Errorf("old route after a second publish: %q, %v; want bundle a's answer", got, err)
	}

	// The transition ends seven days after the publish that retired it.
	clk.Advance(6*24*time.Hour - time.Second)
	if s := r.RouteState(oldRoute); s != engine.RouteRetired {
		t.Errorf("a second before the end: state %q", s)
	}
	clk.Advance(time.Second)
	_, err := review(oldRoute)
	if !errors.Is(err, engine.ErrRetiredRoute) || !strings.Contains(err.Error(), "transition ended at 2026-11-29T11:00:00Z") {
		t.Errorf("after the transition: %v, want ErrRetiredRoute", err)
	}
	if _, detail := r.Ready(); !strings.Contains(detail, "retired routes, transition ended at 2026-11-29T11:00:00Z: "+oldRoute.Path()) {
		t.Errorf("readyz detail after the transition:\n%s", detail)
	}
}

// A negative transition retires routes at once; a route that comes back
// (a revert) is served by the bundle that has it, not its old one.
func TestTransitionOffAndRevert(t *testing.T) {
	root := t.TempDir()
	dir := store.NewDir(root)
	clk := &clock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	publish := func(src []policy.Source, transition time.Duration) *bundle.Manifest {
		t.Helper()
		clk.Advance(time.Minute)
		m, err := bundle.Publish(context.Background(), dir, src, bundle.PublishOptions{Now: clk.Now(), Transition: transition})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	publish(selected("a", ""), 0)
	if m := publish(selected("b", "env: prod"), -1); len(m.Retired) != 0 {
		t.Errorf("retired %+v with the transition off", m.Retired)
	}
	publish(selected("a", ""), 0)
	m := publish(selected("b", "env: prod"), 0)
	if len(m.Retired) != 1 || m.Retired[0].Routes[0] != routeOf(t, selected("a", "")).Path() {
		t.Fatalf("retired %+v", m.Retired)
	}
	// Back to a's route: it is served, no longer retired; b's is.
	m = publish(selected("c", ""), 0)
	if len(m.Retired) != 1 || m.Retired[0].Routes[0] != routeOf(t, selected("b", "env: prod")).Path() || m.Retired[0].Bundle != policy.ID(selected("b", "env: prod")) {
		t.Fatalf("after the revert, retired %+v", m.Retired)
	}
	// A directory holds exactly what its manifest names: a's retired
	// bundle is gone with its last route, b's is there.
	retired, _ := filepath.Glob(filepath.Join(root, ".admitfn", "retired", "*"))
	if want := filepath.Join(root, filepath.FromSlash(m.Retired[0].Object.Key)); len(retired) != 1 || retired[0] != want {
		t.Errorf("retired bundles in the directory: %v, want %s", retired, want)
	}
}

// A review on a route no bundle knows checks the store at once: the
// configuration of a newer bundle can reach kube-apiserver before the
// bundle reaches the function. The checks it starts are rate-limited.
func TestUnknownRouteChecksAtOnce(t *testing.T) {
	dir := store.NewDir(t.TempDir())
	clk := &clock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	logs := &syncbuf.Buffer{}
	r := reload.New(reload.Config{Fetcher: &bundle.Fetcher{Bucket: dir}, Interval: time.Hour, Wait: time.Minute, CheckTimeout: 3 * time.Second,
		Log: zerolog.New(logs), Now: clk.Now, Jitter: func(time.Duration) time.Duration { return 0 }})
	if _, err := bundle.Publish(context.Background(), dir, selected("a", ""), bundle.PublishOptions{Now: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stranger := policy.Route{Type: policy.Validating, Group: "0123456789"}
	if _, err := r.Review(ctx, stranger, request); !errors.Is(err, engine.ErrUnknownRoute) {
		t.Fatalf("unknown route: %v", err)
	}
	// Published now, a minute before the next check is due.
	clk.Advance(time.Second)
	b := selected("b", "env: prod")
	if _, err := bundle.Publish(context.Background(), dir, b, bundle.PublishOptions{Now: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	// Within the rate limit: no check, still unknown.
	if _, err := r.Review(ctx, routeOf(t, b), request); !errors.Is(err, engine.ErrUnknownRoute) {
		t.Fatalf("within %s of the last unknown route: %v", reload.UnknownRouteRecheck, err)
	}
	clk.Advance(reload.UnknownRouteRecheck)
	res, err := r.Review(ctx, routeOf(t, b), request)
	if err != nil || res.Response.Result.Message != "ValidatingAdmissionPolicy 'tag' with binding 'tag' denied request: bundle b" {
		t.Fatalf("the newer bundle's route: %v, %v\n%s", res, err, logs)
	}
}

// A retired bundle that cannot be read (gone from the bucket) fails only
// its own routes: the new bundle loads and serves, the route is unknown.
func TestUnreadableRetiredBundle(t *testing.T) {
	root := t.TempDir()
	dir := store.NewDir(root)
	clk := &clock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	logs := &syncbuf.Buffer{}
	r := reload.New(reload.Config{Fetcher: &bundle.Fetcher{Bucket: dir}, Interval: interval, Wait: time.Minute, CheckTimeout: 3 * time.Second,
		Log: zerolog.New(logs), Now: clk.Now, Jitter: func(max time.Duration) time.Duration { return max }})
	a, b := selected("a", ""), selected("b", "env: prod")
	if _, err := bundle.Publish(context.Background(), dir, a, bundle.PublishOptions{Now: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	m, err := bundle.Publish(context.Background(), dir, b, bundle.PublishOptions{Now: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(m.Retired[0].Object.Key))); err != nil {
		t.Fatal(err)
	}
	if err := r.Load(context.Background()); err != nil {
		t.Fatalf("load: %v\n%s", err, logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := r.Review(ctx, routeOf(t, b), request); err != nil || res.Response.Result.Message != "ValidatingAdmissionPolicy 'tag' with binding 'tag' denied request: bundle b" {
		t.Errorf("the new route: %v %v", res, err)
	}
	if _, err := r.Review(ctx, routeOf(t, a), request); !errors.Is(err, engine.ErrUnknownRoute) {
		t.Errorf("the retired route of an unreadable bundle: %v, want ErrUnknownRoute", err)
	}
	if !strings.Contains(logs.String(), `"retired_bundle":"`+policy.ID(a)+`"`) || !strings.Contains(logs.String(), "the bundle of retired routes cannot be read: they are not served") {
		t.Errorf("not logged:\n%s", logs)
	}
}
