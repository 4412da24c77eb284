package awslambda

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/adapters/awslambda/lambdatest"
)

// fixture reads an event fixture as a map to edit.
func fixture(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".event.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Hostile events beyond the golden fixtures, through aws-lambda-go's invoke
// path: each gets its exact status and Status message (never a decision, so
// an error can never pass as allowed), or, when the payload is no HTTP
// event, a function error. No header value is echoed or logged.
func TestHostileEvents(t *testing.T) {
	const (
		v2 = "function-url-deny"
		v1 = "rest-api-allow-v1beta1"
	)
	big := strings.Repeat("h", 70<<10)
	validBody := func(t *testing.T) string { return fixture(t, v2)["body"].(string) }
	headers := func(ev map[string]any) map[string]any { return ev["headers"].(map[string]any) }
	const denial = "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5"
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)

	type edit func(t *testing.T, ev map[string]any)
	for _, tc := range []struct {
		name    string
		event   string
		edit    edit
		status  int
		message string // the Status message; for a function error, its text
	}{
		// Headers: the server's 64 KiB cap, counted as a server would.
		{"huge header value", v2, func(t *testing.T, ev map[string]any) { headers(ev)["x-junk"] = big }, 431, "request headers larger than 65536 bytes"},
		{"huge content-type", v2, func(t *testing.T, ev map[string]any) { headers(ev)["content-type"] = "application/json; x=" + big }, 431, "request headers larger than 65536 bytes"},
		{"many headers", v2, func(t *testing.T, ev map[string]any) {
			for i := range 2000 {
				headers(ev)[fmt.Sprintf("x-h-%04d", i)] = strings.Repeat("v", 30)
			}
		}, 431, "request headers larger than 65536 bytes"},
		{"huge cookies", v2, func(t *testing.T, ev map[string]any) { ev["cookies"] = []any{"a=" + big[:40<<10], "b=" + big[:40<<10]} }, 431, "request headers larger than 65536 bytes"},
		{"huge query string", v2, func(t *testing.T, ev map[string]any) { ev["rawQueryString"] = "timeout=10s&x=" + big }, 431, "request headers larger than 65536 bytes"},
		{"huge multiValueHeaders", v1, func(t *testing.T, ev map[string]any) {
			ev["multiValueHeaders"].(map[string]any)["X-Junk"] = []any{big[:35<<10], big[:35<<10]}
		}, 431, "request headers larger than 65536 bytes"},
		{"headers just under the cap", v2, func(t *testing.T, ev map[string]any) { headers(ev)["x-junk"] = big[:60<<10] }, 200, denial},
		{"CRLF in a header value", v2, func(t *testing.T, ev map[string]any) {
			headers(ev)["content-type"] = "application/json\r\nX-Injected: 1"
		}, 415, "content type \"application/json\\r\\nX-Injected: 1\" not supported: send application/json"},
		{"no headers", v2, func(t *testing.T, ev map[string]any) { delete(ev, "headers") }, 415, `content type "" not supported: send application/json`},
		{"null headers", v1, func(t *testing.T, ev map[string]any) { ev["headers"], ev["multiValueHeaders"] = nil, nil }, 415, `content type "" not supported: send application/json`},

		// Bodies.
		{"base64 garbage", v2, func(t *testing.T, ev map[string]any) { ev["isBase64Encoded"], ev["body"] = true, "%%%not base64%%%" }, 400, "the event's body is marked base64 but does not decode: illegal base64 data at input byte 0"},
		{"base64 of garbage", v2, func(t *testing.T, ev map[string]any) {
			ev["isBase64Encoded"], ev["body"] = true, base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 0x00, 0x01})
		}, 400, "malformed AdmissionReview: invalid JSON: syntax error at offset 1"},
		{"base64 of a good review", v2, func(t *testing.T, ev map[string]any) {
			ev["isBase64Encoded"], ev["body"] = true, base64.StdEncoding.EncodeToString([]byte(validBody(t)))
		}, 200, denial},
		{"empty body", v2, func(t *testing.T, ev map[string]any) { delete(ev, "body") }, 400, "malformed AdmissionReview: empty body"},
		{"null body", v1, func(t *testing.T, ev map[string]any) { ev["body"] = nil }, 400, "malformed AdmissionReview: empty body"},
		{"body over the cap", v2, func(t *testing.T, ev map[string]any) { ev["body"] = strings.Repeat(" ", 7<<20+1) }, 413, "request body larger than 7340032 bytes"},
		{"JSON bomb", v2, func(t *testing.T, ev map[string]any) { ev["body"] = deep }, 400, "malformed AdmissionReview: invalid JSON: syntax error at offset 10001"},
		{"review that is an array", v2, func(t *testing.T, ev map[string]any) { ev["body"] = "[" + validBody(t) + "]" }, 400, `malformed AdmissionReview: invalid JSON: field "": cannot decode JSON array into review.envelope`},

		// Methods, paths and queries.
		{"GET", v2, func(t *testing.T, ev map[string]any) {
			ev["requestContext"].(map[string]any)["http"].(map[string]any)["method"] = "GET"
		}, 405, "method GET not allowed: send the AdmissionReview with POST"},
		{"made-up method", v1, func(t *testing.T, ev map[string]any) { ev["httpMethod"] = "BREW" }, 405, "method BREW not allowed: send the AdmissionReview with POST"},
		{"no path", v2, func(t *testing.T, ev map[string]any) { delete(ev, "rawPath") }, 404, `no route "/": reviews are served on /validate[/<group>] and /mutate[/<group>]`},
		{"dot segments", v2, func(t *testing.T, ev map[string]any) { ev["rawPath"] = "/validate/../mutate" }, 404, `no route "/validate/../mutate": reviews are served on /validate[/<group>] and /mutate[/<group>]`},
		{"huge path", v2, func(t *testing.T, ev map[string]any) { ev["rawPath"] = "/validate/" + big[:70<<10] }, 431, "request headers larger than 65536 bytes"},
		{"negative timeout", v2, func(t *testing.T, ev map[string]any) { ev["rawQueryString"] = "timeout=-1s" }, 400, `invalid timeout "-1s": want a positive duration such as 10s`},
		{"malformed query", v2, func(t *testing.T, ev map[string]any) { ev["rawQueryString"] = "timeout=%zz" }, 200, denial},

		// Payloads that are no HTTP event.
		{"2.0 without a method", v2, func(t *testing.T, ev map[string]any) { delete(ev["requestContext"].(map[string]any), "http") }, 0, "want a Function URL or API Gateway event (payload 2.0 or 1.0)"},
		{"headers of the wrong type", v2, func(t *testing.T, ev map[string]any) { ev["headers"] = []any{"content-type"} }, 0, "malformed payload 2.0 event: headers is a JSON array, want an object"},
		{"body of the wrong type", v1, func(t *testing.T, ev map[string]any) {
			ev["body"] = map[string]any{"apiVersion": "admission.k8s.io/v1"}
		}, 0, "malformed payload 1.0 event: body is a JSON object, want a string"},
		{"2.0 request context field of the wrong type", v2, func(t *testing.T, ev map[string]any) {
			ev["requestContext"].(map[string]any)["http"].(map[string]any)["sourceIp"] = 7
		}, 0, "malformed payload 2.0 event: requestContext.http.sourceIp is a JSON number, want a string"},
		{"1.0 request context field of the wrong type", v1, func(t *testing.T, ev map[string]any) {
			ev["requestContext"].(map[string]any)["identity"] = "me"
		}, 0, "malformed payload 1.0 event: requestContext.identity is a JSON string, want an object"},
		{"header value of the wrong type, named without its header", v2, func(t *testing.T, ev map[string]any) { headers(ev)["x-tenant-7f3a"] = 7 },
			0, "not an HTTP event: malformed payload 2.0 event: headers is a JSON number, want a string"},
		{"list element of the wrong type", v1, func(t *testing.T, ev map[string]any) {
			ev["multiValueHeaders"] = map[string]any{"x-tenant-7f3a": []any{"a", 3}}
		}, 0, "not an HTTP event: malformed payload 1.0 event: multiValueHeaders is a JSON number, want a string"},
		{"names in another case", v2, func(t *testing.T, ev map[string]any) {
			rc := ev["requestContext"].(map[string]any)
			delete(ev, "requestContext")
			rc["HTTP"] = rc["http"]
			delete(rc, "http")
			rc["HTTP"].(map[string]any)["SourceIP"] = 7
			ev["RequestContext"] = rc
		}, 0, "not an HTTP event: malformed payload 2.0 event: requestContext.http.sourceIp is a JSON number, want a string"},
		{"2.0 request context that is no object", v2, func(t *testing.T, ev map[string]any) { ev["requestContext"] = []any{} }, 0, "want a Function URL or API Gateway event (payload 2.0 or 1.0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := fixture(t, tc.event)
			tc.edit(t, ev)
			payload, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			out, err := invoke(t, examplesHandler(t, &logs), "req-hostile", functionTimeout, payload)
			if strings.Contains(logs.String(), big[:1024]) {
				t.Errorf("a header value was logged")
			}
			if tc.status == 0 {
				var ee *EventError
				if err == nil || !errors.As(err, &ee) {
					t.Fatalf("want a function error %q, got %v (output %.200s)", tc.message, err, out)
				}
				if !strings.Contains(err.Error(), tc.message) {
					t.Errorf("function error %q, want it to say %q", err, tc.message)
				}
				if strings.Contains(err.Error()+logs.String(), "x-tenant-7f3a") {
					t.Errorf("a header's name was repeated: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("function error for an HTTP event: %v", err)
			}
			got, err := lambdatest.Readable(out)
			if err != nil {
				t.Fatal(err)
			}
			if got["statusCode"] != float64(tc.status) {
				t.Fatalf("status %v, want %d: %.300v", got["statusCode"], tc.status, got)
			}
			body, _ := got["body"].(map[string]any)
			if tc.status == 200 {
				// The controls: a review answered with the bundle's decision.
				resp := body["response"].(map[string]any)
				if resp["allowed"] != false || resp["status"].(map[string]any)["message"] != tc.message {
					t.Errorf("response %v, want the denial %q", resp, tc.message)
				}
				return
			}
			if _, decided := body["response"]; decided {
				t.Errorf("an error answer carries a decision: %v", body)
			}
			if body["kind"] != "Status" || body["status"] != "Failure" || body["code"] != float64(tc.status) || body["message"] != tc.message {
				t.Errorf("Status body %v\nwant code %d message %q", body, tc.status, tc.message)
			}
			if h, _ := got["headers"].(map[string]any); h != nil && h["X-Injected"] != nil {
				t.Errorf("a header was injected into the response: %v", h)
			}
		})
	}
}
