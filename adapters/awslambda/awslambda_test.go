package awslambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/adapters/awslambda/lambdatest"
	"github.com/admitfn/admitfn/adapters/httpadapter"
	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/engine"
)

var update = flag.Bool("update", false, "rewrite the golden responses in testdata/")

// examplesHandler serves the example bundle, logging to logs.
func examplesHandler(tb testing.TB, logs io.Writer) *Handler {
	tb.Helper()
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		tb.Fatal(err)
	}
	log := zerolog.New(logs)
	return New(httpadapter.New(eng, log), log)
}

// functionTimeout is the Lambda timeout of every invocation whose subject is
// not the deadline: longer than any review here takes on a loaded machine.
const functionTimeout = 30 * time.Second

// invoke sends payload through aws-lambda-go's own invoke path, as the
// runtime loop does: the handler is wrapped by lambda.NewHandler, and the
// context carries the invocation's request id and deadline.
func invoke(t *testing.T, h lambda.Handler, requestID string, timeout time.Duration, payload []byte) ([]byte, error) {
	t.Helper()
	return invokeBy(t, h, requestID, time.Now().Add(timeout), payload)
}

// invokeBy is invoke with Lambda's deadline for the invocation.
func invokeBy(t *testing.T, h lambda.Handler, requestID string, deadline time.Time, payload []byte) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: requestID})
	return lambda.NewHandler(h).Invoke(ctx, payload)
}

// readable turns an event response into what the golden files hold: the
// body decoded when it is JSON, so reviews read and compare structurally.
func readable(t *testing.T, out []byte) map[string]any {
	t.Helper()
	m, err := lambdatest.Readable(out)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGoldenEvents(t *testing.T) {
	events, err := filepath.Glob("testdata/*.event.json")
	if err != nil || len(events) == 0 {
		t.Fatalf("no event fixtures: %v", err)
	}
	var logs bytes.Buffer
	h := examplesHandler(t, &logs)
	for _, path := range events {
		name := strings.TrimSuffix(filepath.Base(path), ".event.json")
		t.Run(name, func(t *testing.T) {
			payload, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			logs.Reset()
			out, err := invoke(t, h, "req-"+name, functionTimeout, payload)
			if err != nil {
				t.Fatalf("function error for an HTTP event: %v", err)
			}
			got := readable(t, out)
			goldenPath := filepath.Join("testdata", name+".response.json")
			if *update {
				pretty, _ := json.MarshalIndent(got, "", "  ")
				if err := os.WriteFile(goldenPath, append(pretty, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal(golden, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				gotJSON, _ := json.MarshalIndent(got, "", "  ")
				t.Errorf("response differs from %s\n got: %s\nwant: %s", goldenPath, gotJSON, golden)
			}
			// The response format follows the trigger: REST APIs get
			// multiValueHeaders, payload 2.0 triggers headers.
			_, multi := got["multiValueHeaders"]
			if multi != (strings.HasPrefix(name, "rest-api") || strings.HasPrefix(name, "http-api-v1")) {
				t.Errorf("multiValueHeaders present = %v for %s", multi, name)
			}
			// Every line of the invocation carries its request id and trigger.
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if line == "" {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				wantTrigger := map[string]string{"function": "function-url", "http": "http-api", "rest": "rest-api"}[strings.SplitN(name, "-", 2)[0]]
				if m["requestId"] != "req-"+name || m["trigger"] != wantTrigger {
					t.Errorf("log line without requestId/trigger: %s", line)
				}
			}
		})
	}
}

func TestGoldenReviewsMatchTheServer(t *testing.T) {
	// The review inside each answered event is the server's own golden
	// answer to the same AdmissionReview: one handling on every platform.
	for event, review := range map[string]string{
		"function-url-warn":                  "warn",
		"function-url-deny":                  "basic-deny",
		"http-api-stage-mutate":              "mutate-sidecar",
		"http-api-custom-domain-pull-policy": "mutate-pull-policy-v1beta1",
		"rest-api-allow-v1beta1":             "basic-allow-v1beta1",
		"rest-api-custom-domain-audit":       "audit-annotations",
		"http-api-v1-stage-deny":             "basic-deny",
	} {
		lambdaGolden, err := os.ReadFile(filepath.Join("testdata", event+".response.json"))
		if err != nil {
			t.Fatal(err)
		}
		serverGolden, err := os.ReadFile(filepath.Join("../httpadapter/testdata", review+".response.json"))
		if err != nil {
			t.Fatal(err)
		}
		var l struct {
			StatusCode int
			Body       any
		}
		var s any
		if err := json.Unmarshal(lambdaGolden, &l); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(serverGolden, &s); err != nil {
			t.Fatal(err)
		}
		if l.StatusCode != 200 || !reflect.DeepEqual(l.Body, s) {
			t.Errorf("%s: HTTP %d, review differs from the server's %s:\n%v\n%v", event, l.StatusCode, review, l.Body, s)
		}
	}
}

func TestNotAnHTTPEventIsAFunctionError(t *testing.T) {
	var logs bytes.Buffer
	h := examplesHandler(t, &logs)
	const notHTTP = "not an HTTP event: want a Function URL or API Gateway event (payload 2.0 or 1.0)"
	const notObject = "not an HTTP event: the payload is not a JSON object"
	for name, tc := range map[string]struct{ payload, err string }{
		"s3 notification":          {`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put"}]}`, notHTTP},
		"scalar":                   {`"hello"`, notObject},
		"array":                    {`[1,2]`, notObject},
		"empty object":             {`{}`, notHTTP},
		"no JSON":                  {`{"version":"2.0",`, notObject},
		"method of the wrong type": {`{"httpMethod":["POST"]}`, notHTTP},
	} {
		var out []byte
		var err error
		if name == "no JSON" {
			// aws-lambda-go's path refuses it before the handler sees it.
			out, err = h.Invoke(context.Background(), []byte(tc.payload))
		} else {
			out, err = invoke(t, h, "req-1", functionTimeout, []byte(tc.payload))
		}
		var ee *EventError
		if !errors.As(err, &ee) || out != nil || err.Error() != tc.err {
			t.Errorf("%s: got %s, %v; want the EventError %q", name, out, err, tc.err)
		}
	}
	// aws-lambda-go rejects a payload that is no JSON before the handler.
	if _, err := invoke(t, h, "req-2", functionTimeout, []byte(`{not json`)); err == nil {
		t.Error("a payload that is no JSON was answered")
	}
}

// fixedHandler answers every request with status, header and body.
type fixedHandler struct {
	body     []byte
	deadline chan time.Time // receives the request's deadline, zero for none
}

func (f fixedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.deadline != nil {
		d, _ := r.Context().Deadline()
		f.deadline <- d
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(f.body)
}

func TestOversizedAnswerBecomesAStatus(t *testing.T) {
	event, err := os.ReadFile("testdata/function-url-warn.event.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		bodySize int
		wantCode int
	}{
		{"just under the limit", MaxResponseBytes - 1024, 200},
		{"over the limit", MaxResponseBytes, 500},
		{"far over the limit", 3 * MaxResponseBytes, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A JSON string of quotes doubles in size once escaped into the
			// event's body: the limit counts the encoded response.
			body := []byte(`"` + strings.Repeat("a", tc.bodySize-2) + `"`)
			var logs bytes.Buffer
			h := New(fixedHandler{body: body}, zerolog.New(&logs))
			out, err := invoke(t, h, "req-big", functionTimeout, event)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) > MaxResponseBytes {
				t.Fatalf("response of %d bytes sent", len(out))
			}
			var res struct {
				StatusCode int
				Body       string
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.wantCode {
				t.Fatalf("HTTP %d, want %d", res.StatusCode, tc.wantCode)
			}
			if tc.wantCode == 200 {
				if res.Body != string(body) {
					t.Error("body changed on the way")
				}
				return
			}
			var s struct{ Kind, Reason, Message string }
			json.Unmarshal([]byte(res.Body), &s)
			if s.Kind != "Status" || s.Reason != "InternalError" || !strings.Contains(s.Message, "over the 6291556-byte limit of a Lambda response") {
				t.Errorf("status body %s", res.Body)
			}
			if !strings.Contains(logs.String(), `"response_bytes"`) || !strings.Contains(logs.String(), `"requestId":"req-big"`) {
				t.Errorf("no log line for the oversized answer: %s", logs.String())
			}
		})
	}
}

func TestDeadlineLeavesTimeToAnswer(t *testing.T) {
	event, err := os.ReadFile("testdata/function-url-warn.event.json")
	if err != nil {
		t.Fatal(err)
	}
	// The adapter reads the clock once between before and after; the
	// margin it keeps is worked out from the time left then, and is never
	// more than deadlineMargin.
	for _, tc := range []struct {
		lambdaTimeout time.Duration
		margin        func(left time.Duration) time.Duration
	}{
		{10 * time.Second, func(time.Duration) time.Duration { return deadlineMargin }},
		{time.Second, func(left time.Duration) time.Duration { return left / 10 }}, // a tenth when that is less
	} {
		seen := make(chan time.Time, 1)
		h := New(fixedHandler{body: []byte(`{}`), deadline: seen}, zerolog.Nop())
		before := time.Now()
		lambdaDeadline := before.Add(tc.lambdaTimeout)
		if _, err := invokeBy(t, h, "req-1", lambdaDeadline, event); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		got := <-seen
		margin := func(at time.Time) time.Duration { return min(tc.margin(lambdaDeadline.Sub(at)), deadlineMargin) }
		earliest, latest := lambdaDeadline.Add(-margin(before)), lambdaDeadline.Add(-margin(after))
		if got.Before(earliest) || got.After(latest) {
			t.Errorf("Lambda timeout %v: the review's deadline is %v before Lambda's, want %v", tc.lambdaTimeout, lambdaDeadline.Sub(got), lambdaDeadline.Sub(earliest))
		}
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		resource string
		params   map[string]string
		want     string
	}{
		{"/validate", nil, "/validate"},
		{"/{proxy+}", map[string]string{"proxy": "validate/abc"}, "/validate/abc"},
		{"/validate/{group}", map[string]string{"group": "abc"}, "/validate/abc"},
		{"/", nil, "/"},
	} {
		if got := expandResource(tc.resource, tc.params); got != tc.want {
			t.Errorf("expandResource(%q) = %q, want %q", tc.resource, got, tc.want)
		}
	}
	for _, tc := range []struct{ path, seg, want string }{
		{"/prod/validate", "prod", "/validate"},
		{"/prod", "prod", "/"},
		{"/production/validate", "prod", "/production/validate"},
		{"/validate", "prod", "/validate"},
	} {
		if got := trimSegment(tc.path, tc.seg); got != tc.want {
			t.Errorf("trimSegment(%q, %q) = %q, want %q", tc.path, tc.seg, got, tc.want)
		}
	}
}

// A Function URL event on a cluster's path reaches the handler with the
// cluster in it: served for a cluster of the deployment, 404 for another.
func TestClusterPaths(t *testing.T) {
	raw, err := os.ReadFile("testdata/function-url-deny.event.json")
	if err != nil {
		t.Fatal(err)
	}
	eng, _, err := engine.Load(os.DirFS("../../policies/examples"), ".", celeval.NewCompiler())
	if err != nil {
		t.Fatal(err)
	}
	h := New(httpadapter.New(eng, zerolog.Nop(), httpadapter.WithClusters(map[string]cluster.Reader{"edge": nil})), zerolog.Nop())
	for path, want := range map[string]float64{"/clusters/edge/validate/dd1dcf98e3": 200, "/clusters/mars/validate/dd1dcf98e3": 404} {
		var event map[string]any
		json.Unmarshal(raw, &event)
		event["rawPath"] = path
		event["requestContext"].(map[string]any)["http"].(map[string]any)["path"] = path
		payload, _ := json.Marshal(event)
		out, err := invoke(t, h, "req-1", functionTimeout, payload)
		if err != nil {
			t.Fatal(err)
		}
		got := readable(t, out)
		if got["statusCode"] != want {
			t.Errorf("%s: status %v, want %v", path, got["statusCode"], want)
		}
		if want == 200 && !strings.Contains(fmt.Sprint(got["body"]), `allowed:false`) {
			t.Errorf("%s: %v, want the example bundle's denial", path, got["body"])
		}
	}
}
