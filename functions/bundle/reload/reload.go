// Package reload serves the newest good bundle of a location: it fetches,
// verifies and compiles a bundle completely before swapping it in
// atomically (the first one, compiled by admitfn push with the same build,
// compiles each policy on first use), keeps the last good one through any
// failure, and checks for a new one when a request arrives after the
// refresh interval, because
// serverless platforms freeze or throttle a process between requests and a
// background ticker alone would never fire.
package reload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/functions/bundle"
)

// Defaults of Config.
const (
	DefaultInterval = 30 * time.Second
	// DefaultWait bounds how long a request waits for a check it triggered
	// while a bundle is loaded.
	DefaultWait = time.Second
	// DefaultCheckTimeout bounds one check: fetch, verify and compile.
	DefaultCheckTimeout = 20 * time.Second
	// firstRetry is the first backoff step while no bundle is loaded.
	firstRetry = time.Second
)

// Config says where bundles come from and how often to look.
type Config struct {
	Fetcher *bundle.Fetcher
	// Compiler compiles bundles (celeval.NewCompiler() when nil).
	Compiler *celeval.Compiler
	// Interval between checks; a check happens on the first request after
	// Interval plus a random jitter of up to a fifth of it. Zero means
	// DefaultInterval; a negative value turns refresh off after the first
	// successful load.
	Interval time.Duration
	// Wait bounds how long a request waits for the check it started while
	// a bundle is loaded (DefaultWait when zero); a check that takes longer
	// goes on in the background, and requests that find a check running do
	// not wait for it, so a hung store holds at most one request. Without a
	// bundle, a request waits up to half of its own deadline.
	Wait time.Duration
	// Background: Run checks, so requests never wait for a check while a
	// bundle is loaded (they still start one that is due, should Run fall
	// behind). For processes that keep running between requests.
	Background bool
	// CheckTimeout bounds a check (DefaultCheckTimeout when zero).
	CheckTimeout time.Duration
	// Fallback is served while no bundle from the location has loaded.
	Fallback *engine.Engine
	// FallbackSource names where Fallback came from, for logs and /readyz.
	FallbackSource string
	Log            zerolog.Logger
	// WarnUnmanifested logs a warning when a bundle loads without a
	// manifest: for object stores, where a half-finished upload can be read.
	WarnUnmanifested bool
	// OnLoad, when set, is called with each newly loaded engine.
	OnLoad func(*engine.Engine)
	// Now and Jitter are for tests.
	Now    func() time.Time
	Jitter func(max time.Duration) time.Duration
}

// current is what serves reviews; it is replaced whole.
type current struct {
	engine   *engine.Engine
	snap     *bundle.Snapshot // nil for the fallback
	loadedAt time.Time
	// retired serves the routes the manifest retired, each with the
	// bundle that had it.
	retired map[policy.Route]*retiredRoute
}

// retiredRoute is a route an earlier bundle served.
type retiredRoute struct {
	bundle string
	until  time.Time
	engine *engine.Engine // nil once the transition is over
}

// Reloader serves reviews with the newest good bundle. It is safe for
// concurrent use.
type Reloader struct {
	cfg      Config
	location string
	cur      atomic.Pointer[current]

	mu       sync.Mutex
	running  chan struct{} // closed when the running check ends; nil when none runs
	next     time.Time     // no check before this
	failures int           // consecutive failed checks
	total    int64         // failed checks since start
	refused  int64         // of those, manifests refused (bundle.Refused)
	lastErr  error
	// lastReason words lastErr for a review's answer and /readyz.
	lastReason string
	lastErrAt  time.Time
	lastCheck  time.Time
	// lastUnknown is when a review on a route no bundle knows last started
	// a check.
	lastUnknown time.Time
	// unknownWaiters counts the reviews on unknown routes waiting for a
	// check (at most MaxUnknownRouteWaiters).
	unknownWaiters atomic.Int32
}

// UnknownRouteRecheck is how often, at most, a review on a route that
// neither the bundle nor its retired routes know starts a check: the route
// may be a newer bundle's, whose configuration reached kube-apiserver
// before the bundle reached this function. Any caller can send any path,
// so this bounds what they make the function read.
const UnknownRouteRecheck = 5 * time.Second

// MaxUnknownRouteWaiters bounds the reviews on routes no bundle knows that
// wait for a check at once; the others are answered at once. Any caller
// can send such reviews: with a slow store, each that waits holds one of
// the function's review places, which legitimate reviews then find taken.
const MaxUnknownRouteWaiters = 4

var _ interface {
	engine.Reviewer
	BundleID() string
} = (*Reloader)(nil)

// New returns a Reloader that has loaded nothing yet (it serves the
// fallback, if any): call Load, or let the first request load.
func New(cfg Config) *Reloader {
	if cfg.Compiler == nil {
		cfg.Compiler = celeval.NewCompiler()
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = DefaultCheckTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func(max time.Duration) time.Duration {
			if max <= 0 {
				return 0
			}
			return rand.N(max)
		}
	}
	if cfg.Fetcher.Now == nil {
		f := *cfg.Fetcher
		f.Now = cfg.Now
		cfg.Fetcher = &f
	}
	// Until a check ends, what a store that has not answered yet is.
	r := &Reloader{cfg: cfg, location: cfg.Fetcher.Bucket.Location(), lastReason: bundle.Reason(nil)}
	if cfg.Fallback != nil {
		r.cur.Store(&current{engine: cfg.Fallback, loadedAt: cfg.Now()})
	}
	return r
}

// Load checks the location now and waits for the check, bounded by ctx. It
// returns the check's error; the Reloader keeps serving what it had.
func (r *Reloader) Load(ctx context.Context) error {
	r.mu.Lock()
	done := r.startLocked()
	r.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// Run checks in the background every interval until ctx ends: for
// processes that keep running between requests (the server). Requests still
// trigger checks when Run falls behind.
func (r *Reloader) Run(ctx context.Context) {
	for {
		r.mu.Lock()
		wait := r.next.Sub(r.cfg.Now())
		r.mu.Unlock()
		t := time.NewTimer(max(wait, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		r.maybeCheck(ctx)
	}
}

// Review answers with the current bundle, after a bounded wait for a check
// when one is due; on a retired route, with the bundle that had it while
// its transition lasts. A route no bundle knows starts a check, at most
// every UnknownRouteRecheck, and waits for it as long as the request can
// afford.
func (r *Reloader) Review(ctx context.Context, route policy.Route, req *review.Request) (*engine.Result, error) {
	r.maybeCheck(ctx)
	c := r.cur.Load()
	if c == nil {
		r.mu.Lock()
		reason := r.lastReason
		r.mu.Unlock()
		return nil, &engine.NoBundleError{Reason: reason}
	}
	if r.state(c, route) == engine.RouteUnknown && r.recheck(ctx) {
		c = r.cur.Load()
	}
	switch r.state(c, route) {
	case engine.RouteRetired:
		return c.retired[route].engine.Review(ctx, route, req)
	case engine.RouteEnded:
		rr := c.retired[route]
		return nil, fmt.Errorf("%w %q: bundle %s served it; its transition ended at %s", engine.ErrRetiredRoute, route.Path(), rr.bundle, rr.until.UTC().Format(time.RFC3339))
	}
	return c.engine.Review(ctx, route, req)
}

// RouteState says how route is served.
func (r *Reloader) RouteState(route policy.Route) engine.RouteState {
	return r.state(r.cur.Load(), route)
}

func (r *Reloader) state(c *current, route policy.Route) engine.RouteState {
	switch {
	case c == nil:
		return engine.RouteUnknown
	case c.engine.HasRoute(route):
		return engine.RouteServed
	}
	rr := c.retired[route]
	switch {
	case rr == nil:
		return engine.RouteUnknown
	case rr.engine == nil || !r.cfg.Now().Before(rr.until):
		return engine.RouteEnded
	}
	return engine.RouteRetired
}

// recheck waits for the running check, or starts one unless the last a
// route no bundle knows started is less than UnknownRouteRecheck ago, and
// waits for it up to Config.Wait and half of what is left of ctx; it
// reports whether it waited for one to end. Reviews that arrive on a new route while the
// check it started runs wait for that check too, MaxUnknownRouteWaiters at
// most at once.
func (r *Reloader) recheck(ctx context.Context) bool {
	if r.loaded() == nil || r.cfg.Interval < 0 {
		return false // the fallback, or nothing: maybeCheck already tries; or refresh is off
	}
	r.mu.Lock()
	done := r.running
	if done == nil {
		now := r.cfg.Now()
		if now.Sub(r.lastUnknown) < UnknownRouteRecheck {
			r.mu.Unlock()
			return false
		}
		r.lastUnknown = now
		done = r.startLocked()
	}
	r.mu.Unlock()
	if r.unknownWaiters.Add(1) > MaxUnknownRouteWaiters {
		r.unknownWaiters.Add(-1)
		return false
	}
	defer r.unknownWaiters.Add(-1)
	// Bounded as a request waits for a due check: anyone can send reviews
	// on unknown routes, and a store that hangs must not hold their places.
	wait := r.cfg.Wait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// BundleID is the ID of the bundle serving reviews, "" when none is.
func (r *Reloader) BundleID() string {
	if c := r.cur.Load(); c != nil {
		return c.engine.BundleID()
	}
	return ""
}

// HasRoute reports whether rt is a group of the bundle serving reviews, or
// a route its manifest retired.
func (r *Reloader) HasRoute(rt policy.Route) bool {
	return r.RouteState(rt) != engine.RouteUnknown
}

// Engine is the engine serving reviews, nil when none is.
func (r *Reloader) Engine() *engine.Engine {
	if c := r.cur.Load(); c != nil {
		return c.engine
	}
	return nil
}

// maybeCheck starts a check when one is due and waits for a running check
// as long as the request can afford.
func (r *Reloader) maybeCheck(ctx context.Context) {
	r.mu.Lock()
	done, started := r.running, false
	if done == nil && !r.cfg.Now().Before(r.next) && (r.cfg.Interval > 0 || r.loaded() == nil) {
		done, started = r.startLocked(), true
	}
	r.mu.Unlock()
	serving := r.cur.Load() != nil
	if done == nil || serving && (!started || r.cfg.Background) {
		return
	}
	wait := r.cfg.Wait
	if !serving {
		wait = r.cfg.CheckTimeout
		if dl, ok := ctx.Deadline(); ok {
			wait = time.Until(dl) / 2
		}
	} else if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/4)
	}
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// loaded is the current bundle if it came from the location.
func (r *Reloader) loaded() *current {
	if c := r.cur.Load(); c != nil && c.snap != nil {
		return c
	}
	return nil
}

// startLocked starts a check; r.mu is held.
func (r *Reloader) startLocked() chan struct{} {
	if r.running != nil {
		return r.running
	}
	done := make(chan struct{})
	r.running = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.CheckTimeout)
		defer cancel()
		r.check(ctx)
	}()
	return done
}

// check fetches, verifies and compiles, then swaps; any failure keeps what
// serves now.
func (r *Reloader) check(ctx context.Context) {
	start := r.cfg.Now()
	prev := r.loaded()
	token := ""
	if prev != nil {
		token = prev.snap.Token
	}
	snap, err := r.cfg.Fetcher.Fetch(ctx, token)
	if err == nil && prev != nil {
		err = bundle.Newer(prev.snap, snap)
	}
	var (
		eng     *engine.Engine
		retired map[policy.Route]*retiredRoute
	)
	reason := bundle.Reason(err)
	if err == nil {
		eng, err = r.compile(snap, prev == nil)
		reason = "the policy bundle in the store does not load"
	}
	if err == nil {
		retired = r.compileRetired(snap, prev)
	}
	if errors.Is(err, bundle.ErrNotModified) {
		err = nil
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { r.running = nil }()
	now := r.cfg.Now()
	r.lastCheck = now
	if err != nil {
		r.failLocked(err, now)
		r.lastReason = reason
		return
	}
	if r.lastErr != nil {
		r.cfg.Log.Info().Str("policies", r.location).Int("failed_checks", r.failures).Msg("policy store checks succeed again")
	}
	r.failures, r.lastErr = 0, nil
	r.next = now.Add(r.interval())
	if eng == nil {
		return
	}
	r.cur.Store(&current{engine: eng, snap: snap, loadedAt: now, retired: retired})
	e := r.cfg.Log.Info().Str("policies", r.location).Str("bundle", snap.BundleID).Int("files", len(snap.Sources)).
		Float64("load_ms", float64(now.Sub(start).Microseconds())/1000)
	if prev != nil {
		e = e.Str("previous_bundle", prev.engine.BundleID())
	}
	if snap.Manifested {
		e = e.Time("created", snap.Created)
	}
	if snap.Packed {
		e = e.Bool("packed", true)
	}
	if n := eng.Uncompiled(); n > 0 {
		e = e.Int("compile_on_use", n)
	}
	e.Msg("policy bundle loaded")
	if r.cfg.OnLoad != nil {
		r.cfg.OnLoad(eng)
	}
	if !snap.Manifested && r.cfg.WarnUnmanifested {
		r.cfg.Log.Warn().Str("policies", r.location).Msg("the location has no manifest (.admitfn/manifest.json): files were read as listed, with no snapshot guarantee; publish with `admitfn push` for consistent, verified bundles")
	}
}

// compile builds snap's engine. The first bundle loaded, when admitfn push
// compiled it with this build, compiles each policy on first use: a cold
// start answers without waiting for the policies its first reviews do not
// need. Any other is compiled whole before it serves, so that one that
// does not compile never replaces a good one.
func (r *Reloader) compile(snap *bundle.Snapshot, first bool) (*engine.Engine, error) {
	b, err := policy.Parse(snap.Sources)
	// The snapshot is kept while it serves; its parsed documents are not
	// read again.
	for i := range snap.Sources {
		snap.Sources[i].Documents = nil
	}
	if err != nil {
		return nil, err
	}
	if first && snap.CompiledBy.IsThis() {
		return engine.NewDeferred(b, r.cfg.Compiler)
	}
	return engine.New(b, r.cfg.Compiler)
}

// compileRetired builds the engines of snap's retired routes, reusing
// prev's for a bundle it had already built. Each compiles a policy when a
// review first needs it: most transitions see few reviews, or none. A
// retired bundle that does not load leaves its routes unserved, logged,
// and never keeps the new bundle from serving.
func (r *Reloader) compileRetired(snap *bundle.Snapshot, prev *current) map[policy.Route]*retiredRoute {
	if len(snap.Retired) == 0 {
		return nil
	}
	built := map[string]*engine.Engine{}
	if prev != nil {
		for _, rr := range prev.retired {
			if rr.engine != nil {
				built[rr.bundle] = rr.engine
			}
		}
		built[prev.engine.BundleID()] = prev.engine
	}
	out := map[policy.Route]*retiredRoute{}
	for _, rs := range snap.Retired {
		if rs.Err != nil {
			r.cfg.Log.Error().Str("policies", r.location).Str("retired_bundle", rs.Bundle).Err(rs.Err).Msg("the bundle of retired routes cannot be read: they are not served")
			continue
		}
		var eng *engine.Engine
		if rs.Sources != nil {
			eng = built[rs.Bundle]
			if eng == nil {
				var err error
				eng, err = r.compileSources(rs.Sources)
				if err != nil {
					r.cfg.Log.Error().Str("policies", r.location).Str("retired_bundle", rs.Bundle).Err(err).Msg("the bundle of retired routes does not load: they are not served")
					eng = nil
				}
				built[rs.Bundle] = eng
			}
		}
		for _, rt := range rs.Routes {
			if eng != nil && !eng.HasRoute(rt) {
				r.cfg.Log.Error().Str("policies", r.location).Str("retired_bundle", rs.Bundle).Str("route", rt.Path()).Msg("the bundle of a retired route does not have it: it is not served")
				continue
			}
			out[rt] = &retiredRoute{bundle: rs.Bundle, until: rs.Until, engine: eng}
		}
	}
	return out
}

func (r *Reloader) compileSources(sources []policy.Source) (*engine.Engine, error) {
	b, err := policy.Parse(sources)
	if err != nil {
		return nil, err
	}
	return engine.NewDeferred(b, r.cfg.Compiler)
}

// failLocked records a failed check, logs it when it differs from the last
// one, and schedules the next: after the interval while a bundle from the
// location serves, with exponential backoff from a second while none does.
func (r *Reloader) failLocked(err error, now time.Time) {
	r.failures++
	r.total++
	what := "check failed"
	if bundle.Refused(err) {
		// Whoever can write to the bucket can cause this; it is logged
		// like any failure, but said plainly and counted apart.
		r.refused++
		what = "refused"
	}
	if r.lastErr == nil || r.lastErr.Error() != err.Error() {
		e := r.cfg.Log.Error().Str("policies", r.location).Err(err).Int("failed_checks", r.failures)
		msg := "policy bundle " + what + "; no bundle serves yet"
		if c := r.cur.Load(); c != nil {
			e = e.Str("serving_bundle", c.engine.BundleID())
			msg = "policy bundle " + what + "; serving the last good bundle"
		}
		e.Msg(msg)
	}
	r.lastErr, r.lastErrAt = err, now
	if r.loaded() != nil {
		r.next = now.Add(r.interval())
		return
	}
	backoff := firstRetry << min(r.failures-1, 16)
	limit := r.cfg.Interval
	if limit <= 0 {
		limit = DefaultInterval
	}
	r.next = now.Add(min(backoff, limit))
}

func (r *Reloader) interval() time.Duration {
	if r.cfg.Interval <= 0 {
		return 100 * 365 * 24 * time.Hour
	}
	return r.cfg.Interval + r.cfg.Jitter(r.cfg.Interval/5)
}

// Status is the state /readyz reports.
type Status struct {
	Location string
	// Ready: a bundle serves reviews (possibly the fallback).
	Ready    bool
	Fallback bool
	BundleID string
	// Created is the manifest's time (zero without one); Age counts from
	// it, or from the load when there is no manifest.
	Created   time.Time
	Age       time.Duration
	LastCheck time.Time
	LastError error
	// Reason words LastError for a caller: which check refused the
	// bundle, that it does not load, or that the store could not be read.
	Reason   string
	Failures int
	// Expires is when the serving manifest expires (zero: never).
	Expires time.Time
	// LoadErrors counts every failed check since start; Refused, those
	// that refused a manifest (bundle.Refused).
	LoadErrors int64
	Refused    int64
}

// Status reports what serves and how the last checks went.
func (r *Reloader) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	s := Status{Location: r.location, LastCheck: r.lastCheck, LastError: r.lastErr, Reason: r.lastReason, Failures: r.failures, LoadErrors: r.total, Refused: r.refused}
	if c := r.cur.Load(); c != nil {
		s.Ready, s.BundleID = true, c.engine.BundleID()
		s.Fallback = c.snap == nil
		since := c.loadedAt
		if c.snap != nil && c.snap.Manifested {
			s.Created, s.Expires = c.snap.Created, c.snap.Expires
			since = c.snap.Created
		}
		s.Age = now.Sub(since).Truncate(time.Second)
	}
	return s
}

// Ready reports readiness and a line of text for /readyz.
func (r *Reloader) Ready() (bool, string) {
	s := r.Status()
	var b strings.Builder
	switch {
	case !s.Ready:
		fmt.Fprintf(&b, "not ready: no policy bundle loaded from %s: %s", s.Location, s.Reason)
	case s.Fallback:
		fmt.Fprintf(&b, "ok: serving fallback bundle %s from %s; %s not loaded", s.BundleID, r.cfg.FallbackSource, s.Location)
	default:
		fmt.Fprintf(&b, "ok: bundle %s from %s, age %s", s.BundleID, s.Location, s.Age)
	}
	if !s.Expires.IsZero() && !r.cfg.Now().Before(s.Expires) {
		// It keeps serving: refusing it would leave no bundle at all.
		fmt.Fprintf(&b, "\nthe bundle's manifest expired at %s: publish or re-sign it (admitfn push --resign)", s.Expires.UTC().Format(time.RFC3339))
	}
	if s.LastError != nil {
		fmt.Fprintf(&b, "\nlast check failed (%d in a row, at %s): %v", s.Failures, s.LastCheck.UTC().Format(time.RFC3339), s.LastError)
	}
	if c := r.cur.Load(); c != nil {
		b.WriteString(routesDetail(c, r.cfg.Now()))
	}
	for _, f := range celeval.Fallbacks() {
		fmt.Fprintf(&b, "\nCEL fast path %s not in use (%s): evaluation is cel-go's own, the same decisions, slower; %d programs so far", f.Path, f.Reason, f.Programs)
	}
	return s.Ready, b.String()
}

// routesDetail names the routes c serves, and those it retired: what an
// operator compares with the cluster's webhook configuration.
func routesDetail(c *current, now time.Time) string {
	var b strings.Builder
	var served []string
	for _, g := range c.engine.Groups() {
		served = append(served, g.Path())
	}
	fmt.Fprintf(&b, "\nroutes: %s", strings.Join(served, " "))
	type key struct {
		bundle string
		until  time.Time
	}
	byBundle := map[key][]string{}
	var keys []key
	for rt, rr := range c.retired {
		k := key{rr.bundle, rr.until}
		if byBundle[k] == nil {
			keys = append(keys, k)
		}
		byBundle[k] = append(byBundle[k], rt.Path())
	}
	slices.SortFunc(keys, func(a, b key) int { return a.until.Compare(b.until) })
	for _, k := range keys {
		routes := byBundle[k]
		slices.Sort(routes)
		state := "served with bundle " + k.bundle + " until"
		if !now.Before(k.until) {
			state = "transition ended at"
		}
		fmt.Fprintf(&b, "\nretired routes, %s %s: %s", state, k.until.UTC().Format(time.RFC3339), strings.Join(routes, " "))
	}
	return b.String()
}
