package celeval

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	celcommon "k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/admitfn/admitfn/core/celeval/internal/cost"
	"github.com/admitfn/admitfn/core/celeval/internal/objectval"
)

// condition is a plugincel.ConditionEvaluator over programs compiled by
// kube-apiserver's own compiler. It differs from upstream's in what it
// shares, never in what it decides: the CEL values of `request` (and of
// namespaceObject) and of the objects are built once per review and shared
// by every policy, binding and param, and a policy's variables are
// evaluated once per policy evaluation (variables.go). Budget accounting and
// error texts are upstream's
// (k8s.io/apiserver/pkg/admission/plugin/cel/activation.go).
type condition struct {
	vars    *Variables
	results []plugincel.CompilationResult
	// bound is set for a set in a budget chain (BudgetChain), which may be
	// evaluated without cost tracking (costbound.go); evaluated counts
	// evaluations up to the first, which is always tracked.
	bound     *setBound
	evaluated atomic.Bool
	// mutation: a mutation's expression, which upstream evaluates without
	// switching the objects to their Go types (plugincel.mutation.go).
	mutation bool
	// typedParams: a MutatingAdmissionPolicy's expression (paramsValue).
	typedParams bool
}

var _ plugincel.ConditionEvaluator = (*condition)(nil)

func (c *condition) ForInput(ctx context.Context, versionedAttr *admission.VersionedAttributes, request *admissionv1.AdmissionRequest, inputs plugincel.OptionalVariableBindings, namespace *corev1.Namespace, runtimeCELCostBudget int64) ([]plugincel.EvaluationResult, int64, error) {
	if len(c.results) == 0 {
		return []plugincel.EvaluationResult{}, runtimeCELCostBudget, nil
	}
	// Past the review's deadline nothing more is evaluated: the caller has
	// stopped waiting and the review answers with an error whatever the
	// policies would say (see the engine).
	if err := deadlinePassed(ctx); err != nil {
		return nil, -1, err
	}
	if !c.mutation {
		// Upstream's condition evaluator reads built-in kinds through their
		// Go types from here on, for every later evaluation on these
		// objects, mutations included (plugincel.newActivation with
		// useSchemalessTypeRef; internal/objectval).
		//nolint:staticcheck // upstream's own switch, set as it sets it.
		versionedAttr.VersionedObject.UseSchemalessTypeRef = true
		//nolint:staticcheck // as above.
		versionedAttr.VersionedOldObject.UseSchemalessTypeRef = true
	}
	act, err := newActivation(versionedAttr, request, inputs, namespace, c.typedParams)
	if err != nil {
		return nil, -1, err
	}
	compositionCtx := &composition{Context: ctx, vars: c.vars, longest: -1}
	if attrs, ok := versionedAttr.Attributes.(*Attributes); ok {
		compositionCtx.memo = attrs.variableMemo(c.vars, versionedAttr, inputs.VersionedParams, namespace)
	}
	act.composition = compositionCtx

	evaluations := make([]plugincel.EvaluationResult, len(c.results))
	if bound, ok := c.untracked(versionedAttr, inputs, namespace, runtimeCELCostBudget); ok {
		compositionCtx.untracked = true
		compositionCtx.uninterrupted = bound <= uninterruptedBelow
		failed := false
		for i, result := range c.results {
			if err := deadlinePassed(ctx); err != nil {
				return nil, -1, err
			}
			evaluations[i] = evaluateUntracked(compositionCtx, act, result)
			failed = failed || evaluations[i].Error != nil
		}
		if !failed {
			// The true remaining budget is at least this; only a tail
			// within its own bound is given it (setBound).
			return evaluations, runtimeCELCostBudget - int64(bound), nil
		}
		// An error's text can depend on the cost observer (a cost
		// function that fails on arguments of the wrong type is what
		// reports them, in upstream's words): errors are rare, so the
		// set is evaluated again, tracked, for upstream's.
		compositionCtx = &composition{Context: ctx, vars: c.vars, memo: compositionCtx.memo, longest: -1}
		act.composition, act.variables = compositionCtx, nil
	}
	compositionCtx.longest = longestList(versionedAttr, inputs, namespace)
	remaining := runtimeCELCostBudget
	for i, result := range c.results {
		if err := deadlinePassed(ctx); err != nil {
			return nil, -1, err
		}
		evaluations[i], remaining, err = evaluate(compositionCtx, act, result, remaining)
		if err != nil {
			return nil, -1, err
		}
	}
	return evaluations, remaining, nil
}

// untracked decides whether c is evaluated without cost tracking on this
// input: it is in a budget chain, has been evaluated before (a function
// that answers one review and stops should not plan programs it will not
// reuse), its inputs are measured, and what it and its tail may cost at
// their size fits in the budget, each expression within its per-call
// limit. costBound is c's bound, which the remaining budget it returns is
// lowered by.
func (c *condition) untracked(versionedAttr *admission.VersionedAttributes, inputs plugincel.OptionalVariableBindings, namespace *corev1.Namespace, budget int64) (costBound uint64, ok bool) {
	if c.bound == nil || budget <= 0 || !c.evaluated.Load() {
		if c.bound != nil {
			c.evaluated.Store(true)
		}
		return 0, false
	}
	attrs, isOurs := versionedAttr.Attributes.(*Attributes)
	if !isOurs {
		return 0, false
	}
	size, measured := attrs.inputSize(versionedAttr, inputs.VersionedParams, namespace)
	if !measured {
		return 0, false
	}
	k := cost.ClassOf(size.l, size.t)
	if !k.Bounded() || c.need(k) > uint64(budget) {
		return 0, false
	}
	return c.costAt(k), true
}

// longestList is the longest list or map of a review's inputs (of its
// objects as received, on a mutating review), -1 when they are not
// measured.
func longestList(versionedAttr *admission.VersionedAttributes, inputs plugincel.OptionalVariableBindings, namespace *corev1.Namespace) int64 {
	attrs, ok := versionedAttr.Attributes.(*Attributes)
	if !ok {
		return -1
	}
	if !attrs.shareObjects {
		return attrs.reviewLongest()
	}
	size, measured := attrs.inputSize(versionedAttr, inputs.VersionedParams, namespace)
	if !measured || size.l > math.MaxInt64 {
		return -1
	}
	return int64(size.l)
}

func deadlinePassed(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("review deadline passed, expressions not evaluated: %w", err)
	}
	return nil
}

func (c *condition) CompilationErrors() []error {
	var errs []error
	for _, r := range c.results {
		if r.Error != nil {
			errs = append(errs, r.Error)
		}
	}
	return errs
}

// activation resolves the admission CEL variables. `authorizer` resolves
// only on a review for a cluster the function reads (ReviewAuthorizer);
// otherwise an expression that uses it fails and follows failurePolicy.
type activation struct {
	object, oldObject, params, request, namespace any
	authorizer, requestResourceAuthorizer         any

	// variables is built when an expression first reads it: most policies'
	// expressions never do, and upstream's value (a lazy map with a callback
	// for each of the policy's variables) costs a few allocations each time.
	// Building it evaluates nothing, so when it is built changes nothing.
	composition *composition
	variables   ref.Val
}

func (a *activation) variablesValue() ref.Val {
	if a.variables == nil && a.composition != nil {
		a.variables = a.composition.Variables(a)
	}
	return a.variables
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case plugincel.ObjectVarName:
		return a.object, true
	case plugincel.OldObjectVarName:
		return a.oldObject, true
	case plugincel.ParamsVarName:
		return a.params, true
	case plugincel.RequestVarName:
		return a.request, true
	case plugincel.NamespaceVarName:
		return a.namespace, true
	case plugincel.AuthorizerVarName:
		return a.authorizer, a.authorizer != nil
	case plugincel.RequestResourceAuthorizerVarName:
		return a.requestResourceAuthorizer, a.requestResourceAuthorizer != nil
	case plugincel.VariableVarName:
		return a.variablesValue(), true
	default:
		return nil, false
	}
}

func (a *activation) Parent() interpreter.Activation { return nil }

func newActivation(versionedAttr *admission.VersionedAttributes, request *admissionv1.AdmissionRequest, inputs plugincel.OptionalVariableBindings, namespace *corev1.Namespace, typedParams bool) (*activation, error) {
	var err error
	act := &activation{}
	if inputs.VersionedParams != nil {
		act.params = paramsValue(inputs.VersionedParams, typedParams)
	}
	if inputs.Authorizer != nil {
		act.authorizer = library.NewAuthorizerVal(versionedAttr.GetUserInfo(), inputs.Authorizer)
		act.requestResourceAuthorizer = library.NewResourceAuthorizerVal(versionedAttr.GetUserInfo(), inputs.Authorizer, versionedAttr)
	}
	if attrs, ok := versionedAttr.Attributes.(*Attributes); ok {
		// A validating review's objects have one CEL value each, shared by
		// every policy and binding (celObject).
		if act.oldObject, err = attrs.celObject(&versionedAttr.VersionedOldObject, &attrs.oldObject); err != nil {
			return nil, fmt.Errorf("failed to prepare oldObject variable for evaluation: %w", err)
		}
		if act.object, err = attrs.celObject(&versionedAttr.VersionedObject, &attrs.object); err != nil {
			return nil, fmt.Errorf("failed to prepare object variable for evaluation: %w", err)
		}
		act.request = attrs.celRequest()
		if namespace != nil {
			act.namespace = attrs.celNamespace(namespace)
		}
		return act, nil
	}
	// Attributes from elsewhere: upstream's values. The versioned objects
	// keep theirs, so policies share the object's top-level conversion.
	if act.oldObject, err = versionedAttr.VersionedOldObject.CELValue(); err != nil {
		return nil, fmt.Errorf("failed to prepare oldObject variable for evaluation: %w", err)
	}
	if act.object, err = versionedAttr.VersionedObject.CELValue(); err != nil {
		return nil, fmt.Errorf("failed to prepare object variable for evaluation: %w", err)
	}
	act.request = celcommon.SchemalessTypedToVal(request)
	act.namespace = celcommon.SchemalessTypedToVal(namespace)
	return act, nil
}

// paramsValue is the CEL `params` as upstream's dispatchers give it.
// kube-apiserver's informers hold a built-in param kind (a ConfigMap) as its
// Go type, without apiVersion and kind. The validating dispatcher wraps it
// so that CEL reads it unstructured with the paramKind's apiVersion and
// kind (validating.wrappedParam), which is what the bundle's object is;
// the mutating dispatcher does not, so a MutatingAdmissionPolicy reads it
// through its Go type (internal/objectval), with no apiVersion or kind.
func paramsValue(p runtime.Object, typed bool) ref.Val {
	if u, ok := p.(*unstructured.Unstructured); ok && typed {
		if s := objectval.KindShape(u.GroupVersionKind()); s != nil {
			fields := make(map[string]any, len(u.Object))
			for k, v := range u.Object {
				if k != "apiVersion" && k != "kind" {
					fields[k] = v
				}
			}
			return objectval.Shaped(fields, s)
		}
	}
	return celcommon.SchemalessTypedToVal(p)
}

// evaluate mirrors upstream's evaluationActivation.Evaluate exactly: the same
// budget accounting (variables included), the same errors and texts.
func evaluate(compositionCtx *composition, act *activation, result plugincel.CompilationResult, remainingBudget int64) (plugincel.EvaluationResult, int64, error) {
	var evaluation plugincel.EvaluationResult
	if result.ExpressionAccessor == nil { // placeholder keeping indexes aligned
		return evaluation, remainingBudget, nil
	}
	evaluation.ExpressionAccessor = result.ExpressionAccessor
	if result.Error != nil {
		evaluation.Error = compilationError(result)
		return evaluation, remainingBudget, nil
	}
	if result.Program == nil {
		evaluation.Error = &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInternal,
			Detail: "unexpected internal error compiling expression",
		}
		return evaluation, remainingBudget, nil
	}
	start := time.Now()
	evalResult, rtCost, detailed, err := evalTracked(compositionCtx, compositionCtx.longest, act, result.Program)
	compositionCost := compositionCtx.GetAndResetCost()
	if compositionCost > remainingBudget {
		return evaluation, -1, outOfBudget()
	}
	remainingBudget -= compositionCost
	evaluation.Elapsed = time.Since(start)
	if !detailed {
		return evaluation, -1, &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInternal,
			Detail: fmt.Sprintf("runtime cost could not be calculated for expression: %v, no further expression will be run", result.ExpressionAccessor.GetExpression()),
		}
	}
	if rtCost == nil {
		return evaluation, -1, &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInvalid,
			Detail: fmt.Sprintf("runtime cost could not be calculated for expression: %v, no further expression will be run", result.ExpressionAccessor.GetExpression()),
			Cause:  apiservercel.ErrOutOfBudget,
		}
	}
	if *rtCost > math.MaxInt64 || int64(*rtCost) > remainingBudget {
		return evaluation, -1, outOfBudget()
	}
	remainingBudget -= int64(*rtCost)
	setResult(&evaluation, result, evalResult, err)
	return evaluation, remainingBudget, nil
}

func compilationError(result plugincel.CompilationResult) *apiservercel.Error {
	return &apiservercel.Error{
		Type:   apiservercel.ErrorTypeInvalid,
		Detail: fmt.Sprintf("compilation error: %v", result.Error),
		Cause:  result.Error,
	}
}

// setResult records an evaluation's value, or its error in upstream's
// words.
func setResult(evaluation *plugincel.EvaluationResult, result plugincel.CompilationResult, value ref.Val, err error) {
	if err != nil {
		evaluation.Error = &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInvalid,
			Detail: fmt.Sprintf("expression '%v' resulted in error: %v", result.ExpressionAccessor.GetExpression(), err),
		}
		return
	}
	evaluation.EvalResult = value
}

// evaluateUntracked is evaluate for a set proven within its budget and
// limits: the same results and errors, nothing priced.
func evaluateUntracked(compositionCtx *composition, act *activation, result plugincel.CompilationResult) plugincel.EvaluationResult {
	var evaluation plugincel.EvaluationResult
	if result.ExpressionAccessor == nil {
		return evaluation
	}
	evaluation.ExpressionAccessor = result.ExpressionAccessor
	if result.Error != nil {
		evaluation.Error = compilationError(result)
		return evaluation
	}
	start := time.Now()
	evalResult, err := evalUntracked(compositionCtx, untrackedOf(result), act)
	compositionCtx.GetAndResetCost()
	evaluation.Elapsed = time.Since(start)
	setResult(&evaluation, result, evalResult, err)
	return evaluation
}

// uninterruptedBelow is the cost bound at or under which an untracked
// condition set runs without the review's context. cel-go's ContextEval
// makes each evaluation a cancelable child of the context, for a
// comprehension to check every celconfig.CheckFrequency iterations, which
// for cheap expressions is a large part of their time. A set proven
// within one expression's per-call limit ends in milliseconds, and the
// deadline is checked before each of its expressions as before every
// other: past it the review answers with an error either way, so without
// the context it only gives up that much later.
var uninterruptedBelow uint64 = celconfig.PerCallLimit

// evalUntracked evaluates an untracked program of c's set: with c's
// context unless the set is uninterrupted.
func evalUntracked(c *composition, prog cel.Program, act any) (ref.Val, error) {
	if c.uninterrupted {
		v, _, err := prog.Eval(act)
		return v, err
	}
	v, _, err := prog.ContextEval(c, act)
	return v, err
}

func outOfBudget() error {
	return &apiservercel.Error{
		Type:   apiservercel.ErrorTypeInvalid,
		Detail: "validation failed due to running out of cost budget, no further validation rules will be run",
		Cause:  apiservercel.ErrOutOfBudget,
	}
}

// NewConditionEvaluator evaluates results (compiled with vars stored in
// their compiler) with admitfn's activation: the review's `request`
// shared, `authorizer` only on a review for a cluster the function reads. Nil accessors keep indexes aligned.
func NewConditionEvaluator(vars *Variables, results []plugincel.CompilationResult) plugincel.ConditionEvaluator {
	return newCondition(vars, results)
}

// NewMutatingConditionEvaluator is NewConditionEvaluator for a
// MutatingAdmissionPolicy's match conditions: its params are read as the
// mutating dispatcher gives them (paramsValue).
func NewMutatingConditionEvaluator(vars *Variables, results []plugincel.CompilationResult) plugincel.ConditionEvaluator {
	c := newCondition(vars, results)
	c.typedParams = true
	return c
}

func newCondition(vars *Variables, results []plugincel.CompilationResult) *condition {
	if vars == nil {
		vars = NewVariables()
	}
	return &condition{vars: vars, results: results}
}

// BudgetChain declares how upstream's validator passes the budget between
// condition sets built by NewConditionEvaluator: each set's remaining
// budget goes to the next, the last's is dropped (validations → messages;
// audit annotations and match conditions alone). Only sets in a chain may
// be evaluated without cost tracking, each when a bound proves that it and
// the sets after it stay within their limits and budget; a set whose
// remaining budget is used elsewhere must never be in one.
func BudgetChain(sets ...plugincel.ConditionEvaluator) {
	conds := make([]*condition, len(sets))
	for i, s := range sets {
		c, ok := s.(*condition)
		if !ok || c.bound != nil {
			panic("celeval.BudgetChain: a set not built by NewConditionEvaluator, or chained twice")
		}
		if slices.ContainsFunc(c.results, unboundable) {
			// Compiled to be tracked always (LinearCost): a set before it
			// could not hand it an exact remaining budget untracked.
			return
		}
		conds[i] = c
	}
	var next *condition
	for i := len(conds) - 1; i >= 0; i-- {
		c := conds[i]
		c.bound = &setBound{tail: next}
		next = c
	}
}

// unboundable: r's program is compiled never to be evaluated untracked.
func unboundable(r plugincel.CompilationResult) bool {
	p, ok := r.Program.(*boundedProgram)
	return ok && p.noBounds
}

// NewMutatingEvaluator is NewConditionEvaluator for one mutation expression
// (an ApplyConfiguration or a JSONPatch), as upstream's patchers call it.
func NewMutatingEvaluator(vars *Variables, result plugincel.CompilationResult) plugincel.MutatingEvaluator {
	c := newCondition(vars, []plugincel.CompilationResult{result})
	c.mutation, c.typedParams = true, true
	return mutatingEvaluator{c}
}

type mutatingEvaluator struct{ *condition }

func (m mutatingEvaluator) ForInput(ctx context.Context, versionedAttr *admission.VersionedAttributes, request *admissionv1.AdmissionRequest, inputs plugincel.OptionalVariableBindings, namespace *corev1.Namespace, runtimeCELCostBudget int64) (plugincel.EvaluationResult, int64, error) {
	evaluations, remaining, err := m.condition.ForInput(ctx, versionedAttr, request, inputs, namespace, runtimeCELCostBudget)
	if err != nil {
		return plugincel.EvaluationResult{}, -1, err
	}
	return evaluations[0], remaining, nil
}
