// Package outcome is what the validating and the mutating dispatchers
// record of a review beside their decision, for its log line and metrics:
// which policies failed (names only: messages may quote object contents)
// and whether any binding acted; and the error that marks a failure of the
// machinery rather than a decision.
package outcome

import (
	"context"
	"errors"
	"slices"
)

// ErrInternal marks a failure of the evaluation machinery itself (not a
// policy decision): the caller must answer with an error, so the webhook's
// failurePolicy decides.
var ErrInternal = errors.New("internal error evaluating policies")

type traceKey struct{}

// Trace records which policies failed a review, and whether any binding
// acted: was evaluated past its match conditions.
type Trace struct {
	failed []string
	acted  bool
}

// WithTrace returns ctx carrying a new Trace, and the Trace.
func WithTrace(ctx context.Context) (context.Context, *Trace) {
	t := &Trace{}
	return context.WithValue(ctx, traceKey{}, t), t
}

// Failure records that policy failed, once, if ctx carries a Trace.
func Failure(ctx context.Context, policy string) {
	if t, ok := ctx.Value(traceKey{}).(*Trace); ok && !slices.Contains(t.failed, policy) {
		t.failed = append(t.failed, policy)
	}
}

// Acted records that a binding acted on the review, if ctx carries a
// Trace.
func Acted(ctx context.Context) {
	if t, ok := ctx.Value(traceKey{}).(*Trace); ok {
		t.acted = true
	}
}

// Failed lists the failed policies in the order they failed.
func (t *Trace) Failed() []string { return t.failed }

// Acted reports whether a binding acted: its policy was evaluated past its
// match conditions (a validation, an audit annotation or an error), or a
// mutation ran.
func (t *Trace) Acted() bool { return t.acted }
