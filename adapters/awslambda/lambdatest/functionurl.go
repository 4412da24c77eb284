package lambdatest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Invoker runs one invocation of a function.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte, timeout time.Duration) (Result, error)
}

// FunctionURL is an http.Handler standing in for a Lambda Function URL in
// BUFFERED invoke mode: each request becomes a payload 2.0 event as AWS
// documents it, and the function's answer becomes the HTTP response.
type FunctionURL struct {
	Function Invoker
	Timeout  time.Duration // the function's timeout
	URLID    string        // the <url-id> of <url-id>.lambda-url.<region>.on.aws
	Region   string

	seq atomic.Int64
}

func (f *FunctionURL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPayloadBytes+1))
	if err != nil || len(body) > MaxPayloadBytes {
		http.Error(w, `{"Message":"Request must be smaller than 6291456 bytes for the InvokeFunction operation"}`, http.StatusRequestEntityTooLarge)
		return
	}
	payload, err := json.Marshal(f.Event(r, body, time.Now()))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	res, err := f.Function.Invoke(r.Context(), payload, f.Timeout)
	if err != nil || res.Err != nil {
		// What a Function URL answers for a function error or timeout.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, `{"Message":"Internal Server Error"}`)
		return
	}
	writeResponse(w, res.Payload)
}

// Event is a Function URL's payload 2.0 event: aws-lambda-go's type plus
// the routeKey and stage that are always "$default" for Function URLs.
type Event struct {
	events.LambdaFunctionURLRequest
	RouteKey       string       `json:"routeKey"`
	RequestContext EventContext `json:"requestContext"`
}

// EventContext is the event's requestContext.
type EventContext struct {
	events.LambdaFunctionURLRequestContext
	RouteKey string `json:"routeKey"`
	Stage    string `json:"stage"`
}

// Event is the payload 2.0 event a Function URL sends for r with body:
// header names in lower case, repeated headers and query parameters joined
// with commas, cookies apart, and a body base64-encoded unless it is text.
func (f *FunctionURL) Event(r *http.Request, body []byte, now time.Time) Event {
	domain := f.URLID + ".lambda-url." + f.Region + ".on.aws"
	headers := map[string]string{}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	headers["host"] = domain
	headers["x-forwarded-proto"] = "https"
	headers["x-forwarded-port"] = "443"
	sourceIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	headers["x-forwarded-for"] = sourceIP
	headers["x-amzn-trace-id"] = fmt.Sprintf("Root=1-%08x-%024d", now.Unix(), f.seq.Add(1))
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.String())
	}
	var query map[string]string
	if r.URL.RawQuery != "" {
		query = map[string]string{}
		for k, vs := range r.URL.Query() {
			query[k] = strings.Join(vs, ",")
		}
	}
	ev := events.LambdaFunctionURLRequest{
		Version:               "2.0",
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
	}
	rc := EventContext{
		RouteKey: "$default",
		Stage:    "$default",
		LambdaFunctionURLRequestContext: events.LambdaFunctionURLRequestContext{
			AccountID:    "anonymous",
			RequestID:    fmt.Sprintf("c7a8e3b2-0000-4000-8000-%012d", f.seq.Load()),
			APIID:        f.URLID,
			DomainName:   domain,
			DomainPrefix: f.URLID,
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.EscapedPath(),
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type")) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return Event{LambdaFunctionURLRequest: ev, RouteKey: "$default", RequestContext: rc}
}

// isText reports whether a Function URL passes a body of this content type
// as a string rather than base64.
func isText(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || mt == "application/xml" ||
		mt == "application/javascript" || mt == "application/x-www-form-urlencoded" || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml")
}

// writeResponse interprets a function's answer as a Function URL does: an
// object with statusCode is a response; any other JSON is a 200
// application/json body.
func writeResponse(w http.ResponseWriter, payload []byte) {
	var res struct {
		StatusCode      *int              `json:"statusCode"`
		Headers         map[string]string `json:"headers"`
		Body            string            `json:"body"`
		IsBase64Encoded bool              `json:"isBase64Encoded"`
		Cookies         []string          `json:"cookies"`
	}
	if err := json.Unmarshal(payload, &res); err != nil || res.StatusCode == nil {
		w.Header().Set("Content-Type", "application/json")
		w.Write(payload)
		return
	}
	for k, v := range res.Headers {
		w.Header().Set(k, v)
	}
	for _, c := range res.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(res.Body)
	if res.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(res.Body); err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
	}
	w.WriteHeader(*res.StatusCode)
	w.Write(body)
}

// Readable decodes an HTTP event response, with its body decoded too when
// it is JSON, so responses read and compare structurally (golden files hold
// this form).
func Readable(payload []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, fmt.Errorf("response %s: %w", payload, err)
	}
	if body, ok := m["body"].(string); ok {
		var v any
		if json.Unmarshal([]byte(body), &v) == nil {
			m["body"] = v
		}
	}
	return m, nil
}
