// Package httpadapter is the net/http transport every platform adapter reuses:
// routing, method and content-type checks, the body cap, the apiserver's
// ?timeout= deadline, panic recovery and one log line per review.
package httpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/admitfn/admitfn/adapters/metrics"
	"github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
)

// MaxBodyBytes caps a review body. kube-apiserver accepts write bodies of up
// to 3 MiB (--max-request-body-bytes default), and an UPDATE review carries
// both object and oldObject, so 7 MiB holds any review it can send while
// bounding what a hostile caller can make the function read.
const MaxBodyBytes = 7 << 20

// MaxHeaderBytes caps a request's header block: the server's
// http.Server.MaxHeaderBytes, and what the Lambda adapter allows an event's
// headers. kube-apiserver sends a few hundred bytes.
const MaxHeaderBytes = 64 << 10

// maxTimeout bounds ?timeout=: a webhook's timeoutSeconds is at most 30.
const maxTimeout = 30 * time.Second

// minMargin is the least time kept between the review's deadline and the
// caller's. Past the deadline no new expression starts, but the one running
// goes on until a comprehension looks at the deadline (CEL stops only the
// comprehension that looked: nested ones run on) or its cost limit stops it,
// a tenth of a second of work at most; then the answer travels back.
const minMargin = 250 * time.Millisecond

// Engine is what the handler needs: reviews, and the bundle's identity for
// logs and /readyz.
type Engine interface {
	engine.Reviewer
	BundleID() string
}

// RouteKnower is implemented by engines that can say whether a route is one
// of their bundle's groups (engine.Engine, reload.Reloader): only those
// routes become metric labels.
type RouteKnower interface {
	HasRoute(policy.Route) bool
}

// RouteStater is implemented by engines that serve the routes an earlier
// bundle retired (reload.Reloader).
type RouteStater interface {
	RouteState(policy.Route) engine.RouteState
}

// Readiness is implemented by engines whose bundle can be missing or
// stale (one reloaded from a store): /readyz answers 503 while not ready,
// with detail in the body.
type Readiness interface {
	Ready() (ok bool, detail string)
}

// Handler serves POST /validate[/<group>] and /mutate[/<group>] (each also
// under /clusters/<name> for a cluster it serves), GET /healthz and GET
// /readyz.
type Handler struct {
	engine         Engine
	log            zerolog.Logger
	tokens         [][]byte
	auth           Authenticator
	metrics        metrics.Recorder
	metricsHandler http.Handler
	// rejected counts requests refused for a missing or wrong path token
	// or credentials.
	rejected atomic.Int64
	// bodies hold request bodies between reviews: a body is only read
	// while it is decoded, and a decoded request owns its data.
	bodies   sync.Pool
	limits   Limits
	inFlight inFlight
	// clusters are the clusters served (WithClusters).
	clusters map[string]cluster.Reader
}

var _ http.Handler = (*Handler)(nil)

// New returns a handler over e that logs to log.
func New(e Engine, log zerolog.Logger, opts ...Option) *Handler {
	h := &Handler{engine: e, log: log, metrics: metrics.Nop{}}
	h.bodies.New = func() any { return new(bytes.Buffer) }
	for _, o := range opts {
		o(h)
	}
	return h
}

// Rejected counts the requests refused for a missing or wrong path token or
// credentials.
func (h *Handler) Rejected() int64 { return h.rejected.Load() }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, tokenOK := h.stripToken(r.URL.Path)
	switch {
	case r.URL.Path == "/healthz" || (tokenOK && path == "/healthz"):
		h.probe(w, r, "ok")
		return
	case tokenOK && path == "/readyz":
		// Platforms probe without credentials: they learn ready or not,
		// and nothing of the bundle or the store.
		h.readyz(w, r, h.auth == nil || h.auth.Authenticate(r))
		return
	case r.URL.Path == "/readyz":
		h.readyz(w, r, false)
		return
	case tokenOK && path == "/metrics" && h.metricsHandler != nil:
		if h.auth != nil && !h.auth.Authenticate(r) {
			h.unauthenticated(w, r, path)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			WriteStatus(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed", r.Method))
			return
		}
		h.metricsHandler.ServeHTTP(w, r)
		return
	case !tokenOK:
		h.rejected.Add(1)
		h.metrics.Rejected(r.Context())
		// A bare 404, the same for every path: a scanner learns nothing,
		// and the path (which may hold a mistyped token) is not logged.
		// The connection ends with it: it holds no slot for a review.
		w.Header().Set("Connection", "close")
		WriteStatus(w, http.StatusNotFound, "not found")
		h.logger(r).Debug().Str("method", r.Method).Int("status", http.StatusNotFound).Msg("request without a valid path token")
		return
	}
	clusterName, path, ok := h.clusterOf(path)
	if !ok {
		h.rejected.Add(1)
		h.metrics.Rejected(r.Context())
		// The same answer as any unknown path: the caller's cluster name
		// becomes no label, no log field, no read.
		WriteStatus(w, http.StatusNotFound, "not found")
		h.logger(r).Debug().Str("method", r.Method).Int("status", http.StatusNotFound).Msg("request for a cluster this function does not serve")
		return
	}
	route, ok := policy.ParseRoute(path)
	if !ok {
		WriteStatus(w, http.StatusNotFound, fmt.Sprintf("no route %q: reviews are served on %s[/<group>] and %s[/<group>]", path, policy.ValidatePathPrefix, policy.MutatePathPrefix))
		return
	}
	if h.auth != nil && !h.auth.Authenticate(r) {
		h.unauthenticated(w, r, h.routeLabel(route))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		WriteStatus(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: send the AdmissionReview with POST", r.Method))
		return
	}
	sw := &statusWriter{ResponseWriter: w, start: time.Now()}
	var reader *countingReader
	if c := h.clusters[clusterName]; c != nil {
		reader = &countingReader{Reader: c}
	}
	res := h.review(sw, r, route, clusterName, reader)
	m := reviewMetrics(h.routeLabel(route), res, sw.status(), h.engine.BundleID(), time.Since(sw.start))
	m.RouteState = string(h.routeState(route))
	m.Cluster = clusterName
	if reader != nil {
		m.ClusterReadErrors = int(reader.errors.Load())
	}
	h.metrics.Review(r.Context(), m)
}

func (h *Handler) unauthenticated(w http.ResponseWriter, r *http.Request, route string) {
	h.rejected.Add(1)
	h.metrics.Rejected(r.Context())
	if c := h.auth.Challenge(); c != "" {
		w.Header().Set("WWW-Authenticate", c)
	}
	w.Header().Set("Connection", "close")
	WriteStatus(w, http.StatusUnauthorized, "authentication required")
	h.logger(r).Warn().Str("route", route).Int("status", http.StatusUnauthorized).Msg("request without valid credentials")
}

// routeLabel names route in metrics and logs: its path when it is a group
// of the bundle, else metrics.UnknownRoute. A caller can send any path;
// only the bundle may create label values (each is a time series, and on
// Lambda a billed custom metric).
func (h *Handler) routeLabel(route policy.Route) string {
	if h.routeState(route) != engine.RouteUnknown {
		return route.Path()
	}
	return metrics.UnknownRoute
}

// routeState says how the engine serves route: served, retired (an earlier
// bundle's, in its transition), ended (retired, transition over) or
// unknown.
func (h *Handler) routeState(route policy.Route) engine.RouteState {
	if s, ok := h.engine.(RouteStater); ok {
		return s.RouteState(route)
	}
	if k, ok := h.engine.(RouteKnower); ok && k.HasRoute(route) {
		return engine.RouteServed
	}
	return engine.RouteUnknown
}

// statusWriter remembers the status of the answer, for metrics.
type statusWriter struct {
	http.ResponseWriter
	code  int
	start time.Time
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}

// reviewMetrics describes an answered review: its decision when it got one
// (a 200), else an error.
func reviewMetrics(route string, res *engine.Result, status int, bundle string, latency time.Duration) metrics.Review {
	m := metrics.Review{Route: route, Decision: metrics.Error, Status: status, Latency: latency, Bundle: bundle}
	if status == http.StatusOK && res != nil {
		m.Decision = metrics.Denied
		if res.Response.Allowed {
			m.Decision = metrics.Allowed
		}
		m.FailedPolicies = res.FailedPolicies
		m.Idle = res.Idle
	}
	return m
}

func (h *Handler) readyz(w http.ResponseWriter, r *http.Request, detailed bool) {
	rd, ok := h.engine.(Readiness)
	if !ok {
		h.probe(w, r, "ok: bundle "+h.engine.BundleID())
		return
	}
	ready, detail := rd.Ready()
	if !detailed {
		detail = "ok"
		if !ready {
			detail = "not ready"
		}
	}
	if !ready {
		h.probeStatus(w, r, http.StatusServiceUnavailable, detail)
		return
	}
	h.probe(w, r, detail)
}

func (h *Handler) probe(w http.ResponseWriter, r *http.Request, body string) {
	h.probeStatus(w, r, http.StatusOK, body)
}

func (h *Handler) probeStatus(w http.ResponseWriter, r *http.Request, code int, body string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		WriteStatus(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed", r.Method))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, body+"\n")
}

// logger is the request's logger: the one a platform adapter put in the
// context (carrying its request id), else the handler's own.
func (h *Handler) logger(r *http.Request) *zerolog.Logger {
	if l := zerolog.Ctx(r.Context()); l.GetLevel() != zerolog.Disabled {
		return l
	}
	return &h.log
}

// review answers a review request. Its log lines name the route as
// metrics do: never the path the caller sent.
func (h *Handler) review(w http.ResponseWriter, r *http.Request, route policy.Route, clusterName string, reader *countingReader) (result *engine.Result) {
	start := time.Now()
	log := h.logger(r)
	logLine := func(e *zerolog.Event) *zerolog.Event {
		if clusterName != "" {
			e = e.Str("cluster", clusterName)
		}
		return e.Str("route", h.routeLabel(route)).Str("bundle", h.engine.BundleID()).Float64("latency_ms", float64(time.Since(start).Microseconds())/1000)
	}
	// reject answers code with a Status saying message and returns its log
	// line, status set, for the caller to finish.
	reject := func(e *zerolog.Event, code int, message string) *zerolog.Event {
		WriteStatus(w, code, message)
		return e.Int("status", code)
	}

	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		reject(logLine(log.Warn()), http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q not supported: send application/json", ct)).Msg("rejected review request")
		return
	}
	ctx, cancel, err := deadline(r)
	if err != nil {
		reject(logLine(log.Warn()), http.StatusBadRequest, err.Error()).Msg("rejected review request")
		return
	}
	defer cancel()
	if reader != nil {
		ctx = cluster.NewContext(ctx, reader)
	}

	tooLarge := func() {
		reject(logLine(log.Warn()), http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes)).Msg("rejected review request")
	}
	if r.ContentLength > MaxBodyBytes {
		tooLarge()
		return
	}
	shed := func(what string) {
		w.Header().Set("Retry-After", retryAfterSeconds)
		reject(logLine(log.Warn()), http.StatusTooManyRequests, "too many reviews in flight: retry later").Msg("review shed: " + what)
	}
	timedOut := func(stage string) {
		reject(logLine(log.Warn()), http.StatusGatewayTimeout, "review did not finish before the deadline: "+stage).Str("stage", stage).Msg("review timed out")
	}

	buf := h.bodies.Get().(*bytes.Buffer)
	buf.Reset()
	defer h.putBody(buf)
	held, err := h.readBody(ctx, w, r, buf)
	defer h.releaseBytes(held)
	if err != nil {
		var mbe *http.MaxBytesError
		var slow *slowBodyError
		switch {
		case errors.As(err, &mbe):
			tooLarge()
		case errors.Is(err, errNoBytes):
			shed("too many body bytes in flight")
		case errors.As(err, &slow):
			// The connection ends with the request: what is left of the
			// body is not read.
			w.Header().Set("Connection", "close")
			reject(logLine(log.Warn()), http.StatusRequestTimeout, slow.Error()).Int64("bytes", slow.received).Msg("rejected review request: slow body")
		case ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded):
			timedOut("the request body was still arriving")
		default:
			reject(logLine(log.Warn()), http.StatusBadRequest, "could not read request body").Msg("rejected review request")
		}
		return
	}
	if ctx.Err() != nil {
		timedOut("the request body arrived too late")
		return
	}
	if !h.admit() {
		shed("too many in flight")
		return
	}
	defer h.release()
	body := buf.Bytes()
	req, err := review.Decode(body)
	if err != nil {
		reject(logLine(log.Warn()), http.StatusBadRequest, err.Error()).Str("error", err.Error()).Msg("rejected review request")
		return
	}
	if ctx.Err() != nil {
		timedOut("decoding the request took too long")
		return
	}

	fields := func(e *zerolog.Event) *zerolog.Event {
		return logLine(e).Str("uid", string(req.UID)).
			Str("kind", req.Kind.Group+"/"+req.Kind.Version+"/"+req.Kind.Kind).
			Str("resource", req.Resource.Resource).Str("subresource", req.SubResource).
			Str("namespace", req.Namespace).Str("name", req.Name).
			Str("operation", string(req.Operation)).Bool("dry_run", req.DryRun != nil && *req.DryRun)
	}
	defer func() {
		if p := recover(); p != nil {
			reject(fields(log.Error()), http.StatusInternalServerError, fmt.Sprintf("internal error reviewing request %s", req.UID)).
				Str("panic", panicText(p)).Str("stack", string(debug.Stack())).Msg("review panicked")
		}
	}()

	res, err := h.engine.Review(ctx, route, req)
	switch {
	case errors.Is(err, engine.ErrUnknownRoute):
		reject(fields(log.Warn()), http.StatusNotFound, fmt.Sprintf("no policy group %q in the current bundle: re-render the webhook configurations", route.Path())).Str("requested_route", clip(route.Path(), 128)).
			Str("route_state", string(engine.RouteUnknown)).Msg("configuration drift: the webhook configuration names a group the bundle does not have")
		return
	case errors.Is(err, engine.ErrRetiredRoute):
		reject(fields(log.Warn()), http.StatusNotFound, fmt.Sprintf("policy group %q was retired by a later bundle and its transition is over: apply the webhook configurations rendered for the current bundle", route.Path())).Str("requested_route", route.Path()).
			Str("route_state", string(engine.RouteEnded)).Err(err).Msg("configuration drift: the webhook configuration names a retired group")
		return
	case errors.Is(err, engine.ErrNoBundle):
		reason := "the policy store could not be read"
		var nb *engine.NoBundleError
		if errors.As(err, &nb) {
			reason = nb.Reason
		}
		reject(fields(log.Error()), http.StatusServiceUnavailable, fmt.Sprintf("no policy bundle is loaded yet, so request %s cannot be reviewed: %s (see the function's logs and /readyz)", req.UID, reason)).Msg("no policy bundle loaded")
		return
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		reject(fields(log.Warn()), http.StatusGatewayTimeout, fmt.Sprintf("review of request %s did not finish before the deadline", req.UID)).Msg("review timed out")
		return
	case err != nil:
		reject(fields(log.Error()), http.StatusInternalServerError, fmt.Sprintf("internal error reviewing request %s", req.UID)).Err(err).Msg("review failed")
		return
	}

	out, err := review.Encode(req.APIVersion, res.Response)
	if err != nil {
		reject(fields(log.Error()), http.StatusInternalServerError, fmt.Sprintf("internal error encoding the response to request %s", req.UID)).Err(err).Msg("encode response")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)

	decision := "allowed"
	if !res.Response.Allowed {
		decision = "denied"
	}
	line := fields(log.Info())
	if h.routeState(route) == engine.RouteRetired {
		// Answered with the bundle that had the route: the cluster's
		// webhook configuration predates the bundle serving.
		line = line.Str("route_state", string(engine.RouteRetired))
	}
	if reader != nil {
		if n := reader.errors.Load(); n > 0 {
			line = line.Int32("cluster_read_errors", n)
		}
	}
	if res.Idle {
		// No binding acted: kube-apiserver called for nothing.
		line = line.Bool("idle", true)
	}
	line.Int("status", http.StatusOK).Str("decision", decision).
		Strs("failed_policies", res.FailedPolicies).Int("warnings", len(res.Response.Warnings)).
		Bool("patched", len(res.Response.Patch) > 0).
		Msg("review")
	return res
}

// clip shortens s to at most n bytes, for caller-made strings in logs.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// panicText describes a panic without risking object contents in the logs:
// runtime errors (nil dereference, index out of range) say nothing of the
// data; any other value is named by its type only.
func panicText(p any) string {
	if re, ok := p.(runtime.Error); ok {
		return re.Error()
	}
	return fmt.Sprintf("panic value of type %T", p)
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// deadline derives the review's context from kube-apiserver's ?timeout=
// (the webhook's timeoutSeconds): the answer must leave before the caller
// gives up, so a margin is kept: a tenth of it, and at least minMargin.
func deadline(r *http.Request) (context.Context, context.CancelFunc, error) {
	d := maxTimeout // kube-apiserver always sends ?timeout=; other callers get the webhook maximum
	if raw := r.URL.Query().Get("timeout"); raw != "" {
		var err error
		if d, err = time.ParseDuration(raw); err != nil || d <= 0 {
			return nil, nil, fmt.Errorf("invalid timeout %q: want a positive duration such as 10s", raw)
		}
	}
	d = min(d, maxTimeout)
	ctx, cancel := context.WithTimeout(r.Context(), d-min(max(d/10, minMargin), d/2))
	return ctx, cancel, nil
}

// WriteStatus answers with a metav1.Status error body: the shape of every
// transport-level error, on every platform.
func WriteStatus(w http.ResponseWriter, code int, message string) {
	body, _ := json.Marshal(status(code, message)) // a plain struct: cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(body)
}

// status is the metav1.Status body of a transport-level error (400, 404,
// 500…): kube-apiserver treats any non-200 answer as a failed call and hands
// it to the webhook's failurePolicy, quoting the message in its error.
func status(code int, message string) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reasonForCode(code),
		Code:     int32(code),
	}
}

func reasonForCode(code int) metav1.StatusReason {
	switch code {
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusUnauthorized:
		return metav1.StatusReasonUnauthorized
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusMethodNotAllowed:
		return metav1.StatusReasonMethodNotAllowed
	case http.StatusUnsupportedMediaType:
		return metav1.StatusReasonUnsupportedMediaType
	case http.StatusRequestEntityTooLarge:
		return metav1.StatusReasonRequestEntityTooLarge
	case http.StatusTooManyRequests:
		return metav1.StatusReasonTooManyRequests
	case http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return metav1.StatusReasonTimeout
	case http.StatusServiceUnavailable:
		return metav1.StatusReasonServiceUnavailable
	default:
		return metav1.StatusReasonInternalError
	}
}

// putBody keeps body buffers of up to 64 KiB for the next reviews: a rare
// large review does not pin its memory.
func (h *Handler) putBody(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		h.bodies.Put(b)
	}
}
