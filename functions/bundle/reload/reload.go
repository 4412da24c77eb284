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
}

// Reloader serves reviews with the newest good bundle. It is safe for
// concurrent use.
type Reloader struct {
	cfg      Config
	location string
	cur      atomic.Pointer[current]

	mu        sync.Mutex
	running   chan struct{} // closed when the running check ends; nil when none runs
	next      time.Time     // no check before this
	failures  int           // consecutive failed checks
	total     int64         // failed checks since start
	refused   int64         // of those, manifests refused (bundle.Refused)
	lastErr   error
	lastErrAt time.Time
	lastCheck time.Time
}

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
	r := &Reloader{cfg: cfg, location: cfg.Fetcher.Bucket.Location()}
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
// when one is due.
func (r *Reloader) Review(ctx context.Context, route policy.Route, req *review.Request) (*engine.Result, error) {
	r.maybeCheck(ctx)
	c := r.cur.Load()
	if c == nil {
		return nil, engine.ErrNoBundle
	}
	return c.engine.Review(ctx, route, req)
}

// BundleID is the ID of the bundle serving reviews, "" when none is.
func (r *Reloader) BundleID() string {
	if c := r.cur.Load(); c != nil {
		return c.engine.BundleID()
	}
	return ""
}

// HasRoute reports whether rt is a group of the bundle serving reviews.
func (r *Reloader) HasRoute(rt policy.Route) bool {
	c := r.cur.Load()
	return c != nil && c.engine.HasRoute(rt)
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
	var eng *engine.Engine
	if err == nil {
		eng, err = r.compile(snap, prev == nil)
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
	r.cur.Store(&current{engine: eng, snap: snap, loadedAt: now})
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
	Failures  int
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
	s := Status{Location: r.location, LastCheck: r.lastCheck, LastError: r.lastErr, Failures: r.failures, LoadErrors: r.total, Refused: r.refused}
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
		fmt.Fprintf(&b, "not ready: no policy bundle loaded from %s", s.Location)
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
	return s.Ready, b.String()
}
