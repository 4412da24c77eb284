package httpadapter

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
)

// FuzzServeHTTP: any path, content type and body through the handler (with
// a path token, over the example bundle) gets an expected status, a Status
// body for every error, and a decision only with 200.
func FuzzServeHTTP(f *testing.F) {
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		f.Fatal(err)
	}
	h := New(eng, zerolog.Nop(), WithPathTokens(hostileToken))
	good, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("/"+hostileToken+"/validate?timeout=10s", "application/json", good)
	f.Add("/"+hostileToken+"/mutate/f678019434", "application/json; charset=utf-8", good)
	f.Add("/validate", "application/json", good)
	f.Add("/"+hostileToken+"/readyz", "", []byte(nil))
	f.Add("/"+hostileToken+"/validate?timeout=1ns", "application/json", []byte(`{"kind":"AdmissionReview"}`))
	allowed := map[int]bool{200: true, 400: true, 404: true, 405: true, 413: true, 415: true, 500: true, 504: true}
	f.Fuzz(func(t *testing.T, path, contentType string, body []byte) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n#") {
			return // not a request target a client can send
		}
		req, err := http.NewRequest("POST", "http://admitfn"+path, strings.NewReader(string(body)))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", contentType)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var out struct {
			Kind     string
			Response *struct{ Allowed bool }
		}
		if req.URL.Path == "/healthz" || strings.HasSuffix(req.URL.Path, "/readyz") && rec.Code == 200 {
			return
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("body is no JSON: %s", rec.Body)
		}
		if rec.Code != 200 && (out.Kind != "Status" || out.Response != nil) {
			t.Fatalf("error %d without a Status body: %s", rec.Code, rec.Body)
		}
		if rec.Code == 200 && (out.Kind != "AdmissionReview" || out.Response == nil) {
			t.Fatalf("200 without a review: %s", rec.Body)
		}
	})
}
