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
	// withoutVariables compiles every policy that declares no variables:
	// it stores none, so they can share it, and its environments (built
	// for each combination of optional variables) are built once, not for
	// each policy, which is most of the time and memory compiling takes.
	withoutVariables func() (*plugincel.CompositedCompiler, error)
}

// NewCompiler returns a compiler on the base environment kube-apiserver's
// ValidatingAdmissionPolicy plugin uses (built once per process upstream).
func NewCompiler() *Compiler {
	env := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	return &Compiler{env: env, withoutVariables: sync.OnceValues(func() (*plugincel.CompositedCompiler, error) {
		return plugincel.NewCompositedCompiler(env)
	})}
}

// Compile compiles every expression of p, the way kube-apiserver validates a
// new policy (environment.NewExpressions: only what a create would accept) and
// then compiles it for evaluation. All errors are returned, each with its
// field path. It is safe for concurrent use.
func (c *Compiler) Compile(p *admissionregistrationv1.ValidatingAdmissionPolicy) (validating.Validator, []*ExpressionError) {
	hasParams := p.Spec.ParamKind != nil
	vars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	messageVars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: false}
	const mode = environment.NewExpressions

	newCompiler := func() (*plugincel.CompositedCompiler, error) { return plugincel.NewCompositedCompiler(c.env) }
	if len(p.Spec.Variables) == 0 {
		newCompiler = c.withoutVariables
	}
	compiler, err := newCompiler()
	if err != nil {
		return nil, []*ExpressionError{{Field: "spec", Err: err}}
	}
	var errs []*ExpressionError
	check := func(r plugincel.CompilationResult, fld *field.Path) {
		if r.Error != nil {
			errs = append(errs, &ExpressionError{Field: fld.String(), Err: r.Error})
		}
	}
	spec := field.NewPath("spec")

	for i, v := range p.Spec.Variables {
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, vars, mode)
		check(r, spec.Child("variables").Index(i).Child("expression"))
	}

	var conditions []*condition
	compileAll := func(accessors []plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, fld func(int) *field.Path) *condition {
		cond := &condition{compiler: compiler, results: make([]plugincel.CompilationResult, len(accessors))}
		conditions = append(conditions, cond)
		for i, a := range accessors {
			if a == nil {
				continue
			}
			cond.results[i] = compiler.CompileCELExpression(a, opts, mode)
			check(cond.results[i], fld(i))
		}
		return cond
	}

	var matcher matchconditions.Matcher
	if n := len(p.Spec.MatchConditions); n > 0 {
		accessors := make([]plugincel.ExpressionAccessor, n)
		for i := range p.Spec.MatchConditions {
			accessors[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		cond := compileAll(accessors, vars, func(i int) *field.Path { return spec.Child("matchConditions").Index(i).Child("expression") })
		matcher = matchconditions.NewMatcher(cond, p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}

	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	annotations := make([]plugincel.ExpressionAccessor, len(p.Spec.AuditAnnotations))
	for i, a := range p.Spec.AuditAnnotations {
		annotations[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}

	validator := validating.NewValidator(
		compileAll(validations, vars, func(i int) *field.Path { return spec.Child("validations").Index(i).Child("expression") }),
		matcher,
		compileAll(annotations, vars, func(i int) *field.Path { return spec.Child("auditAnnotations").Index(i).Child("valueExpression") }),
		compileAll(messages, messageVars, func(i int) *field.Path { return spec.Child("validations").Index(i).Child("messageExpression") }),
		p.Spec.FailurePolicy,
		nil,
	)
	releaseEnvironments(compiler, conditions)
	return validator, errs
}

// releaseEnvironments lets the conditions keep only what evaluation needs of
// the compiler: its stored variables. Upstream's compiler also holds a CEL
// environment for each combination of optional variables, eight of them,
// with their type checkers: more than half of a compiled policy's memory,
// used only to compile.
func releaseEnvironments(compiler *plugincel.CompositedCompiler, conditions []*condition) {
	kept := *compiler
	kept.Compiler, kept.ConditionCompiler, kept.MutatingCompiler = nil, nil, nil
	for _, c := range conditions {
		c.compiler = &kept
	}
}

// ExpressionError is a CEL expression that does not compile. Its text is the
// field path followed by the compiler's own message, caret line included.
type ExpressionError struct {
	Field string
	Err   error
}

func (e *ExpressionError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *ExpressionError) Unwrap() error { return e.Err }

// EnvSet is the compiler's CEL environment, shared with the mutate package.
func (c *Compiler) EnvSet() *environment.EnvSet { return c.env }
