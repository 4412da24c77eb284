package reload_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/reload"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/gcsstore"
	"github.com/admitfn/admitfn/functions/bundle/store/s3store"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
	"github.com/admitfn/admitfn/test/doccheck"
	"github.com/admitfn/admitfn/test/syncbuf"
)

// sources is a two-file bundle whose policy denies ConfigMap creation with
// the message "bundle <tag>", so each review shows which bundle served it.
func sources(tag string) []policy.Source {
	return []policy.Source{
		{Name: "policy.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: tag}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "false"
    message: "bundle ` + tag + `"
`)},
		{Name: "bindings/binding.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: tag}
spec: {policyName: tag, validationActions: [Deny]}
`)},
	}
}

// broken compiles to nothing: its expression is not CEL.
func broken() []policy.Source {
	b := sources("broken")
	b[0].Data = bytes.Replace(b[0].Data, []byte(`expression: "false"`), []byte(`expression: "1 +"`), 1)
	return b
}

var request = func() *review.Request {
	req, err := review.Decode([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
		"uid":"u1","kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},
		"namespace":"default","name":"cm","operation":"CREATE","userInfo":{"username":"alice"},
		"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"default"}}}}`))
	if err != nil {
		panic(err)
	}
	return req
}()

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const (
	interval = 30 * time.Second
	// jitter is the most Config.Jitter adds; the tests' Jitter always adds
	// that much, the worst case.
	jitter = interval / 5
)

// backend is one object store under test: a real server, a bucket to
// publish to directly, and the reloader's view of it through a
// fault-injecting proxy.
type backend struct {
	name   string
	server interface {
		Stop()
		Start()
	}
	direct  store.Bucket
	proxied store.Bucket
	// at is a direct bucket at another prefix of the same bucket.
	at        func(prefix string) store.Bucket
	proxy     *storetest.Proxy
	delete    func(key string)
	versioned bool
}

type backendFunc func(t *testing.T) *backend

var backends = []struct {
	name  string
	start backendFunc
}{
	{"s3", func(t *testing.T) *backend {
		s := storetest.StartS3(t)
		s.CreateBucket(t, "policies", true)
		p := storetest.NewProxy(t, s.Endpoint, false)
		loc := store.Location{Scheme: "s3", Bucket: "policies", Prefix: "prod"}
		return &backend{name: "s3", server: s, proxy: p, versioned: true,
			direct:  s3store.New(s.Client(s.Endpoint), loc),
			proxied: s3store.New(s.Client(p.URL), loc),
			at: func(prefix string) store.Bucket {
				return s3store.New(s.Client(s.Endpoint), store.Location{Scheme: "s3", Bucket: "policies", Prefix: prefix})
			},
			delete: func(key string) { s.Delete(t, "policies", loc.Key(key)) },
		}
	}},
	{"gcs", func(t *testing.T) *backend {
		g := storetest.StartGCS(t)
		g.CreateBucket(t, "policies", false)
		p := storetest.NewProxy(t, "http://"+g.Host, true)
		loc := store.Location{Scheme: "gs", Bucket: "policies", Prefix: "prod"}
		return &backend{name: "gcs", server: g, proxy: p,
			direct:  gcsstore.New(g.Client(t, g.Host), loc),
			proxied: gcsstore.New(g.Client(t, p.Host), loc),
			at: func(prefix string) store.Bucket {
				return gcsstore.New(g.Client(t, g.Host), store.Location{Scheme: "gs", Bucket: "policies", Prefix: prefix})
			},
			delete: func(key string) { g.Delete(t, "policies", loc.Key(key)) },
		}
	}},
}

// fixture is a Reloader over a backend, with a fake clock and its logs.
type fixture struct {
	t     *testing.T
	b     *backend
	clock *clock
	logs  *syncbuf.Buffer
	r     *reload.Reloader
	keys  []ed25519.PublicKey
}

func newFixture(t *testing.T, b *backend, tweak func(*reload.Config)) *fixture {
	f := &fixture{t: t, b: b, clock: &clock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}, logs: &syncbuf.Buffer{}}
	cfg := reload.Config{
		Fetcher:  &bundle.Fetcher{Bucket: b.proxied},
		Interval: interval,
		// Requests wait for the checks they trigger, so the tests see each
		// check's outcome on the request that triggered it.
		Wait:         time.Minute,
		CheckTimeout: 3 * time.Second,
		Log:          zerolog.New(f.logs),
		Now:          f.clock.Now,
		Jitter:       func(max time.Duration) time.Duration { return max },
	}
	if tweak != nil {
		tweak(&cfg)
	}
	f.r = reload.New(cfg)
	return f
}

// publish lands sources signed by key (nil: unsigned) whatever is in
// place, as a writer of the bucket can: push's own refusals (unsigned
// over signed, another key) are what other tests check.
func (f *fixture) publish(sources []policy.Source, key ed25519.PrivateKey) {
	f.t.Helper()
	opts := bundle.PublishOptions{SignKey: key, Now: f.clock.Now(), AllowUnsigned: true}
	if key != nil {
		opts.TrustedKeys = []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	}
	if _, err := bundle.Publish(context.Background(), f.b.direct, sources, opts); err != nil {
		f.t.Fatal(err)
	}
}

// publishKeeping publishes as a pusher without the permission to delete
// does: the objects of the bundle it replaces stay, as a writer of the
// bucket could also put them back.
func (f *fixture) publishKeeping(sources []policy.Source, key ed25519.PrivateKey) {
	f.t.Helper()
	keep := struct{ store.Bucket }{f.b.direct} // no Remove
	if _, err := bundle.Publish(context.Background(), keep, sources, bundle.PublishOptions{SignKey: key, Now: f.clock.Now(), Warn: func(string) {}}); err != nil {
		f.t.Fatal(err)
	}
}

// served reviews the request and asserts that bundle tag answered it.
func (f *fixture) served(tag string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := f.r.Review(ctx, policy.Route{Type: policy.Validating}, request)
	if err != nil {
		f.t.Fatalf("review failed: %v\nlogs:\n%s", err, f.logs)
	}
	want := "ValidatingAdmissionPolicy 'tag' with binding 'tag' denied request: bundle " + tag
	if res.Response.Allowed || res.Response.Result.Message != want {
		f.t.Fatalf("review answered %v %q, want the denial of bundle %s\nlogs:\n%s", res.Response.Allowed, res.Response.Result.Message, tag, f.logs)
	}
}

// servedAcrossChecks asserts that bundle tag serves every review over n
// check intervals.
func (f *fixture) servedAcrossChecks(tag string, n int) {
	f.t.Helper()
	for range n {
		f.clock.Advance(interval + jitter)
		f.served(tag)
		f.served(tag)
	}
}

func (f *fixture) load() {
	f.t.Helper()
	if err := f.r.Load(context.Background()); err != nil {
		f.t.Fatalf("load: %v", err)
	}
}

// failures counts the log lines of failed checks, refusals included.
func (f *fixture) failures() int {
	return strings.Count(f.logs.String(), `"message":"policy bundle check failed`) + f.refusals()
}

// refusals counts the log lines of refused manifests.
func (f *fixture) refusals() int {
	return strings.Count(f.logs.String(), `"message":"policy bundle refused`)
}

func (f *fixture) lastError() error { return f.r.Status().LastError }

func eachBackend(t *testing.T, test func(t *testing.T, b *backend)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) { test(t, be.start(t)) })
	}
}

func TestNewBundleServedWithinIntervalPlusJitter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		f := newFixture(t, b, nil)
		f.publish(sources("A"), nil)
		f.load()
		f.served("A")
		f.publish(sources("B"), nil)
		f.clock.Advance(interval + jitter - time.Millisecond)
		f.served("A") // not yet due: no request to the store
		before := b.proxy.Requests()
		f.served("A")
		if b.proxy.Requests() != before {
			t.Errorf("a review before the interval reached the store")
		}
		f.clock.Advance(time.Millisecond)
		f.served("B")
		if s := f.r.Status(); s.BundleID != policy.ID(sources("B")) || s.LastError != nil || s.Fallback {
			t.Errorf("status %+v", s)
		}
		// An unchanged bundle is a conditional request and no reload.
		f.servedAcrossChecks("B", 2)
		if n := strings.Count(f.logs.String(), `"message":"policy bundle loaded"`); n != 2 {
			t.Errorf("%d loads logged, want 2:\n%s", n, f.logs)
		}
	})
}

func TestStoreStoppedAndRestarted(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		f := newFixture(t, b, nil)
		f.publish(sources("A"), nil)
		f.load()
		b.server.Stop()
		f.servedAcrossChecks("A", 3)
		if f.lastError() == nil || f.failures() != 1 {
			t.Errorf("last error %v, %d failures logged (want 1):\n%s", f.lastError(), f.failures(), f.logs)
		}
		ready, detail := f.r.Ready()
		if !ready || !strings.HasPrefix(detail, "ok: bundle "+policy.ID(sources("A"))+" from "+b.direct.Location()) || !strings.Contains(detail, "\nlast check failed (3 in a row") {
			t.Errorf("readyz %v %q", ready, detail)
		}
		b.server.Start()
		f.publish(sources("B"), nil)
		f.clock.Advance(interval + jitter)
		f.served("B")
		if f.lastError() != nil || !strings.Contains(f.logs.String(), `"message":"policy store checks succeed again"`) {
			t.Errorf("after restart: last error %v\n%s", f.lastError(), f.logs)
		}
	})
}

func TestStoreErrorsAndSlowAnswers(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		f := newFixture(t, b, func(c *reload.Config) { c.Wait = 200 * time.Millisecond; c.CheckTimeout = 3 * time.Second })
		f.publish(sources("A"), nil)
		f.load()
		f.publish(sources("B"), nil)

		b.proxy.Set(storetest.Fail500)
		for range 3 {
			f.clock.Advance(interval + jitter)
			f.served("A")
			waitIdle(t, f.r)
		}
		if f.failures() != 1 || f.r.Status().Failures != 3 {
			t.Errorf("500s: %d failures logged (want 1), %d counted (want 3):\n%s", f.failures(), f.r.Status().Failures, f.logs)
		}

		// Slow answers: each review waits no more than Wait for the check,
		// then answers with the bundle it has, while the check goes on until
		// its own timeout (counted as one more failure when it ends).
		b.proxy.Delay = 5 * time.Second
		b.proxy.Set(storetest.Slow)
		for range 2 {
			f.clock.Advance(interval + jitter)
			failures := f.r.Status().Failures
			f.served("A")
			if got := f.r.Status().Failures; got != failures {
				t.Errorf("the review waited for the slow store: the check had ended (%d failures, %d before)", got, failures)
			}
			waitIdle(t, f.r)
			if got := f.r.Status().Failures; got != failures+1 {
				t.Errorf("slow check: %d failures, want %d", got, failures+1)
			}
		}
		if f.failures() != 2 {
			t.Errorf("slow store: %d failures logged, want 2 (the 500s, then the timeouts):\n%s", f.failures(), f.logs)
		}

		b.proxy.Set(storetest.Pass)
		f.clock.Advance(interval + jitter)
		f.served("B")
	})
}

// waitIdle lets a check that outlived its request finish.
func waitIdle(t *testing.T, r *reload.Reloader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net
	defer cancel()
	if err := r.Idle(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDigestMismatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		f := newFixture(t, b, nil)
		f.publish(sources("A"), nil)
		f.load()
		// Bundle B's manifest says something else of one of its objects.
		f.publish(sources("B"), nil)
		ctx := context.Background()
		raw, _, err := b.direct.Get(ctx, bundle.ManifestKey, "")
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(sources("B")[0].Data)
		tampered := bytes.Replace(raw, []byte(hex.EncodeToString(sum[:])), []byte(strings.Repeat("0", 64)), 1)
		if bytes.Equal(tampered, raw) {
			t.Fatal("no digest to tamper with")
		}
		b.direct.Put(ctx, bundle.ManifestKey, tampered, "application/json")
		f.servedAcrossChecks("A", 2)
		if !errors.Is(f.lastError(), bundle.ErrIntegrity) || f.lastError().Error() != "policy.yaml: bundle object does not match its manifest: sha256 "+hex.EncodeToString(sum[:])+", manifest says "+strings.Repeat("0", 64) || f.failures() != 1 {
			t.Fatalf("last error %v, %d failures logged", f.lastError(), f.failures())
		}
	})
}

func TestSignatures(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		_, good, _ := ed25519.GenerateKey(rand.Reader)
		_, bad, _ := ed25519.GenerateKey(rand.Reader)
		f := newFixture(t, b, func(c *reload.Config) { c.Fetcher.Keys = []ed25519.PublicKey{good.Public().(ed25519.PublicKey)} })
		f.publish(sources("A"), good)
		f.load()
		f.publish(sources("B"), bad)
		f.servedAcrossChecks("A", 2)
		if !errors.Is(f.lastError(), bundle.ErrBadSignature) {
			t.Fatalf("signed by another key: %v", f.lastError())
		}
		f.publish(sources("B"), nil)
		f.servedAcrossChecks("A", 2)
		if !errors.Is(f.lastError(), bundle.ErrUnsigned) || f.failures() != 2 {
			t.Fatalf("unsigned: %v, %d failures logged", f.lastError(), f.failures())
		}
		f.publish(sources("B"), good)
		f.clock.Advance(interval + jitter)
		f.served("B")
	})
}

func TestObjectsUploadedWithoutManifest(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		f := newFixture(t, b, nil)
		f.publish(sources("A"), nil)
		f.load()
		for _, s := range sources("B") {
			b.direct.Put(context.Background(), s.Name, s.Data, "application/yaml")
		}
		f.servedAcrossChecks("A", 3)
		if f.lastError() != nil {
			t.Fatalf("the manifest did not change, yet: %v", f.lastError())
		}
		// A cold start now reads the manifest's versions where the store
		// keeps them, and refuses the mix where it does not.
		cold := newFixture(t, b, nil)
		err := cold.r.Load(context.Background())
		if b.versioned {
			if err != nil {
				t.Fatalf("cold start on a versioned store: %v", err)
			}
			cold.served("A")
		} else if !errors.Is(err, bundle.ErrIntegrity) && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("cold start on an unversioned store: %v, want a refusal", err)
		}
	})
}

func TestObjectDeleted(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		f := newFixture(t, b, nil)
		f.publish(sources("A"), nil)
		f.load()
		f.publish(sources("B"), nil)
		b.delete("bindings/binding.yaml")
		if b.versioned {
			// The manifest's version survives the delete marker.
			f.servedAcrossChecks("B", 2)
			if f.lastError() != nil {
				t.Fatalf("versioned: %v", f.lastError())
			}
			return
		}
		f.servedAcrossChecks("A", 2)
		if !errors.Is(f.lastError(), store.ErrNotFound) {
			t.Fatalf("last error %v, want ErrNotFound", f.lastError())
		}
	})
}

func TestCompileError(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		f := newFixture(t, b, nil)
		f.publish(sources("A"), nil)
		f.load()
		f.publish(broken(), nil)
		f.servedAcrossChecks("A", 3)
		var errs policy.Errors
		if !errors.As(f.lastError(), &errs) || !strings.HasPrefix(errs.Error(), "1 error in policy bundle:\n  policy.yaml: policy tag: spec.validations[0].expression: compilation failed") || f.failures() != 1 {
			t.Fatalf("last error %v, %d failures logged", f.lastError(), f.failures())
		}
		f.publish(sources("B"), nil)
		f.clock.Advance(interval + jitter)
		f.served("B")
	})
}

func TestColdStartWithStoreDown(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		// The GCS client retries a 500 until its deadline.
		f := newFixture(t, b, func(c *reload.Config) { c.CheckTimeout = time.Second })
		f.publish(sources("A"), nil)
		b.proxy.Set(storetest.Fail500)
		if err := f.r.Load(context.Background()); err == nil {
			t.Fatal("load from a failing store succeeded")
		}
		if ready, detail := f.r.Ready(); ready || !strings.HasPrefix(detail, "not ready: no policy bundle loaded from "+b.direct.Location()+": the policy store could not be read\nlast check failed (1 in a row") {
			t.Errorf("readyz %v %q", ready, detail)
		}
		// Reviews fail (the webhook's failurePolicy decides); retries back
		// off: 1s, 2s, 4s…
		for i, wait := range []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second} {
			f.clock.Advance(wait)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := f.r.Review(ctx, policy.Route{Type: policy.Validating}, request)
			cancel()
			var nb *engine.NoBundleError
			if !errors.Is(err, engine.ErrNoBundle) || !errors.As(err, &nb) || nb.Reason != "the policy store could not be read" {
				t.Fatalf("review %d without a bundle: %v, want ErrNoBundle", i, err)
			}
			waitIdle(t, f.r)
			if got, want := f.r.Status().Failures, i+1; got != want {
				t.Errorf("after %s: %d failed checks, want %d", wait, got, want)
			}
		}
		b.proxy.Set(storetest.Pass)
		f.clock.Advance(8 * time.Second)
		f.served("A")
	})
}

// Finding: after an unsigned push over a signed location, every function
// that started answered "the policy store could not be read", which was
// read fine. A cold start facing a bundle it refuses says which check
// refused it, in the review's answer, /readyz and the log; with a fallback
// bundle, that serves.
func TestColdStartSaysWhyItRefusedTheBundle(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		keys := func(c *reload.Config) { c.Fetcher.Keys = []ed25519.PublicKey{key.Public().(ed25519.PublicKey)} }
		f := newFixture(t, b, keys)
		f.publish(sources("A"), nil)
		if err := f.r.Load(context.Background()); !errors.Is(err, bundle.ErrUnsigned) {
			t.Fatalf("load: %v, want ErrUnsigned", err)
		}
		const reason = "the policy bundle in the store was refused: it is not signed, and the function requires a signature"
		_, err := f.r.Review(context.Background(), policy.Route{Type: policy.Validating}, request)
		var nb *engine.NoBundleError
		if !errors.As(err, &nb) || nb.Reason != reason {
			t.Fatalf("review: %v, want the reason %q", err, reason)
		}
		if ready, detail := f.r.Ready(); ready || !strings.HasPrefix(detail, "not ready: no policy bundle loaded from "+b.direct.Location()+": "+reason+"\nlast check failed (") {
			t.Errorf("readyz %v %q", ready, detail)
		}
		if !strings.Contains(f.logs.String(), `"error":".admitfn/manifest.json: bundle is not signed","failed_checks":1,"message":"policy bundle refused; no bundle serves yet"`) {
			t.Errorf("log:\n%s", f.logs)
		}

		eng := fallbackEngine(t)
		withFallback := newFixture(t, b, func(c *reload.Config) { keys(c); c.Fallback, c.FallbackSource = eng, "/var/task/policies" })
		withFallback.r.Load(context.Background())
		withFallback.served("fallback")

		// A bundle read fine that does not compile is no store failure.
		f.publish(broken(), key)
		f.clock.Advance(time.Minute)
		if err := f.r.Load(context.Background()); err == nil {
			t.Fatal("a bundle that does not compile loaded")
		}
		_, err = f.r.Review(context.Background(), policy.Route{Type: policy.Validating}, request)
		if !errors.As(err, &nb) || nb.Reason != "the policy bundle in the store does not load" {
			t.Fatalf("review: %v", err)
		}
	})
}

// fallbackEngine serves the bundle tagged "fallback".
func fallbackEngine(t *testing.T) *engine.Engine {
	t.Helper()
	fb, err := policy.Parse(sources("fallback"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(fb, celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

func TestFallbackServesUntilTheStoreLoads(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		eng := fallbackEngine(t)
		f := newFixture(t, b, func(c *reload.Config) { c.Fallback, c.FallbackSource = eng, "/var/task/policies" })
		f.publish(sources("A"), nil)
		b.server.Stop()
		if err := f.r.Load(context.Background()); err == nil {
			t.Fatal("load from a stopped store succeeded")
		}
		f.served("fallback")
		if ready, detail := f.r.Ready(); !ready || !strings.HasPrefix(detail, "ok: serving fallback bundle "+eng.BundleID()+" from /var/task/policies; "+b.direct.Location()+" not loaded\nlast check failed") {
			t.Errorf("readyz %v %q", ready, detail)
		}
		f.clock.Advance(time.Second)
		f.served("fallback")
		b.server.Start()
		f.clock.Advance(2 * time.Second)
		f.served("A")
		if s := f.r.Status(); s.Fallback || s.BundleID != policy.ID(sources("A")) {
			t.Errorf("status %+v", s)
		}
	})
}

// renamed moves a bundle's files under dir, so that two bundles live side
// by side in one prefix and an old manifest's objects stay readable on
// every store, versioned or not: the worst case for a rollback.
func renamed(sources []policy.Source, dir string) []policy.Source {
	out := make([]policy.Source, len(sources))
	for i, s := range sources {
		out[i] = policy.Source{Name: dir + "/" + s.Name, Data: s.Data}
	}
	return out
}

func (f *fixture) manifest() []byte {
	f.t.Helper()
	raw, _, err := f.b.direct.Get(context.Background(), bundle.ManifestKey, "")
	if err != nil {
		f.t.Fatal(err)
	}
	return raw
}

func (f *fixture) putManifest(raw []byte) {
	f.t.Helper()
	if _, err := f.b.direct.Put(context.Background(), bundle.ManifestKey, raw, "application/json"); err != nil {
		f.t.Fatal(err)
	}
}

// Whoever can write to the bucket but holds no signing key puts back an
// older, validly signed manifest whose objects are still there: the
// function keeps the newer bundle, says so at error level, and counts it.
func TestRollbackRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		f := newFixture(t, b, func(c *reload.Config) { c.Fetcher.Keys = []ed25519.PublicKey{key.Public().(ed25519.PublicKey)} })
		f.publishKeeping(renamed(sources("A"), "a"), key)
		f.load()
		f.served("A")
		old := f.manifest()

		f.clock.Advance(time.Minute)
		f.publishKeeping(renamed(sources("B"), "b"), key)
		f.clock.Advance(interval + jitter)
		f.served("B")

		f.putManifest(old)
		f.servedAcrossChecks("B", 3)
		err := f.lastError()
		if !errors.Is(err, bundle.ErrRollback) || !strings.HasPrefix(err.Error(), "bundle manifest is not newer than the one serving: serial ") {
			t.Fatalf("rolled back manifest: %v\nlogs:\n%s", err, f.logs)
		}
		if f.refusals() != 1 || f.r.Status().Refused != 3 {
			t.Fatalf("%d refusals logged (want 1), %d counted (want 3):\n%s", f.refusals(), f.r.Status().Refused, f.logs)
		}
		// A new bundle loads after the refusal.
		f.publish(renamed(sources("C"), "c"), key)
		f.clock.Advance(interval + jitter)
		f.served("C")
		if f.lastError() != nil {
			t.Fatal(f.lastError())
		}
	})
}

// A manifest signed for another prefix of the bucket (staging, say, with
// its looser policies) copied over production's is refused.
func TestManifestOfAnotherLocationRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		f := newFixture(t, b, func(c *reload.Config) { c.Fetcher.Keys = []ed25519.PublicKey{key.Public().(ed25519.PublicKey)} })
		f.publish(sources("A"), key)
		f.load()

		staging := b.at("staging")
		if _, err := bundle.Publish(context.Background(), staging, sources("S"), bundle.PublishOptions{SignKey: key, Now: f.clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		raw, _, err := staging.Get(context.Background(), bundle.ManifestKey, "")
		if err != nil {
			t.Fatal(err)
		}
		f.putManifest(raw)
		f.servedAcrossChecks("A", 2)
		want := ".admitfn/manifest.json: bundle manifest was published for another location: published for " + staging.Location() + ", read from " + b.proxied.Location()
		if err := f.lastError(); !errors.Is(err, bundle.ErrWrongLocation) || err.Error() != want {
			t.Fatalf("replayed manifest: %v\nwant %s", err, want)
		}
	})
}

// An expired manifest is refused; a re-signed one loads; the one serving
// keeps serving past its own expiry (there would be nothing else), and
// /readyz says so.
func TestExpiredManifestRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		f := newFixture(t, b, func(c *reload.Config) { c.Fetcher.Keys = []ed25519.PublicKey{key.Public().(ed25519.PublicKey)} })
		opts := func(expiry time.Duration) bundle.PublishOptions {
			return bundle.PublishOptions{SignKey: key, Now: f.clock.Now(), Expiry: expiry}
		}
		if _, err := bundle.Publish(context.Background(), b.direct, sources("A"), opts(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		f.load()
		if _, err := bundle.Publish(context.Background(), b.direct, sources("B"), opts(time.Hour)); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Hour)
		f.served("A")
		if err := f.lastError(); !errors.Is(err, bundle.ErrExpired) {
			t.Fatalf("expired manifest: %v", err)
		}
		if _, err := bundle.Resign(context.Background(), b.direct, policy.ID(sources("B")), opts(time.Hour)); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(interval + jitter)
		f.served("B")
		f.clock.Advance(time.Hour)
		f.served("B")
		ready, detail := f.r.Ready()
		if !ready || !strings.Contains(detail, "\nthe bundle's manifest expired at ") {
			t.Fatalf("readyz after the serving manifest expired: %v %q", ready, detail)
		}
	})
}

// running reports whether a check is under way.
func running(r *reload.Reloader) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return r.Idle(ctx) != nil
}

// While a store hangs, only the request that started the check waits for
// it; others answer at once with the bundle they have (throughput fell six
// times when every review waited). With Background, none waits.
func TestHungStoreHoldsOneRequestAtMost(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		for _, background := range []bool{false, true} {
			f := newFixture(t, b, func(c *reload.Config) { c.Background = background })
			b.proxy.Set(storetest.Pass)
			f.publish(sources("A"), nil)
			f.load()
			b.proxy.Delay = 5 * time.Second
			b.proxy.Set(storetest.Slow)
			f.clock.Advance(interval + jitter)

			starter := make(chan struct{})
			go func() {
				defer close(starter)
				f.served("A")
			}()
			if background {
				<-starter
				if !running(f.r) {
					t.Fatal("background: the request that started the check waited for it")
				}
			}
			for !running(f.r) {
				time.Sleep(time.Millisecond)
			}
			for range 5 {
				f.served("A")
				if !running(f.r) {
					t.Fatalf("background %v: a review waited for the hung check", background)
				}
			}
			<-starter
			waitIdle(t, f.r)
			if got := f.r.Status().Failures; got != 1 {
				t.Errorf("background %v: %d failed checks, want the one that hung", background, got)
			}
		}
	})
}

// docs/bundles.md's /readyz after three failed checks is what Ready says,
// but for the bundle's ID and location and the digests.
func TestBundlesDocReadyz(t *testing.T) {
	block := doccheck.Find(t, "docs/bundles.md", 1)[0]
	command, want, _ := strings.Cut(block.Text, "\n")
	if command != "$ curl http://127.0.0.1:8080/readyz" {
		t.Fatalf("%s: %q is not a request of /readyz", block, command)
	}
	f := newFixture(t, backends[0].start(t), nil) // s3
	f.publish(sources("A"), nil)
	f.load()
	f.publish(sources("B"), nil)
	sum := sha256.Sum256(sources("B")[0].Data)
	f.putManifest(bytes.Replace(f.manifest(), []byte(hex.EncodeToString(sum[:])), []byte(strings.Repeat("0", 64)), 1))
	for range 3 { // checks at 10:00:50, 10:01:40 and 10:02:30
		f.clock.Advance(50 * time.Second)
		f.served("A")
	}
	f.clock.Advance(11 * time.Second)
	ready, got := f.r.Ready()
	mask := func(s string) string {
		s = regexp.MustCompile(`bundle [0-9a-f]{16} from s3://[^,]+`).ReplaceAllString(s, "bundle ID from LOCATION")
		s, _, _ = strings.Cut(s, "sha256 ")
		return s
	}
	if !ready || mask(got) != mask(want) {
		t.Errorf("ready %v:\n%s\ndocs/bundles.md shows:\n%s", ready, got, want)
	}
}

// The first bundle, compiled by admitfn push with this build (its manifest
// says so; here packed, as push publishes it), compiles each policy on
// first use: one that does not compile
// then fails by its failurePolicy, as kube-apiserver's stored policies do.
// A later bundle is compiled whole before it serves, so a compile error
// never replaces a good bundle; a manifest from another build is compiled
// whole from the start.
func TestFirstBundleCompiledOnUse(t *testing.T) {
	dir := &backend{name: "dir"}
	dir.direct = store.NewDir(t.TempDir())
	dir.proxied = dir.direct
	this := bundle.ThisToolchain()
	publish := func(f *fixture, sources []policy.Source, by bundle.Toolchain) {
		t.Helper()
		if _, err := bundle.Publish(context.Background(), dir.direct, sources, bundle.PublishOptions{Now: f.clock.Now(), CompiledBy: &by, Pack: true}); err != nil {
			t.Fatal(err)
		}
	}
	var loaded []*engine.Engine
	f := newFixture(t, dir, func(c *reload.Config) { c.OnLoad = func(e *engine.Engine) { loaded = append(loaded, e) } })
	publish(f, broken(), this)
	f.load()
	if len(loaded) != 1 || loaded[0].Uncompiled() != 1 || !strings.Contains(f.logs.String(), `"packed":true,"compile_on_use":1`) {
		t.Fatalf("first load: %d engines, logs:\n%s", len(loaded), f.logs)
	}
	res, err := f.r.Review(t.Context(), policy.Route{Type: policy.Validating}, request)
	if err != nil || res.Response.Allowed || !strings.HasPrefix(res.Response.Result.Message, "ValidatingAdmissionPolicy 'tag' with binding 'tag' denied request: compilation error: compilation failed: ERROR: <input>:1:4: Syntax error") {
		t.Fatalf("review by a policy that does not compile: %+v %v", res, err)
	}
	if n := loaded[0].Uncompiled(); n != 0 {
		t.Errorf("Uncompiled after the review: %d", n)
	}

	// A refresh compiles whole: the good bundle replaces the broken one,
	// and a broken one never replaces a good one.
	f.clock.Advance(time.Second)
	publish(f, sources("A"), this)
	f.clock.Advance(interval + jitter)
	f.served("A")
	publish(f, broken(), this)
	f.servedAcrossChecks("A", 2)
	if len(loaded) != 2 || loaded[1].Uncompiled() != 0 || !strings.Contains(f.lastError().Error(), "compilation failed") {
		t.Errorf("refreshes: %d engines loaded, last error %v", len(loaded), f.lastError())
	}

	// Another build's manifest: compiled whole at the first load too.
	other := this
	other.CEL = "v0.0.1"
	f = newFixture(t, dir, nil)
	f.clock.Advance(time.Hour)
	publish(f, broken(), other)
	if err := f.r.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "compilation failed") {
		t.Errorf("first load of another build's broken bundle: %v", err)
	}
}

// Reviews on routes no bundle knows can come from anyone: with the store
// hung, the check one of them starts holds it only for Config.Wait, and
// the others within UnknownRouteRecheck start none.
func TestUnknownRoutesDoNotWaitOnAHungStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		f := newFixture(t, b, func(c *reload.Config) { c.Wait = 50 * time.Millisecond })
		b.proxy.Set(storetest.Pass)
		f.publish(sources("A"), nil)
		f.load()
		b.proxy.Delay = 5 * time.Second
		b.proxy.Set(storetest.Slow)
		before := b.proxy.Requests()
		stranger := policy.Route{Type: policy.Validating, Group: "0123456789"}
		for i := range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := f.r.Review(ctx, stranger, request)
			cancel()
			if !errors.Is(err, engine.ErrUnknownRoute) {
				t.Fatalf("review %d on an unknown route: %v", i, err)
			}
			if !running(f.r) {
				t.Fatalf("review %d waited for the hung check to end", i)
			}
		}
		if n := b.proxy.Requests() - before; n != 1 {
			t.Errorf("%d store requests for three unknown routes, want the one check's", n)
		}
		f.served("A") // the bundle it has still answers
		waitIdle(t, f.r)
		b.proxy.Set(storetest.Pass)
	})
}

// Finding: with a slow store, reviews on random unknown routes held review
// places (58 % of legitimate reviews answered 429, against 6 % with a fast
// store). At most MaxUnknownRouteWaiters of them wait for the check; the
// rest are answered at once, while it still runs.
func TestFewUnknownRouteReviewsWaitForASlowStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		f := newFixture(t, b, func(c *reload.Config) { c.CheckTimeout = time.Minute })
		b.proxy.Set(storetest.Pass)
		f.publish(sources("A"), nil)
		f.load()
		b.proxy.Delay = 3 * time.Second
		b.proxy.Set(storetest.Slow)
		const n = 3 * reload.MaxUnknownRouteWaiters
		answered := make(chan error, n)
		for i := range n {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, err := f.r.Review(ctx, policy.Route{Type: policy.Validating, Group: fmt.Sprintf("%010x", i)}, request)
				answered <- err
			}()
		}
		// Those past the cap are answered while the check still runs.
		for i := range n - reload.MaxUnknownRouteWaiters {
			if err := <-answered; !errors.Is(err, engine.ErrUnknownRoute) {
				t.Fatalf("review %d on an unknown route: %v", i, err)
			}
		}
		if !running(f.r) {
			t.Fatal("the check ended before the reviews past the cap were answered")
		}
		select {
		case err := <-answered:
			t.Fatalf("more than %d reviews waited for the check, or the check ended: %v", reload.MaxUnknownRouteWaiters, err)
		case <-time.After(200 * time.Millisecond):
		}
		f.served("A") // a known route is answered meanwhile
		b.proxy.Set(storetest.Pass)
		for range reload.MaxUnknownRouteWaiters {
			if err := <-answered; !errors.Is(err, engine.ErrUnknownRoute) {
				t.Fatalf("a waiting review: %v", err)
			}
		}
		waitIdle(t, f.r)
	})
}
