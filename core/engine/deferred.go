package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/internal/parallel"
	"github.com/admitfn/admitfn/core/mutate"
	"github.com/admitfn/admitfn/core/policy"
)

// pending is what NewDeferred left to compile.
type pending struct {
	// all compiles each policy, in bundle order, and returns its errors.
	all        []func() policy.Errors
	validators map[string]*onUse[validating.Validator]
	// mutators are filled into a route's hooks before each dispatch:
	// upstream's dispatcher reads an evaluator's fields, not methods.
	mutators map[string]*onUse[mutating.PolicyEvaluator]
	// firstReview is closed when the first review ends.
	firstReview     chan struct{}
	firstReviewOnce sync.Once
	// left counts the policies not compiled yet.
	left atomic.Int64
}

// onUse compiles one policy the first time its evaluator is asked for.
type onUse[E any] struct {
	once    sync.Once
	done    atomic.Bool
	compile func() policy.Errors
	e       E
	errs    policy.Errors
}

func newOnUse[P metav1.Object, E any](left *atomic.Int64, b *policy.Set, kind string, p P, compile func(P) (E, []*celeval.ExpressionError)) *onUse[E] {
	u := &onUse[E]{}
	left.Add(1)
	name := p.GetName()
	u.compile = func() policy.Errors {
		u.once.Do(func() {
			var errs []*celeval.ExpressionError
			u.e, errs = compile(p)
			for _, fe := range errs {
				u.errs = append(u.errs, policy.AtOrigin(b.Origin(kind, name), fmt.Errorf("%s: policy %s: %s", b.Origin(kind, name).File, name, fe.Error())))
			}
			left.Add(-1)
			u.done.Store(true)
		})
		return u.errs
	}
	return u
}

func (u *onUse[E]) get() E {
	u.compile()
	return u.e
}

// prepare compiles, on every CPU, the policies of hooks (a review's
// candidates) not compiled yet, which the dispatcher would otherwise
// compile one after another.
func prepare[E, H any](p *pending, policies map[string]*onUse[E], hooks []H, name func(H) string) {
	if p.left.Load() == 0 {
		return
	}
	var todo []func() policy.Errors
	for _, h := range hooks {
		if u := policies[name(h)]; !u.done.Load() {
			todo = append(todo, u.compile)
		}
	}
	if len(todo) > 1 {
		parallel.Map(todo, func(compile func() policy.Errors) policy.Errors { return compile() })
	}
}

func (p *pending) reviewed() {
	p.firstReviewOnce.Do(func() { close(p.firstReview) })
}

// Reviewed is closed once a review has ended: what a background
// CompileAll can wait for, so as not to slow a cold start's first review.
// Already closed for an engine from New.
func (e *Engine) Reviewed() <-chan struct{} {
	if e.deferred == nil {
		return closed
	}
	return e.deferred.firstReview
}

var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// compiled is hooks with their policies' evaluators, compiled now if need be.
func (p *pending) compiled(hooks []mutate.Hook) []mutate.Hook {
	out := make([]mutate.Hook, len(hooks))
	for i, h := range hooks {
		h.Evaluator = p.mutators[h.Policy.Name].get()
		out[i] = h
	}
	return out
}

// lazyValidator is a validating policy compiled on its first review.
type lazyValidator struct {
	*onUse[validating.Validator]
}

func (v *lazyValidator) Validate(ctx context.Context, matchedResource schema.GroupVersionResource, versionedAttr *admission.VersionedAttributes, versionedParams runtime.Object, namespace *corev1.Namespace, runtimeCELCostBudget int64, authz authorizer.UnconditionalAuthorizer) validating.ValidateResult {
	return v.get().Validate(ctx, matchedResource, versionedAttr, versionedParams, namespace, runtimeCELCostBudget, authz)
}

func (v *lazyValidator) CompileError() error { return v.get().CompileError() }

// CompileAll compiles every policy a deferred engine (NewDeferred) has not
// compiled yet, one at a time, and returns the compile errors of all of
// them: each such policy fails by its failurePolicy. Reviews may run
// meanwhile; one that needs a policy being compiled waits for that one. It
// does nothing for an engine from New.
func (e *Engine) CompileAll() error {
	if e.deferred == nil {
		return nil
	}
	var errs policy.Errors
	for _, compile := range e.deferred.all {
		errs = append(errs, compile()...)
	}
	if len(errs) > 0 {
		return errs.Capped()
	}
	return nil
}

// Uncompiled counts the policies of a deferred engine (NewDeferred) not
// compiled yet; 0 for an engine from New.
func (e *Engine) Uncompiled() int {
	if e.deferred == nil {
		return 0
	}
	return int(e.deferred.left.Load())
}
