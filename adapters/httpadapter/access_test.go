package httpadapter

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/adapters/metrics"
	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
)

const (
	token1 = "tok1-AAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	token2 = "tok2_BBBBBBBBBBBBBBBBBBBBBBBBBBBB"
)

func TestPathTokens(t *testing.T) {
	var logs bytes.Buffer
	h := New(readyEngine{fakeEngine: fakeEngine{review: allowAll}, ready: true, detail: "ok: bundle b1 from s3://b/p, age 3s"}, zerolog.New(&logs).Level(zerolog.DebugLevel), WithPathTokens(token1, token2))
	review := secretReview("admission.k8s.io/v1")
	rejected := int64(0)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string // the whole body, or a Status message
	}{
		{"POST", "/" + token1 + "/validate", 200, ""},
		{"POST", "/" + token2 + "/validate/abc", 200, ""},
		{"POST", "/" + token1 + "/mutate?timeout=10s", 200, ""},
		{"POST", "/validate", 404, "not found"},
		{"POST", "/" + token1 + "x/validate", 404, "not found"},
		{"POST", "/" + token1[:len(token1)-1] + "/validate", 404, "not found"},
		{"POST", "/" + strings.ToUpper(token1) + "/validate", 404, "not found"},
		{"POST", "//" + token1 + "/validate", 404, "not found"},
		{"GET", "/", 404, "not found"},
		{"GET", "/.env", 404, "not found"},
		{"POST", "/" + token1 + "/nope", 404, `no route "/nope": reviews are served on /validate[/<group>] and /mutate[/<group>]`},
		{"GET", "/healthz", 200, "ok\n"},
		{"GET", "/" + token1 + "/healthz", 200, "ok\n"},
		{"GET", "/readyz", 200, "ok\n"},
		{"GET", "/" + token2 + "/readyz", 200, "ok: bundle b1 from s3://b/p, age 3s\n"},
	} {
		rec := serve(t, h, exchange{method: tc.method, path: tc.path, contentType: "application/json", body: review})
		if rec.Code != tc.code {
			t.Errorf("%s %s: %d, want %d: %s", tc.method, tc.path, rec.Code, tc.code, rec.Body)
			continue
		}
		switch {
		case tc.code == 404:
			if _, _, msg := statusBody(t, rec); msg != tc.body {
				t.Errorf("%s %s: message %q, want %q", tc.method, tc.path, msg, tc.body)
			}
			if tc.body == "not found" {
				rejected++
			}
		case tc.body != "" && rec.Body.String() != tc.body:
			t.Errorf("%s %s: body %q, want %q", tc.method, tc.path, rec.Body, tc.body)
		}
	}
	if h.Rejected() != rejected {
		t.Errorf("%d rejections counted, want %d", h.Rejected(), rejected)
	}
	if strings.Contains(logs.String(), "tok1") || strings.Contains(logs.String(), "tok2") || strings.Contains(logs.String(), strings.ToUpper(token1)) {
		t.Errorf("a token reached the logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"route":"/validate/abc"`) {
		t.Errorf("review lines should name the route without the token:\n%s", logs.String())
	}

	// Platforms probe without the token and learn only ready or not.
	h = New(readyEngine{fakeEngine: fakeEngine{review: allowAll}, ready: false, detail: "not ready: no policy bundle loaded from s3://b/p"}, zerolog.Nop(), WithPathTokens(token1))
	if rec := serve(t, h, exchange{method: "GET", path: "/readyz"}); rec.Code != 503 || rec.Body.String() != "not ready\n" {
		t.Errorf("readyz without the token: %d %q", rec.Code, rec.Body)
	}
	if rec := serve(t, h, exchange{method: "GET", path: "/" + token1 + "/readyz"}); rec.Code != 503 || rec.Body.String() != "not ready: no policy bundle loaded from s3://b/p\n" {
		t.Errorf("readyz with the token: %d %q", rec.Code, rec.Body)
	}
}

func TestParseTokens(t *testing.T) {
	got, err := ParseTokens(" " + token1 + " ,," + token2)
	if err != nil || len(got) != 2 || got[0] != token1 || got[1] != token2 {
		t.Fatalf("%q %v", got, err)
	}
	if got, err := ParseTokens(""); err != nil || got != nil {
		t.Fatalf("empty: %q %v", got, err)
	}
	for _, bad := range []string{"short", token1 + ",tooShort", strings.Repeat("a", 30) + "/", strings.Repeat("é", 30), strings.Repeat("a", 30) + "=", strings.Repeat("a", 30) + " b"} {
		if _, err := ParseTokens(bad); err == nil || !strings.Contains(err.Error(), "want at least 22 characters of A-Z, a-z, 0-9, - and _") || strings.Contains(err.Error(), bad) {
			t.Errorf("ParseTokens(%q): %v", bad, err)
		}
	}
}

func TestCredentials(t *testing.T) {
	bearer, err := NewBearerTokens([]string{"s3cr3t-token", "next-token"})
	if err != nil {
		t.Fatal(err)
	}
	basic, err := NewBasicUsers(map[string]string{"kube-apiserver": "pa:ss"})
	if err != nil {
		t.Fatal(err)
	}
	review := secretReview("admission.k8s.io/v1")
	for _, tc := range []struct {
		name   string
		auth   Authenticator
		header string
		code   int
	}{
		{"bearer", bearer, "Bearer s3cr3t-token", 200},
		{"second bearer", bearer, "Bearer next-token", 200},
		{"bearer, lower case scheme", bearer, "bearer s3cr3t-token", 200},
		{"wrong bearer", bearer, "Bearer s3cr3t-tokeN", 401},
		{"empty bearer", bearer, "Bearer ", 401},
		{"no header", bearer, "", 401},
		{"basic for bearer", bearer, "Basic a3ViZS1hcGlzZXJ2ZXI6cGE6c3M=", 401},
		{"basic", basic, "Basic a3ViZS1hcGlzZXJ2ZXI6cGE6c3M=", 200},
		{"wrong password", basic, "Basic a3ViZS1hcGlzZXJ2ZXI6cGE=", 401},
		{"garbage basic", basic, "Basic !!!", 401},
		{"either, bearer", AnyOf{bearer, basic}, "Bearer next-token", 200},
		{"either, basic", AnyOf{bearer, basic}, "Basic a3ViZS1hcGlzZXJ2ZXI6cGE6c3M=", 200},
		{"either, neither", AnyOf{bearer, basic}, "Digest x", 401},
	} {
		h := New(fakeEngine{review: allowAll}, zerolog.Nop(), WithAuthenticator(tc.auth))
		req := httptest.NewRequest("POST", "/validate", strings.NewReader(review))
		req.Header.Set("Content-Type", "application/json")
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("%s: %d, want %d: %s", tc.name, rec.Code, tc.code, rec.Body)
			continue
		}
		if tc.code == 401 {
			if code, reason, msg := statusBody(t, rec); code != 401 || reason != "Unauthorized" || msg != "authentication required" {
				t.Errorf("%s: %d %s %q", tc.name, code, reason, msg)
			}
			if rec.Header().Get("WWW-Authenticate") != tc.auth.Challenge() || h.Rejected() != 1 {
				t.Errorf("%s: challenge %q, %d rejected", tc.name, rec.Header().Get("WWW-Authenticate"), h.Rejected())
			}
		}
		// Probes need no credentials.
		if rec := serve(t, h, exchange{method: "GET", path: "/healthz"}); rec.Code != 200 {
			t.Errorf("%s: healthz %d", tc.name, rec.Code)
		}
	}
	if AnyOf([]Authenticator{bearer, basic}).Challenge() != `Bearer realm="admitfn", Basic realm="admitfn"` {
		t.Error("AnyOf challenge")
	}
	if _, err := NewBearerTokens([]string{""}); err == nil {
		t.Error("empty bearer token accepted")
	}
	if _, err := NewBasicUsers(map[string]string{"a:b": "c"}); err == nil {
		t.Error("user name with ':' accepted")
	}
}

// recorder keeps what the handler records.
type recorder struct {
	reviews  []metrics.Review
	rejected int
}

func (r *recorder) Review(_ context.Context, rv metrics.Review) {
	rv.Latency = 0
	r.reviews = append(r.reviews, rv)
}
func (r *recorder) Rejected(context.Context) { r.rejected++ }

func TestMetrics(t *testing.T) {
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	h := New(eng, zerolog.Nop(), WithPathTokens(token1), WithMetrics(rec), WithMetricsHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics\n") })))
	good, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		t.Fatal(err)
	}
	base := "/" + token1
	serve(t, h, exchange{method: "POST", path: base + "/validate", contentType: "application/json", body: string(good)})
	serve(t, h, exchange{method: "POST", path: base + "/validate", contentType: "application/json", body: "{"})
	serve(t, h, exchange{method: "POST", path: base + "/validate/zzz", contentType: "application/json", body: string(good)})
	serve(t, h, exchange{method: "POST", path: "/validate", contentType: "application/json", body: string(good)})
	id := eng.BundleID()
	want := []metrics.Review{
		{Route: "/validate", Decision: metrics.Denied, Status: 200, Bundle: id, FailedPolicies: []string{"min-replicas.example.com", "image-matches-environment.policy.example.com"}},
		{Route: "/validate", Decision: metrics.Error, Status: 400, Bundle: id},
		{Route: metrics.UnknownRoute, Decision: metrics.Error, Status: 404, Bundle: id, RouteState: "unknown"},
	}
	if !reflect.DeepEqual(rec.reviews, want) || rec.rejected != 1 {
		t.Errorf("recorded %+v, %d rejected\nwant %+v, 1", rec.reviews, rec.rejected, want)
	}
	if r := serve(t, h, exchange{method: "GET", path: base + "/metrics"}); r.Code != 200 || r.Body.String() != "metrics\n" {
		t.Errorf("metrics with the token: %d %q", r.Code, r.Body)
	}
	if r := serve(t, h, exchange{method: "GET", path: "/metrics"}); r.Code != 404 {
		t.Errorf("metrics without the token: %d", r.Code)
	}
}

// A caller can send any path. Answers refused before review (400, 413, 415)
// used to label metrics with it: 3,000 requests with 30 KB paths grew the
// server by 170 MB and /metrics to 1.6 GB, and on Lambda each value is a
// billed custom metric. Only the bundle's routes are label values, and the
// path is not logged either.
func TestCallerMadePathsAreNoLabels(t *testing.T) {
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	var logs bytes.Buffer
	h := New(eng, zerolog.New(&logs), WithMetrics(rec))
	good, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		t.Fatal(err)
	}
	long := "/validate/" + strings.Repeat("x", 30<<10)
	for _, x := range []exchange{
		{method: "POST", path: long, contentType: "application/json", body: "{"},
		{method: "POST", path: long, contentType: "application/json", body: strings.Repeat(" ", MaxBodyBytes+1)},
		{method: "POST", path: long, contentType: "text/plain", body: string(good)},
		{method: "POST", path: long + "?timeout=x", contentType: "application/json", body: string(good)},
		{method: "POST", path: long, contentType: "application/json", body: string(good)},
		{method: "POST", path: "/validate?timeout=x", contentType: "application/json", body: string(good)},
	} {
		serve(t, h, x)
	}
	id := eng.BundleID()
	want := []metrics.Review{
		{Route: metrics.UnknownRoute, Decision: metrics.Error, Status: 400, Bundle: id, RouteState: "unknown"},
		{Route: metrics.UnknownRoute, Decision: metrics.Error, Status: 413, Bundle: id, RouteState: "unknown"},
		{Route: metrics.UnknownRoute, Decision: metrics.Error, Status: 415, Bundle: id, RouteState: "unknown"},
		{Route: metrics.UnknownRoute, Decision: metrics.Error, Status: 400, Bundle: id, RouteState: "unknown"},
		{Route: metrics.UnknownRoute, Decision: metrics.Error, Status: 404, Bundle: id, RouteState: "unknown"},
		{Route: "/validate", Decision: metrics.Error, Status: 400, Bundle: id},
	}
	if !reflect.DeepEqual(rec.reviews, want) {
		t.Errorf("recorded %+v\nwant %+v", rec.reviews, want)
	}
	if strings.Contains(logs.String(), strings.Repeat("x", 200)) {
		t.Errorf("the caller's path was logged (%d bytes of logs)", logs.Len())
	}
	if n := strings.Count(logs.String(), `"route":"unknown"`); n != 5 {
		t.Errorf("%d log lines name the unknown route, want 5:\n%.2000s", n, logs.String())
	}
}

// With credentials configured, /metrics and the detailed /readyz need them
// too: they name the bundle, its location and the last error. Probes
// without credentials learn ready or not.
func TestMetricsAndReadinessNeedCredentials(t *testing.T) {
	auth, err := NewBearerTokens([]string{"s3cret-s3cret-s3cret-s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	h := New(readyEngine{fakeEngine: fakeEngine{review: allowAll}, ready: true, detail: "ok: bundle fake-bundle from s3://policies/prod"}, zerolog.Nop(), WithAuthenticator(auth), WithMetrics(rec),
		WithMetricsHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics\n") })))
	get := func(path, bearer string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for _, tc := range []struct {
		path, bearer string
		code         int
		body         string
	}{
		{"/metrics", "", 401, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"authentication required","reason":"Unauthorized","code":401}`},
		{"/metrics", "wrong-wrong-wrong-wrong-wrong", 401, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"authentication required","reason":"Unauthorized","code":401}`},
		{"/metrics", "s3cret-s3cret-s3cret-s3cret", 200, "metrics\n"},
		{"/readyz", "", 200, "ok\n"},
		{"/readyz", "wrong-wrong-wrong-wrong-wrong", 200, "ok\n"},
		{"/readyz", "s3cret-s3cret-s3cret-s3cret", 200, "ok: bundle fake-bundle from s3://policies/prod\n"},
	} {
		w := get(tc.path, tc.bearer)
		if w.Code != tc.code || w.Body.String() != tc.body {
			t.Errorf("GET %s (bearer %q): %d %q, want %d %q", tc.path, tc.bearer, w.Code, w.Body, tc.code, tc.body)
		}
		if refused := w.Header().Get("Connection") == "close"; refused != (tc.code == 401) {
			t.Errorf("GET %s (bearer %q): Connection %q", tc.path, tc.bearer, w.Header().Get("Connection"))
		}
	}
	if rec.rejected != 2 {
		t.Errorf("%d rejected, want 2", rec.rejected)
	}
}
