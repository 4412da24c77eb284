// Package gcf serves a Google Cloud Functions (gen2) HTTP function with the
// shared http.Handler: requests arrive through functions-framework-go, and
// each one's log lines carry the Cloud Logging trace, span and execution id
// the framework found on it.
package gcf

import (
	"net/http"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/rs/zerolog"
)

// Cloud Logging's special fields for structured log lines.
const (
	TraceField  = "logging.googleapis.com/trace"
	SpanField   = "logging.googleapis.com/spanId"
	LabelsField = "logging.googleapis.com/labels"
)

// Handler puts a logger carrying the request's trace in its context and
// hands the request to the shared handler.
type Handler struct {
	next    http.Handler
	log     zerolog.Logger
	project string
}

var _ http.Handler = (*Handler)(nil)

// New returns a handler serving next. project is the Google Cloud project
// the function runs in: Cloud Logging links a line to its trace by the
// trace's full name, projects/<project>/traces/<id>; without a project the
// bare id is logged.
func New(next http.Handler, log zerolog.Logger, project string) *Handler {
	return &Handler{next: next, log: log, project: project}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	lc := h.log.With()
	if trace := funcframework.TraceIDFromContext(ctx); trace != "" {
		if h.project != "" {
			trace = "projects/" + h.project + "/traces/" + trace
		}
		lc = lc.Str(TraceField, trace)
	}
	if span := funcframework.SpanIDFromContext(ctx); span != "" {
		lc = lc.Str(SpanField, span)
	}
	if id := funcframework.ExecutionIDFromContext(ctx); id != "" {
		lc = lc.Dict(LabelsField, zerolog.Dict().Str("execution_id", id))
	}
	log := lc.Logger()
	h.next.ServeHTTP(w, r.WithContext(log.WithContext(ctx)))
}
