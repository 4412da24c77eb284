// Package awslambda serves AWS Lambda HTTP events with an http.Handler, so
// routing, size caps and error bodies are the server's own. One handler
// takes every HTTP trigger: a Lambda Function URL and an API Gateway HTTP API
// (payload format 2.0), and an API Gateway REST API (payload format 1.0),
// told apart by the event's shape.
package awslambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/adapters/httpadapter"
)

// MaxResponseBytes is Lambda's limit on a synchronous invocation's response
// payload: the figure Lambda quotes when it refuses a larger one
// (Function.ResponseSizeTooLarge). The limit counts the whole event
// response, JSON escaping of the body included.
const MaxResponseBytes = 6_291_556

// deadlineMargin is kept between the review's deadline and Lambda's, so the
// answer is encoded and handed to the Runtime API before Lambda stops the
// invocation.
const deadlineMargin = 250 * time.Millisecond

// Trigger names the kind of HTTP event an invocation carried.
type Trigger string

const (
	FunctionURL Trigger = "function-url" // payload 2.0 from a Lambda Function URL
	HTTPAPI     Trigger = "http-api"     // payload 2.0 or 1.0 from an API Gateway HTTP API
	RESTAPI     Trigger = "rest-api"     // payload 1.0 from an API Gateway REST API
)

// EventError is the function error for an invocation that is no HTTP event:
// it has no HTTP caller to answer, so Lambda reports it to the invoker.
type EventError struct{ Reason string }

func (e *EventError) Error() string { return "not an HTTP event: " + e.Reason }

// Handler turns HTTP events into requests to an http.Handler and its
// answers into the event response of the same trigger.
type Handler struct {
	http http.Handler
	log  zerolog.Logger
}

var _ lambda.Handler = (*Handler)(nil)

// New returns a Lambda handler serving h. Log lines, h's included, carry the
// invocation's request id.
func New(h http.Handler, log zerolog.Logger) *Handler {
	return &Handler{http: h, log: log}
}

// httpEvent is what admitfn reads of both payload formats, decoded in one
// pass: 2.0 (Function URLs, HTTP APIs) and 1.0 (REST APIs, HTTP APIs) share
// headers, query parameters, path parameters and the body, each adds fields
// of its own that never clash, and the request context holds what is read
// of both. An event is mostly its escaped body; telling the formats apart
// and then decoding the event as aws-lambda-go's type of its format would
// read it twice (BenchmarkGoldenEvents, docs/performance.md).
// A field of the wrong type fails the event, even one its format lacks;
// fields admitfn does not read are not checked.
type httpEvent struct {
	Version               string            `json:"version"`
	Headers               map[string]string `json:"headers"`
	QueryStringParameters map[string]string `json:"queryStringParameters"`
	PathParameters        map[string]string `json:"pathParameters"`
	Body                  string            `json:"body"`
	IsBase64Encoded       bool              `json:"isBase64Encoded"`

	// Payload 2.0 (events.APIGatewayV2HTTPRequest).
	RawPath        string   `json:"rawPath"`
	RawQueryString string   `json:"rawQueryString"`
	Cookies        []string `json:"cookies"`

	// Payload 1.0 (events.APIGatewayProxyRequest).
	Resource                        string              `json:"resource"`
	Path                            string              `json:"path"`
	HTTPMethod                      string              `json:"httpMethod"`
	MultiValueHeaders               map[string][]string `json:"multiValueHeaders"`
	MultiValueQueryStringParameters map[string][]string `json:"multiValueQueryStringParameters"`

	RequestContext struct {
		APIID      string   `json:"apiId"`
		DomainName string   `json:"domainName"`
		Stage      string   `json:"stage"`
		HTTP       struct { // 2.0
			Method   string `json:"method"`
			SourceIP string `json:"sourceIp"`
		} `json:"http"`
		Identity struct { // 1.0
			SourceIP string `json:"sourceIp"`
		} `json:"identity"`
	} `json:"requestContext"`
}

// malformed is the error for an event of a known format with a field of the
// wrong type, named by its path in the event.
func malformed(format string, err error) *EventError {
	reason := err.Error()
	if te := (*jsonv1.UnmarshalTypeError)(nil); errors.As(err, &te) {
		reason = fmt.Sprintf("%s is a JSON %s, want %s", fieldPath(te.Field), te.Value, jsonKind(te.Type))
	}
	return &EventError{Reason: "malformed payload " + format + " event: " + reason}
}

var eventType = reflect.TypeFor[httpEvent]()

// fieldPath names the httpEvent field at path, a type error's path in the
// event as the payload spells its names, as encoding/json names it: by the
// fields' own names, up to the map or list the value sits in. A header's or
// a query parameter's name is the caller's, not the event's, and is not
// repeated.
func fieldPath(path string) string {
	var names []string
	t := eventType
	for seg := range strings.SplitSeq(path, ".") {
		if t.Kind() != reflect.Struct {
			break
		}
		var next reflect.Type
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); strings.EqualFold(name, seg) {
				names, next = append(names, name), f.Type
				break
			}
		}
		if next == nil {
			break
		}
		t = next
	}
	return strings.Join(names, ".")
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	default:
		return "a number"
	}
}

// Invoke serves one event. Every HTTP event gets an HTTP answer, denials and
// policy errors included; only a payload that is no HTTP event is an error.
func (h *Handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var ev httpEvent
	// A value of the wrong type in a field still leaves the rest decoded,
	// enough to tell which format the event was meant to be.
	decodeErr := jsonv1.Unmarshal(payload, &ev)
	if te := (*jsonv1.UnmarshalTypeError)(nil); decodeErr != nil && (!errors.As(decodeErr, &te) || te.Field == "") {
		return nil, &EventError{Reason: "the payload is not a JSON object"}
	}
	log := h.log
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		log = log.With().Str("requestId", lc.AwsRequestID).Logger()
	}

	var (
		trigger Trigger
		req     *http.Request
		encode  func(*recorder) ([]byte, error)
		err     error
	)
	switch rc := &ev.RequestContext; {
	case ev.Version == "2.0" && rc.HTTP.Method != "":
		if decodeErr != nil {
			return nil, malformed("2.0", decodeErr)
		}
		trigger = HTTPAPI
		if strings.Contains(rc.DomainName, ".lambda-url.") {
			trigger = FunctionURL
		}
		req, err = fromV2(&ev)
		encode = encodeV2
	case ev.HTTPMethod != "":
		if decodeErr != nil {
			return nil, malformed("1.0", decodeErr)
		}
		trigger = RESTAPI
		if rc.APIID != "" && ev.Version == "1.0" {
			trigger = HTTPAPI // REST API events carry no version
		}
		req, err = fromV1(&ev)
		encode = encodeV1
	default:
		log.Error().Msg("invocation is not an HTTP event: admitfn is invoked by a Function URL or an API Gateway")
		return nil, &EventError{Reason: "want a Function URL or API Gateway event (payload 2.0 or 1.0)"}
	}
	log = log.With().Str("trigger", string(trigger)).Logger()

	rec := newRecorder()
	size := 0
	if err == nil {
		size = headerBytes(req)
	}
	switch {
	case err != nil:
		httpadapter.WriteStatus(rec, http.StatusBadRequest, err.Error())
		log.Warn().Int("status", http.StatusBadRequest).Err(err).Msg("rejected event")
	case size > httpadapter.MaxHeaderBytes:
		// As the server answers headers over its limit; the values are
		// neither echoed nor logged.
		httpadapter.WriteStatus(rec, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request headers larger than %d bytes", httpadapter.MaxHeaderBytes))
		log.Warn().Int("status", http.StatusRequestHeaderFieldsTooLarge).Int("header_bytes", size).Msg("rejected event")
	default:
		ctx, cancel := withMargin(ctx)
		defer cancel()
		h.http.ServeHTTP(rec, req.WithContext(log.WithContext(ctx)))
	}

	out, err := encode(rec)
	if err != nil {
		return nil, fmt.Errorf("encode the %s response: %w", trigger, err)
	}
	if len(out) > MaxResponseBytes {
		log.Error().Int("status", rec.status()).Int("response_bytes", len(out)).Int("limit_bytes", MaxResponseBytes).
			Msg("answer exceeds Lambda's response limit: sent a 500 instead, the webhook's failurePolicy applies")
		rec = newRecorder()
		httpadapter.WriteStatus(rec, http.StatusInternalServerError,
			fmt.Sprintf("the answer to this review is %d bytes, over the %d-byte limit of a Lambda response", len(out), MaxResponseBytes))
		return encode(rec)
	}
	return out, nil
}

// withMargin ends the review deadlineMargin (at most a tenth of the time
// left) before Lambda's deadline, which aws-lambda-go put in ctx.
func withMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(deadlineMargin, time.Until(d)/10)
	return context.WithDeadline(ctx, d.Add(-margin))
}

// headerBytes is the size of r's request line and headers as they would
// reach a server: "Name: value\r\n" for each value.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.URL.RequestURI()) + len(" HTTP/1.1\r\n")
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// fromV2 builds the request of a payload 2.0 event. On an HTTP API's
// execute-api domain a named stage leads rawPath; it is not part of the
// function's routes. A custom domain's API mapping never appears in rawPath.
func fromV2(ev *httpEvent) (*http.Request, error) {
	path := ev.RawPath
	rc := ev.RequestContext
	if rc.Stage != "" && rc.Stage != "$default" && strings.HasPrefix(rc.DomainName, rc.APIID+".execute-api.") {
		path = trimSegment(path, rc.Stage)
	}
	h := make(http.Header, len(ev.Headers)+1)
	for k, v := range ev.Headers {
		h.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		h.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	return newRequest(rc.HTTP.Method, path, ev.RawQueryString, h, rc.HTTP.SourceIP, ev.Body, ev.IsBase64Encoded)
}

// fromV1 builds the request of a payload 1.0 event. Its path carries a
// custom domain's base path mapping; the resource template with the path
// parameters filled in is the path within the API, so that is used when
// there is one.
func fromV1(ev *httpEvent) (*http.Request, error) {
	path := ev.Path
	if strings.HasPrefix(ev.Resource, "/") {
		path = expandResource(ev.Resource, ev.PathParameters)
	} else if st := ev.RequestContext.Stage; st != "" && st != "$default" && strings.HasPrefix(ev.RequestContext.DomainName, ev.RequestContext.APIID+".execute-api.") {
		path = trimSegment(path, st)
	}
	h := make(http.Header, len(ev.Headers))
	for k, v := range ev.Headers {
		h.Set(k, v)
	}
	for k, vs := range ev.MultiValueHeaders {
		h.Del(k)
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	q := url.Values{}
	for k, v := range ev.QueryStringParameters {
		q.Set(k, v)
	}
	for k, vs := range ev.MultiValueQueryStringParameters {
		q[k] = vs
	}
	return newRequest(ev.HTTPMethod, path, q.Encode(), h, ev.RequestContext.Identity.SourceIP, ev.Body, ev.IsBase64Encoded)
}

// expandResource fills a REST API resource template such as
// /validate/{group} or /{proxy+} with the event's path parameters.
func expandResource(resource string, params map[string]string) string {
	segs := strings.Split(resource, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = params[strings.TrimSuffix(strings.Trim(s, "{}"), "+")]
		}
	}
	return strings.Join(segs, "/")
}

// trimSegment removes a leading /seg from path.
func trimSegment(path, seg string) string {
	if rest, ok := strings.CutPrefix(path, "/"+seg); ok && (rest == "" || rest[0] == '/') {
		if rest == "" {
			return "/"
		}
		return rest
	}
	return path
}

func newRequest(method, path, rawQuery string, h http.Header, sourceIP, body string, isBase64 bool) (*http.Request, error) {
	var raw io.Reader = strings.NewReader(body)
	size := len(body)
	if isBase64 {
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil, fmt.Errorf("the event's body is marked base64 but does not decode: %v", err)
		}
		raw, size = bytes.NewReader(b), len(b)
	}
	if path == "" {
		path = "/"
	}
	u := &url.URL{Path: path, RawQuery: rawQuery}
	r := &http.Request{
		Method:        method,
		URL:           u,
		RequestURI:    u.RequestURI(),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Host:          h.Get("Host"),
		RemoteAddr:    sourceIP,
		ContentLength: int64(size),
		Body:          io.NopCloser(raw),
	}
	return r, nil
}

// recorder is the http.ResponseWriter the handler writes the answer into.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// response is the event response of both payload formats: 2.0 takes
// headers (repeated values joined with commas), 1.0 multiValueHeaders.
type response struct {
	StatusCode        int                 `json:"statusCode"`
	Headers           map[string]string   `json:"headers,omitempty"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded"`
}

func (r *recorder) encode(res response) ([]byte, error) {
	res.StatusCode, res.Body = r.status(), r.body.String()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // \u003c for every < would only eat into the size limit
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func encodeV2(r *recorder) ([]byte, error) {
	h := make(map[string]string, len(r.header))
	for k, vs := range r.header {
		h[k] = strings.Join(vs, ",")
	}
	return r.encode(response{Headers: h})
}

func encodeV1(r *recorder) ([]byte, error) {
	return r.encode(response{MultiValueHeaders: r.header})
}
