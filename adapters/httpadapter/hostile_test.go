package httpadapter

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
)

// hostileToken is the path token of the hostile-input suite's handler.
const hostileToken = "HOSTILE_hostile_0123456789abcdef"

// deployment is a valid v1 review of a Deployment with one replica in
// namespace production, which the example bundle denies; parts of it are
// replaced to make the hostile cases.
func deployment(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// with returns the review after edit changed it (its top level and its
// request).
func with(t *testing.T, edit func(review, request map[string]any)) string {
	t.Helper()
	m := deployment(t)
	edit(m, m["request"].(map[string]any))
	return encode(t, m)
}

// Every hostile request gets its exact status and a Status body saying what
// is wrong — never a panic, never a 200 that would let an error pass as
// allowed when the webhook's failurePolicy is Fail.
func TestHostileInput(t *testing.T) {
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	h := New(eng, zerolog.New(&logs), WithPathTokens(hostileToken))
	v := "/" + hostileToken + "/validate"
	good := with(t, func(_, _ map[string]any) {})
	bigArray := with(t, func(_, r map[string]any) {
		r["object"].(map[string]any)["metadata"].(map[string]any)["annotations"] = map[string]any{"a": strings.Repeat("x", 3<<20)}
		r["object"].(map[string]any)["spec"].(map[string]any)["template"] = map[string]any{"spec": map[string]any{"volumes": make([]any, 200000)}}
	})
	for _, tc := range []struct {
		name             string
		method, path, ct string
		body             string
		code             int
		reason, message  string
	}{
		// Transport.
		{"GET", "GET", v, "application/json", good, 405, "MethodNotAllowed", "method GET not allowed: send the AdmissionReview with POST"},
		{"PUT", "PUT", v, "application/json", good, 405, "MethodNotAllowed", "method PUT not allowed: send the AdmissionReview with POST"},
		{"DELETE", "DELETE", v, "application/json", good, 405, "MethodNotAllowed", "method DELETE not allowed: send the AdmissionReview with POST"},
		{"PATCH", "PATCH", v, "application/json", good, 405, "MethodNotAllowed", "method PATCH not allowed: send the AdmissionReview with POST"},
		{"text/plain", "POST", v, "text/plain", good, 415, "UnsupportedMediaType", `content type "text/plain" not supported: send application/json`},
		{"no content type", "POST", v, "", good, 415, "UnsupportedMediaType", `content type "" not supported: send application/json`},
		{"JSON patch type", "POST", v, "application/json-patch+json", good, 415, "UnsupportedMediaType", `content type "application/json-patch+json" not supported: send application/json`},
		{"YAML", "POST", v, "application/yaml", good, 415, "UnsupportedMediaType", `content type "application/yaml" not supported: send application/json`},
		{"unparsable content type", "POST", v, "application/json; ===", good, 415, "UnsupportedMediaType", `content type "application/json; ===" not supported: send application/json`},
		{"body over the cap", "POST", v, "application/json", `{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, 413, "RequestEntityTooLarge", "request body larger than 7340032 bytes"},
		// Routes and tokens.
		{"no token", "POST", "/validate", "application/json", good, 404, "NotFound", "not found"},
		{"wrong token", "POST", "/" + strings.Repeat("A", len(hostileToken)) + "/validate", "application/json", good, 404, "NotFound", "not found"},
		{"token prefix", "POST", "/" + hostileToken[:10] + "/validate", "application/json", good, 404, "NotFound", "not found"},
		{"token in the query", "POST", "/validate?token=" + hostileToken, "application/json", good, 404, "NotFound", "not found"},
		{"token after the route", "POST", "/validate/" + hostileToken, "application/json", good, 404, "NotFound", "not found"},
		{"path traversal", "POST", "/../" + hostileToken + "/validate", "application/json", good, 404, "NotFound", "not found"},
		{"unknown route", "POST", "/" + hostileToken + "/admit", "application/json", good, 404, "NotFound", `no route "/admit": reviews are served on /validate[/<group>] and /mutate[/<group>]`},
		{"nested group", "POST", v + "/a/b", "application/json", good, 404, "NotFound", `no route "/validate/a/b": reviews are served on /validate[/<group>] and /mutate[/<group>]`},
		{"group not in the bundle", "POST", v + "/0000000000", "application/json", good, 404, "NotFound", `no policy group "/validate/0000000000" in the current bundle: re-render the webhook configurations`},
		{"bad timeout", "POST", v + "?timeout=soon", "application/json", good, 400, "BadRequest", `invalid timeout "soon": want a positive duration such as 10s`},
		{"negative timeout", "POST", v + "?timeout=-5s", "application/json", good, 400, "BadRequest", `invalid timeout "-5s": want a positive duration such as 10s`},
		{"zero timeout", "POST", v + "?timeout=0s", "application/json", good, 400, "BadRequest", `invalid timeout "0s": want a positive duration such as 10s`},
		// Bodies that are no JSON.
		{"empty body", "POST", v, "application/json", "", 400, "BadRequest", "malformed AdmissionReview: empty body"},
		{"whitespace body", "POST", v, "application/json", " \n\t ", 400, "BadRequest", "malformed AdmissionReview: empty body"},
		{"invalid JSON", "POST", v, "application/json", `{"apiVersion":`, 400, "BadRequest", "malformed AdmissionReview: invalid JSON: syntax error at offset 14"},
		{"trailing garbage", "POST", v, "application/json", good + "}", 400, "BadRequest", "malformed AdmissionReview: invalid JSON: syntax error at offset " + strconv.Itoa(len(good)+1)},
		{"deep arrays", "POST", v, "application/json", strings.Repeat("[", 100000), 400, "BadRequest", "malformed AdmissionReview: invalid JSON: syntax error at offset 10001"},
		{"deep objects", "POST", v, "application/json", strings.Repeat(`{"a":`, 100000), 400, "BadRequest", "malformed AdmissionReview: invalid JSON: syntax error at offset 50001"},
		{"deep object in the object", "POST", v, "application/json", strings.Replace(good, `"object":{`, `"object":{"x":`+strings.Repeat(`{"a":`, 20000)+`1`+strings.Repeat("}", 20000)+`,`, 1), 400, "BadRequest", "malformed AdmissionReview: invalid JSON: syntax error at offset " + strconv.Itoa(strings.Index(good, `"object":{`)+len(`"object":{"x":`)+5*9997+1)},
		{"top-level array", "POST", v, "application/json", "[" + good + "]", 400, "BadRequest", `malformed AdmissionReview: invalid JSON: field "": cannot decode JSON array into review.envelope`},
		{"top-level string", "POST", v, "application/json", `"AdmissionReview"`, 400, "BadRequest", `malformed AdmissionReview: invalid JSON: field "": cannot decode JSON string into review.envelope`},
		{"top-level null", "POST", v, "application/json", "null", 400, "BadRequest", `malformed AdmissionReview: kind is "", want "AdmissionReview"`},
		// JSON that is no AdmissionReview.
		{"wrong apiVersion", "POST", v, "application/json", with(t, func(m, _ map[string]any) { m["apiVersion"] = "admission.k8s.io/v2" }), 400, "BadRequest", `malformed AdmissionReview: apiVersion is "admission.k8s.io/v2", want "admission.k8s.io/v1" or "admission.k8s.io/v1beta1"`},
		{"wrong kind", "POST", v, "application/json", with(t, func(m, _ map[string]any) { m["kind"] = "Pod" }), 400, "BadRequest", `malformed AdmissionReview: kind is "Pod", want "AdmissionReview"`},
		{"no request", "POST", v, "application/json", with(t, func(m, _ map[string]any) { delete(m, "request") }), 400, "BadRequest", "malformed AdmissionReview: request is missing"},
		{"request null", "POST", v, "application/json", with(t, func(m, _ map[string]any) { m["request"] = nil }), 400, "BadRequest", "malformed AdmissionReview: request is missing"},
		{"request a string", "POST", v, "application/json", with(t, func(m, _ map[string]any) { m["request"] = "CREATE" }), 400, "BadRequest", `malformed AdmissionReview: invalid JSON: field "request": cannot decode JSON string into v1.AdmissionRequest`},
		{"no uid", "POST", v, "application/json", with(t, func(_, r map[string]any) { delete(r, "uid") }), 400, "BadRequest", "malformed AdmissionReview: request.uid is missing"},
		{"uid a number", "POST", v, "application/json", with(t, func(_, r map[string]any) { r["uid"] = 7 }), 400, "BadRequest", `malformed AdmissionReview: invalid JSON: field "request.uid": cannot decode JSON number into types.UID`},
		{"no operation", "POST", v, "application/json", with(t, func(_, r map[string]any) { delete(r, "operation") }), 400, "BadRequest", "malformed AdmissionReview: request.operation is missing"},
		{"no resource", "POST", v, "application/json", with(t, func(_, r map[string]any) { delete(r, "resource") }), 400, "BadRequest", "malformed AdmissionReview: request.kind and request.resource are required"},
		{"no kind", "POST", v, "application/json", with(t, func(_, r map[string]any) { delete(r, "kind") }), 400, "BadRequest", "malformed AdmissionReview: request.kind and request.resource are required"},
		{"object an array", "POST", v, "application/json", with(t, func(_, r map[string]any) { r["object"] = []any{1} }), 400, "BadRequest", "malformed AdmissionReview: request.object is not a JSON object"},
		{"object a string", "POST", v, "application/json", with(t, func(_, r map[string]any) { r["object"] = "{}" }), 400, "BadRequest", "malformed AdmissionReview: request.object is not a JSON object"},
		{"object a number", "POST", v, "application/json", with(t, func(_, r map[string]any) { r["object"] = 1 }), 400, "BadRequest", "malformed AdmissionReview: request.object is not a JSON object"},
		{"oldObject an array", "POST", v, "application/json", with(t, func(_, r map[string]any) { r["oldObject"] = []any{} }), 400, "BadRequest", "malformed AdmissionReview: request.oldObject is not a JSON object"},
		{"options a boolean", "POST", v, "application/json", with(t, func(_, r map[string]any) { r["options"] = true }), 400, "BadRequest", "malformed AdmissionReview: request.options is not a JSON object"},
		{"userInfo a string", "POST", v, "application/json", with(t, func(_, r map[string]any) { r["userInfo"] = "admin" }), 400, "BadRequest", `malformed AdmissionReview: invalid JSON: field "request.userInfo": cannot decode JSON string into v1.UserInfo`},
		{"dryRun a string", "POST", v, "application/json", with(t, func(_, r map[string]any) { r["dryRun"] = "true" }), 400, "BadRequest", `malformed AdmissionReview: invalid JSON: field "request.dryRun": cannot decode JSON string into bool`},
		// Big, but legal: answered, inside the longest timeout a webhook may have.
		{"huge annotation and array", "POST", v + "?timeout=30s", "application/json", bigArray, 200, "", ""},
		{"charset parameter", "POST", v + "?timeout=10s", "application/json; charset=utf-8", good, 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(t, h, exchange{method: tc.method, path: tc.path, contentType: tc.ct, body: tc.body})
			if rec.Code != tc.code {
				t.Fatalf("HTTP %d, want %d: %.300s", rec.Code, tc.code, rec.Body)
			}
			if tc.code == 200 {
				var out struct {
					Response struct {
						UID     string
						Allowed bool
						Status  struct{ Message string }
					}
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response.UID != "e911857d-c318-11e8-bbad-025000000001" || out.Response.Allowed ||
					out.Response.Status.Message != "ValidatingAdmissionPolicy 'min-replicas.example.com' with binding 'min-replicas-binding.example.com' denied request: at least 2 replicas are required in namespace production" {
					t.Errorf("answer %v %.300s", err, rec.Body)
				}
				return
			}
			if _, reason, message := statusBody(t, rec); reason != tc.reason || message != tc.message {
				t.Errorf("status %s %q\nwant   %s %q", reason, message, tc.reason, tc.message)
			}
			if strings.Contains(rec.Body.String(), `"allowed"`) {
				t.Errorf("an error answer carries a decision: %s", rec.Body)
			}
		})
	}
	if strings.Contains(logs.String(), hostileToken) {
		t.Error("the token reached the logs")
	}
}
