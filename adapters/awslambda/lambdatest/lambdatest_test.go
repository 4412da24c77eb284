package lambdatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

func TestFunctionURLEvent(t *testing.T) {
	f := &FunctionURL{URLID: "abc123", Region: "eu-west-1"}
	r := httptest.NewRequest("POST", "/validate/g1?timeout=10s&x=1&x=2", nil)
	r.RemoteAddr = "192.0.2.10:43210"
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "kube-apiserver-admission")
	r.Header.Add("Accept", "application/json")
	r.Header.Add("Accept", "*/*")
	r.Header.Set("Cookie", "a=1; b=2")
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	raw, err := json.Marshal(f.Event(r, []byte(`{"kind":"AdmissionReview"}`), now))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(raw, &got)
	want := map[string]any{
		"version":               "2.0",
		"routeKey":              "$default",
		"rawPath":               "/validate/g1",
		"rawQueryString":        "timeout=10s&x=1&x=2",
		"cookies":               []any{"a=1", "b=2"},
		"queryStringParameters": map[string]any{"timeout": "10s", "x": "1,2"},
		"headers": map[string]any{
			"content-type":      "application/json",
			"user-agent":        "kube-apiserver-admission",
			"accept":            "application/json,*/*",
			"host":              "abc123.lambda-url.eu-west-1.on.aws",
			"x-forwarded-proto": "https",
			"x-forwarded-port":  "443",
			"x-forwarded-for":   "192.0.2.10",
			"x-amzn-trace-id":   fmt.Sprintf("Root=1-%08x-000000000000000000000001", now.Unix()),
		},
		"requestContext": map[string]any{
			"accountId":    "anonymous",
			"apiId":        "abc123",
			"domainName":   "abc123.lambda-url.eu-west-1.on.aws",
			"domainPrefix": "abc123",
			"requestId":    "c7a8e3b2-0000-4000-8000-000000000001",
			"routeKey":     "$default",
			"stage":        "$default",
			"time":         "22/Nov/2026:10:00:00 +0000",
			"timeEpoch":    float64(now.UnixMilli()),
			"http": map[string]any{
				"method": "POST", "path": "/validate/g1", "protocol": "HTTP/1.1",
				"sourceIp": "192.0.2.10", "userAgent": "kube-apiserver-admission",
			},
		},
		"body":            `{"kind":"AdmissionReview"}`,
		"isBase64Encoded": false,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("event\n got: %s", raw)
	}
	// It decodes as aws-lambda-go's own event type.
	var ev events.LambdaFunctionURLRequest
	if err := json.Unmarshal(raw, &ev); err != nil || ev.RequestContext.HTTP.Method != "POST" {
		t.Errorf("decode: %v %+v", err, ev)
	}

	// A body that is not text arrives base64-encoded.
	r = httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Content-Type", "application/octet-stream")
	bin := f.Event(r, []byte{0xff, 0x00}, now)
	if !bin.IsBase64Encoded || bin.Body != "/wA=" {
		t.Errorf("binary body: %q base64=%v", bin.Body, bin.IsBase64Encoded)
	}
}

// function answers each invocation with fn.
type function func(payload []byte) Result

func (f function) Invoke(_ context.Context, payload []byte, _ time.Duration) (Result, error) {
	return f(payload), nil
}

func TestFunctionURLResponses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		result   Result
		code     int
		header   http.Header
		wantBody string
	}{
		{"response", Result{Payload: []byte(`{"statusCode":403,"headers":{"Content-Type":"application/json"},"body":"{\"a\":1}"}`)}, 403, http.Header{"Content-Type": {"application/json"}}, `{"a":1}`},
		{"base64 body", Result{Payload: []byte(`{"statusCode":200,"headers":{"Content-Type":"text/plain"},"body":"aGk=","isBase64Encoded":true}`)}, 200, http.Header{"Content-Type": {"text/plain"}}, "hi"},
		{"bare JSON", Result{Payload: []byte(`{"message":"hi"}`)}, 200, http.Header{"Content-Type": {"application/json"}}, `{"message":"hi"}`},
		{"function error", Result{Err: &FunctionError{Kind: "EventError"}}, 502, http.Header{"Content-Type": {"application/json"}}, `{"Message":"Internal Server Error"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &FunctionURL{Function: function(func([]byte) Result { return tc.result }), URLID: "u", Region: "r"}
			rec := httptest.NewRecorder()
			f.ServeHTTP(rec, httptest.NewRequest("POST", "/validate", strings.NewReader("{}")))
			if rec.Code != tc.code || rec.Body.String() != tc.wantBody {
				t.Errorf("HTTP %d %q, want %d %q", rec.Code, rec.Body, tc.code, tc.wantBody)
			}
			for k, v := range tc.header {
				if got := rec.Header().Values(k); !reflect.DeepEqual(got, v) {
					t.Errorf("header %s = %v, want %v", k, got, v)
				}
			}
		})
	}
}

func TestRuntimeAPI(t *testing.T) {
	api, err := NewRuntimeAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	base := "http://" + api.Addr + "/2018-06-01/runtime/"

	// A response over the limit is refused with 413 and fails the
	// invocation, as Lambda does.
	for _, tc := range []struct {
		size     int
		wantCode int
	}{{MaxPayloadBytes, 202}, {MaxPayloadBytes + 1, 413}} {
		done := make(chan Result, 1)
		go func() {
			res, _ := api.Invoke(context.Background(), []byte(`{}`), 3*time.Second)
			done <- res
		}()
		resp, err := http.Get(base + "invocation/next")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
		deadline := resp.Header.Get("Lambda-Runtime-Deadline-Ms")
		if id == "" || deadline == "" || resp.Header.Get("Lambda-Runtime-Invoked-Function-Arn") == "" || resp.Header.Get("Lambda-Runtime-Trace-Id") == "" {
			t.Fatalf("next invocation headers: %v", resp.Header)
		}
		post, err := http.Post(base+"invocation/"+id+"/response", "application/json", bytes.NewReader(make([]byte, tc.size)))
		if err != nil {
			t.Fatal(err)
		}
		post.Body.Close()
		if post.StatusCode != tc.wantCode {
			t.Errorf("response of %d bytes: HTTP %d, want %d", tc.size, post.StatusCode, tc.wantCode)
		}
		res := <-done
		if (res.Err != nil) != (tc.wantCode == 413) || res.RequestID != id {
			t.Errorf("response of %d bytes: result %+v", tc.size, res.Err)
		}
	}

	// An unknown request id is refused.
	post, err := http.Post(base+"invocation/nope/response", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != 400 {
		t.Errorf("unknown request id: HTTP %d", post.StatusCode)
	}
}
