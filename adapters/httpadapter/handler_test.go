package httpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

var update = flag.Bool("update", false, "rewrite the golden responses in testdata/")

// fakeEngine lets transport tests control what a review does.
type fakeEngine struct {
	review func(ctx context.Context, route policy.Route, req *review.Request) (*engine.Result, error)
}

func (f fakeEngine) BundleID() string { return "fake-bundle" }

// HasRoute: the fake's bundle has every group.
func (f fakeEngine) HasRoute(policy.Route) bool { return true }
func (f fakeEngine) Review(ctx context.Context, route policy.Route, req *review.Request) (*engine.Result, error) {
	return f.review(ctx, route, req)
}

func allowAll(_ context.Context, _ policy.Route, req *review.Request) (*engine.Result, error) {
	return &engine.Result{Response: &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}}, nil
}

const secretValue = "c2VjcmV0LXBhc3N3b3Jk"

func secretReview(apiVersion string) string {
	return `{"apiVersion":"` + apiVersion + `","kind":"AdmissionReview","request":{"uid":"uid-1","kind":{"group":"","version":"v1","kind":"Secret"},"resource":{"group":"","version":"v1","resource":"secrets"},"operation":"CREATE","namespace":"default","name":"db","userInfo":{"username":"alice"},"object":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"data":{"password":"` + secretValue + `"}}}}`
}

type exchange struct {
	method, path, contentType, body string
}

func serve(t *testing.T, h http.Handler, x exchange) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(x.method, x.path, strings.NewReader(x.body))
	if x.contentType != "" {
		req.Header.Set("Content-Type", x.contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// statusBody decodes a metav1.Status error body.
func statusBody(t *testing.T, rec *httptest.ResponseRecorder) (code int, reason, message string) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var s struct {
		Kind, APIVersion, Status, Reason, Message string
		Code                                      int
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if s.Kind != "Status" || s.APIVersion != "v1" || s.Status != "Failure" || s.Code != rec.Code {
		t.Errorf("status body %+v for HTTP %d", s, rec.Code)
	}
	return s.Code, s.Reason, s.Message
}

func TestTransportErrors(t *testing.T) {
	var logs bytes.Buffer
	h := New(fakeEngine{review: func(ctx context.Context, route policy.Route, req *review.Request) (*engine.Result, error) {
		switch route.Group {
		case "missing":
			return nil, fmt.Errorf("%w %q", engine.ErrUnknownRoute, route.Group)
		case "slow":
			<-ctx.Done()
			return nil, ctx.Err()
		case "panics":
			panic("evaluator bug: " + secretValue)
		case "broken":
			return nil, fmt.Errorf("%w: dispatcher exploded", engine.ErrInternal)
		}
		return allowAll(ctx, route, req)
	}}, zerolog.New(&logs))

	for _, tc := range []struct {
		name        string
		x           exchange
		wantCode    int
		wantReason  string
		wantMessage string
	}{
		{"GET on a review route", exchange{method: "GET", path: "/validate"}, 405, "MethodNotAllowed", "method GET not allowed: send the AdmissionReview with POST"},
		{"unknown path", exchange{method: "POST", path: "/mutate-everything", contentType: "application/json", body: secretReview(review.V1)}, 404, "NotFound", `no route "/mutate-everything": reviews are served on /validate[/<group>] and /mutate[/<group>]`},
		{"nested group path", exchange{method: "POST", path: "/validate/a/b", contentType: "application/json"}, 404, "NotFound", `no route "/validate/a/b": reviews are served on /validate[/<group>] and /mutate[/<group>]`},
		{"wrong content type", exchange{method: "POST", path: "/validate", contentType: "text/plain", body: secretReview(review.V1)}, 415, "UnsupportedMediaType", `content type "text/plain" not supported: send application/json`},
		{"missing content type", exchange{method: "POST", path: "/validate", body: secretReview(review.V1)}, 415, "UnsupportedMediaType", `content type "" not supported: send application/json`},
		{"empty body", exchange{method: "POST", path: "/validate", contentType: "application/json"}, 400, "BadRequest", "malformed AdmissionReview: empty body"},
		{"invalid JSON", exchange{method: "POST", path: "/validate", contentType: "application/json", body: `{"apiVersion":`}, 400, "BadRequest", "malformed AdmissionReview: invalid JSON: syntax error at offset 14"},
		{"deeply nested JSON", exchange{method: "POST", path: "/validate", contentType: "application/json", body: strings.Repeat("[", 100000)}, 400, "BadRequest", "malformed AdmissionReview: invalid JSON: syntax error at offset 10001"},
		{"body over the cap", exchange{method: "POST", path: "/validate", contentType: "application/json", body: `{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`}, 413, "RequestEntityTooLarge", "request body larger than 7340032 bytes"},
		{"invalid timeout", exchange{method: "POST", path: "/validate?timeout=soon", contentType: "application/json", body: secretReview(review.V1)}, 400, "BadRequest", `invalid timeout "soon": want a positive duration such as 10s`},
		{"route unknown to the bundle", exchange{method: "POST", path: "/validate/missing", contentType: "application/json", body: secretReview(review.V1)}, 404, "NotFound", `no policy group "/validate/missing" in the current bundle: re-render the webhook configurations`},
		{"deadline passes", exchange{method: "POST", path: "/validate/slow?timeout=100ms", contentType: "application/json", body: secretReview(review.V1)}, 504, "Timeout", "review of request uid-1 did not finish before the deadline"},
		{"panic in evaluation", exchange{method: "POST", path: "/validate/panics", contentType: "application/json", body: secretReview(review.V1)}, 500, "InternalError", "internal error reviewing request uid-1"},
		{"internal error", exchange{method: "POST", path: "/validate/broken", contentType: "application/json", body: secretReview(review.V1)}, 500, "InternalError", "internal error reviewing request uid-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(t, h, tc.x)
			if rec.Code != tc.wantCode {
				t.Fatalf("HTTP %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			_, reason, message := statusBody(t, rec)
			if reason != tc.wantReason || message != tc.wantMessage {
				t.Errorf("status %s %q, want %s %q", reason, message, tc.wantReason, tc.wantMessage)
			}
		})
	}
	if strings.Contains(logs.String(), secretValue) {
		t.Errorf("logs contain object contents:\n%s", logs.String())
	}
	if rec := serve(t, h, exchange{method: "GET", path: "/validate"}); rec.Header().Get("Allow") != "POST" {
		t.Errorf("405 without Allow: POST")
	}
}

func TestPanicLogIsStructuredAndKeepsServing(t *testing.T) {
	var logs bytes.Buffer
	calls := 0
	h := New(fakeEngine{review: func(ctx context.Context, route policy.Route, req *review.Request) (*engine.Result, error) {
		calls++
		if calls == 1 {
			panic("boom")
		}
		if calls == 2 {
			var m map[string]int
			m["x"]++ // a runtime error: its text is logged
		}
		return allowAll(ctx, route, req)
	}}, zerolog.New(&logs))
	if rec := serve(t, h, exchange{method: "POST", path: "/validate", contentType: "application/json", body: secretReview(review.V1)}); rec.Code != 500 {
		t.Fatalf("first: HTTP %d", rec.Code)
	}
	if rec := serve(t, h, exchange{method: "POST", path: "/validate", contentType: "application/json", body: secretReview(review.V1)}); rec.Code != 500 {
		t.Fatalf("second: HTTP %d", rec.Code)
	}
	if rec := serve(t, h, exchange{method: "POST", path: "/validate", contentType: "application/json", body: secretReview(review.V1)}); rec.Code != 200 {
		t.Fatalf("after panics: HTTP %d", rec.Code)
	}
	lines := bytes.Split(logs.Bytes(), []byte("\n"))
	for i, want := range []string{"panic value of type string", "assignment to entry in nil map"} {
		var line map[string]any
		if err := json.Unmarshal(lines[i], &line); err != nil {
			t.Fatal(err)
		}
		if line["level"] != "error" || line["message"] != "review panicked" || line["panic"] != want || line["uid"] != "uid-1" || line["status"] != float64(500) {
			t.Errorf("panic log line = %v", line)
		}
	}
}

func TestTimeoutBecomesADeadlineWithMargin(t *testing.T) {
	// The handler reads the clock once between before and after: the
	// deadline it sets lies between before and after plus the time it keeps.
	var got time.Time
	h := New(fakeEngine{review: func(ctx context.Context, route policy.Route, req *review.Request) (*engine.Result, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("no deadline")
		}
		got = d
		return allowAll(ctx, route, req)
	}}, zerolog.Nop())
	for _, tc := range []struct {
		timeout string
		keep    time.Duration
		why     string
	}{
		{"10s", 9 * time.Second, "10s less a tenth"},
		{"5m", 27 * time.Second, "the 30s maximum less a tenth"},
		{"1s", 750 * time.Millisecond, "timeoutSeconds: 1, the least a webhook may have, less the 250ms margin"},
		{"100ms", 50 * time.Millisecond, "at most half is margin"},
	} {
		before := time.Now()
		rec := serve(t, h, exchange{method: "POST", path: "/validate?timeout=" + tc.timeout, contentType: "application/json; charset=utf-8", body: secretReview(review.V1)})
		after := time.Now()
		if rec.Code != 200 {
			t.Fatalf("timeout %s: HTTP %d: %s", tc.timeout, rec.Code, rec.Body)
		}
		if got.Before(before.Add(tc.keep)) || got.After(after.Add(tc.keep)) {
			t.Errorf("timeout %s: deadline %v after the request, want %v (%s)", tc.timeout, got.Sub(before), tc.keep, tc.why)
		}
	}
}

func TestProbes(t *testing.T) {
	h := New(fakeEngine{review: allowAll}, zerolog.Nop())
	for path, body := range map[string]string{"/healthz": "ok\n", "/readyz": "ok: bundle fake-bundle\n"} {
		rec := serve(t, h, exchange{method: "GET", path: path})
		if rec.Code != 200 || rec.Body.String() != body {
			t.Errorf("GET %s = %d %q", path, rec.Code, rec.Body)
		}
		if rec := serve(t, h, exchange{method: "POST", path: path}); rec.Code != 405 {
			t.Errorf("POST %s = %d", path, rec.Code)
		}
	}
}

// readyEngine is an engine that reports its readiness, as a reloaded bundle
// does.
type readyEngine struct {
	fakeEngine
	ready  bool
	detail string
}

func (r readyEngine) Ready() (bool, string) { return r.ready, r.detail }

func TestReadinessOfAReloadedBundle(t *testing.T) {
	for _, tc := range []struct {
		ready  bool
		detail string
		code   int
	}{
		{true, "ok: bundle b1 from s3://b/p, age 3s", 200},
		{false, "not ready: no policy bundle loaded from s3://b/p\nlast check failed (2 in a row, at 2026-11-22T10:00:00Z): HTTP 500", 503},
	} {
		h := New(readyEngine{fakeEngine: fakeEngine{review: allowAll}, ready: tc.ready, detail: tc.detail}, zerolog.Nop())
		rec := serve(t, h, exchange{method: "GET", path: "/readyz"})
		if rec.Code != tc.code || rec.Body.String() != tc.detail+"\n" || rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("GET /readyz = %d %q", rec.Code, rec.Body)
		}
		if rec := serve(t, h, exchange{method: "GET", path: "/healthz"}); rec.Code != 200 {
			t.Errorf("GET /healthz = %d: liveness does not depend on the bundle", rec.Code)
		}
	}
}

// Without a bundle nothing can be decided: the answer is a failed call, so
// the webhook's failurePolicy decides, never an allowed review.
func TestNoBundleIsServiceUnavailable(t *testing.T) {
	var logs bytes.Buffer
	h := New(fakeEngine{review: func(context.Context, policy.Route, *review.Request) (*engine.Result, error) {
		return nil, engine.ErrNoBundle
	}}, zerolog.New(&logs))
	rec := serve(t, h, exchange{method: "POST", path: "/validate", contentType: "application/json", body: secretReview("admission.k8s.io/v1")})
	code, reason, message := statusBody(t, rec)
	if code != 503 || reason != "ServiceUnavailable" || message != "no policy bundle is loaded yet, so request uid-1 cannot be reviewed: the policy store could not be read (see the function's logs and /readyz)" {
		t.Errorf("answer %d %s %q", code, reason, message)
	}
	if !strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), `"message":"no policy bundle loaded"`) || strings.Contains(logs.String(), secretValue) {
		t.Errorf("log: %s", logs.String())
	}
}

// The reason a bundle was refused reaches the caller, as the log has it.
func TestNoBundleSaysWhy(t *testing.T) {
	var logs bytes.Buffer
	h := New(fakeEngine{review: func(context.Context, policy.Route, *review.Request) (*engine.Result, error) {
		return nil, &engine.NoBundleError{Reason: "the policy bundle in the store was refused: it is not signed, and the function requires a signature"}
	}}, zerolog.New(&logs))
	rec := serve(t, h, exchange{method: "POST", path: "/validate", contentType: "application/json", body: secretReview("admission.k8s.io/v1")})
	code, reason, message := statusBody(t, rec)
	if code != 503 || reason != "ServiceUnavailable" || message != "no policy bundle is loaded yet, so request uid-1 cannot be reviewed: the policy bundle in the store was refused: it is not signed, and the function requires a signature (see the function's logs and /readyz)" {
		t.Errorf("answer %d %s %q", code, reason, message)
	}
	if !strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), `"message":"no policy bundle loaded"`) || strings.Contains(logs.String(), secretValue) {
		t.Errorf("log: %s", logs.String())
	}
}

// The example bundle through the handler, compared with golden responses,
// compiled whole (engine.New) and on use (engine.NewDeferred): a fresh
// deferred engine compiles each policy on the first review that needs it.
func TestGoldenReviews(t *testing.T) {
	_, bundle, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	for name, build := range map[string]func(*policy.Set, *celeval.Compiler) (*engine.Engine, error){"New": engine.New, "NewDeferred": engine.NewDeferred} {
		eng, err := build(bundle, celeval.NewCompiler())
		if err != nil {
			t.Fatal(err)
		}
		before := eng.Uncompiled()
		t.Run(name, func(t *testing.T) { goldenReviews(t, eng) })
		after := eng.Uncompiled()
		if all := len(bundle.Policies) + len(bundle.MutatingPolicies); name == "New" && (before != 0 || after != 0) ||
			name == "NewDeferred" && (before != all || after >= before) {
			t.Errorf("%s: %d policies uncompiled before the reviews, %d after, of %d", name, before, after, all)
		}
	}
}

func goldenReviews(t *testing.T, eng *engine.Engine) {
	routeOf := func(binding string) string {
		for _, g := range eng.Groups() {
			for _, pb := range g.Bindings {
				if pb.Name == binding {
					return g.Path()
				}
			}
			for _, pb := range g.MutatingBindings {
				if pb.Name == binding {
					return g.Path()
				}
			}
		}
		t.Fatalf("no route for %s", binding)
		return ""
	}
	var logs bytes.Buffer
	h := New(eng, zerolog.New(&logs))
	// testdata/reviews.json names each review and a binding it is for: the
	// route is the group serving that binding. The soak test reads it too.
	var cases []struct{ Name, Binding string }
	raw, err := os.ReadFile("testdata/reviews.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("testdata/reviews.json: %v", err)
	}
	for _, tc := range cases {
		tc := struct{ name, binding string }{tc.Name, tc.Binding}
		t.Run(tc.name, func(t *testing.T) {
			reqBody, err := os.ReadFile(filepath.Join("testdata", tc.name+".request.json"))
			if err != nil {
				t.Fatal(err)
			}
			rec := serve(t, h, exchange{method: "POST", path: routeOf(tc.binding) + "?timeout=10s", contentType: "application/json", body: string(reqBody)})
			if rec.Code != 200 {
				t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
			}
			goldenPath := filepath.Join("testdata", tc.name+".response.json")
			if *update {
				var pretty bytes.Buffer
				json.Indent(&pretty, rec.Body.Bytes(), "", "  ")
				pretty.WriteString("\n")
				if err := os.WriteFile(goldenPath, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(golden, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("response differs from %s\n got: %s\nwant: %s", goldenPath, rec.Body, golden)
			}
		})
	}
	// One structured line per review, without messages or objects.
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		for _, k := range []string{"uid", "kind", "namespace", "name", "operation", "route", "decision", "latency_ms", "bundle", "status"} {
			if _, ok := m[k]; !ok {
				t.Errorf("log line lacks %q: %s", k, line)
			}
		}
		if strings.Contains(line, "replicas") || strings.Contains(line, "denied request") {
			t.Errorf("log line carries a message or object content: %s", line)
		}
	}
}

func TestStatusReasons(t *testing.T) {
	for code, reason := range map[int]string{
		400: "BadRequest", 404: "NotFound", 405: "MethodNotAllowed", 413: "RequestEntityTooLarge",
		415: "UnsupportedMediaType", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
	} {
		s := status(code, "m")
		if string(s.Reason) != reason || s.Code != int32(code) || s.Kind != "Status" || s.APIVersion != "v1" || s.Status != "Failure" || s.Message != "m" {
			t.Errorf("status(%d) = %+v", code, s)
		}
	}
}
