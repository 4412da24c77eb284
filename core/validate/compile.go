// Package validate turns ValidatingAdmissionPolicies into decisions with
// kube-apiserver's own building blocks: its CEL compiler and environment, its
// validator (k8s.io/apiserver/pkg/admission/plugin/policy/validating) and its
// dispatcher, which owns matching, params, failurePolicy, validationActions,
// messages and audit annotations.
package validate

import (
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Compiler compiles policies against the base CEL environment of the
// Kubernetes version admitfn tracks, at the compatibility version a
// kube-apiserver of that version uses.
type Compiler struct {
	env *environment.EnvSet
	// envs are the environments upstream's compiler declares for each
	// combination of optional variables, built once each, on first use.
	envs map[plugincel.OptionalVariableDeclarations]func() (*environment.EnvSet, error)
	// shared compile the policies that declare no variables: such a policy
	// stores nothing in its compiler, so one per combination serves all.
	shared map[plugincel.OptionalVariableDeclarations]func() (*plugincel.CompositedCompiler, error)
}

// NewCompiler returns a compiler on the base environment kube-apiserver's
// ValidatingAdmissionPolicy plugin uses (built once per process upstream).
func NewCompiler() *Compiler {
	c := &Compiler{
		env:    boundedBase(),
		envs:   map[plugincel.OptionalVariableDeclarations]func() (*environment.EnvSet, error){},
		shared: map[plugincel.OptionalVariableDeclarations]func() (*plugincel.CompositedCompiler, error){},
	}
	add := func(opts plugincel.OptionalVariableDeclarations, env func() (*environment.EnvSet, error)) {
		env = sync.OnceValues(env)
		c.envs[opts] = env
		c.shared[opts] = sync.OnceValues(func() (*plugincel.CompositedCompiler, error) { return composited(env, opts) })
	}
	for _, params := range []bool{false, true} {
		for _, authorizer := range []bool{false, true} {
			opts := plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: authorizer}
			add(opts, func() (*environment.EnvSet, error) { return envFor(c.env, opts) })
			patch := opts
			patch.HasPatchTypes = true
			add(patch, func() (*environment.EnvSet, error) { return withPatchTypes(c.envs[opts]) })
		}
	}
	return c
}

// Compile compiles every expression of p, the way kube-apiserver validates a
// new policy (environment.NewExpressions: only what a create would accept) and
// then compiles it for evaluation. All errors are returned, each with its
// field path. It is safe for concurrent use.
func (c *Compiler) Compile(p *admissionregistrationv1.ValidatingAdmissionPolicy) (validating.Validator, []*ExpressionError) {
	return compile(c.ForPolicy(len(p.Spec.Variables) > 0), p)
}

func compile(compiler PolicyCompiler, p *admissionregistrationv1.ValidatingAdmissionPolicy) (validating.Validator, []*ExpressionError) {
	sets, errs := compileSets(compiler, p)
	return sets.validator(p), errs
}

// conditionSets are a policy's compiled expressions, one evaluator for each
// set upstream's validator evaluates (matchConditions is nil when the
// policy has none).
type conditionSets struct {
	matchConditions, validations, annotations, messages plugincel.ConditionEvaluator
}

func (s conditionSets) validator(p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	var matcher matchconditions.Matcher
	if s.matchConditions != nil {
		matcher = matchconditions.NewMatcher(s.matchConditions, p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	return validating.NewValidator(s.validations, matcher, s.annotations, s.messages, p.Spec.FailurePolicy, nil)
}

func compileSets(compiler PolicyCompiler, p *admissionregistrationv1.ValidatingAdmissionPolicy) (conditionSets, []*ExpressionError) {
	hasParams := p.Spec.ParamKind != nil
	vars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	messageVars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: false}
	const mode = environment.NewExpressions

	var errs []*ExpressionError
	check := func(r plugincel.CompilationResult, fld *field.Path) {
		if r.Error != nil {
			errs = append(errs, &ExpressionError{Field: fld.String(), Err: r.Error})
		}
	}
	spec := field.NewPath("spec")

	variables := NewVariables()
	for i, v := range p.Spec.Variables {
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, vars, mode)
		check(r, spec.Child("variables").Index(i).Child("expression"))
		variables.Add(v.Name, r)
	}

	compileAll := func(accessors []plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, fld func(int) *field.Path) *condition {
		cond := newCondition(variables, make([]plugincel.CompilationResult, len(accessors)))
		for i, a := range accessors {
			if a == nil {
				continue
			}
			cond.results[i] = compiler.CompileCELExpression(a, opts, mode)
			check(cond.results[i], fld(i))
		}
		return cond
	}

	x := expressionsOf(p)
	var sets conditionSets
	if len(x.matchConditions) > 0 {
		sets.matchConditions = compileAll(x.matchConditions, vars, func(i int) *field.Path { return spec.Child("matchConditions").Index(i).Child("expression") })
	}
	sets.validations = compileAll(x.validations, vars, func(i int) *field.Path { return spec.Child("validations").Index(i).Child("expression") })
	sets.annotations = compileAll(x.annotations, vars, func(i int) *field.Path { return spec.Child("auditAnnotations").Index(i).Child("valueExpression") })
	sets.messages = compileAll(x.messages, messageVars, func(i int) *field.Path { return spec.Child("validations").Index(i).Child("messageExpression") })
	return sets, errs
}

// expressions are a policy's CEL expressions as upstream's compilers take
// them; a validation without messageExpression has a nil message.
type expressions struct {
	matchConditions, validations, messages, annotations []plugincel.ExpressionAccessor
}

func expressionsOf(p *admissionregistrationv1.ValidatingAdmissionPolicy) expressions {
	var x expressions
	for i := range p.Spec.MatchConditions {
		x.matchConditions = append(x.matchConditions, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	x.validations = make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	x.messages = make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		x.validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			x.messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	x.annotations = make([]plugincel.ExpressionAccessor, len(p.Spec.AuditAnnotations))
	for i, a := range p.Spec.AuditAnnotations {
		x.annotations[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return x
}

// CompileUpstream compiles p exactly as kube-apiserver's
// ValidatingAdmissionPolicy plugin does (validating.compilePolicy): its own
// compiler per policy and its condition evaluator, which converts the
// request for CEL on every call. It is the baseline admitfn's evaluation is
// measured against (make bench, P2); compile errors are in the validator.
func (c *Compiler) CompileUpstream(p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	sets, err := c.upstreamSets(p)
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, p.Spec.FailurePolicy, err)
	}
	return sets.validator(p)
}

func (c *Compiler) upstreamSets(p *admissionregistrationv1.ValidatingAdmissionPolicy) (conditionSets, error) {
	vars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	messageVars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil}
	const mode = environment.StoredExpressions
	compiler, err := plugincel.NewCompositedCompiler(c.env)
	if err != nil {
		return conditionSets{}, err
	}
	for _, v := range p.Spec.Variables {
		compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, vars, mode)
	}
	x := expressionsOf(p)
	var sets conditionSets
	if len(x.matchConditions) > 0 {
		sets.matchConditions = compiler.CompileCondition(x.matchConditions, vars, mode)
	}
	sets.validations = compiler.CompileCondition(x.validations, vars, mode)
	sets.annotations = compiler.CompileCondition(x.annotations, vars, mode)
	sets.messages = compiler.CompileCondition(x.messages, messageVars, mode)
	return sets, nil
}

// ExpressionError is a CEL expression that does not compile. Its text is the
// field path followed by the compiler's own message, caret line included.
type ExpressionError struct {
	Field string
	Err   error
}

func (e *ExpressionError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *ExpressionError) Unwrap() error { return e.Err }
