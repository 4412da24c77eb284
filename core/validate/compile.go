// Package validate turns ValidatingAdmissionPolicies into decisions with
// kube-apiserver's own building blocks: its validator
// (k8s.io/apiserver/pkg/admission/plugin/policy/validating) over expressions
// compiled and evaluated by core/celeval, and its dispatcher, which owns
// matching, params, failurePolicy, validationActions, messages and audit
// annotations.
package validate

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/admitfn/admitfn/core/celeval"
)

// Compile compiles every expression of p, the way kube-apiserver validates a
// new policy (environment.NewExpressions: only what a create would accept) and
// then compiles it for evaluation. All errors are returned, each with its
// field path. It is safe for concurrent use.
func Compile(c *celeval.Compiler, p *admissionregistrationv1.ValidatingAdmissionPolicy) (validating.Validator, []*celeval.ExpressionError) {
	return CompileWith(c.ForPolicy(len(p.Spec.Variables) > 0), p)
}

// CompileWith compiles p with the compiler of one policy.
func CompileWith(compiler celeval.PolicyCompiler, p *admissionregistrationv1.ValidatingAdmissionPolicy) (validating.Validator, []*celeval.ExpressionError) {
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

func compileSets(compiler celeval.PolicyCompiler, p *admissionregistrationv1.ValidatingAdmissionPolicy) (conditionSets, []*celeval.ExpressionError) {
	hasParams := p.Spec.ParamKind != nil
	vars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	messageVars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: false}
	const mode = environment.NewExpressions

	var errs []*celeval.ExpressionError
	check := func(r plugincel.CompilationResult, fld *field.Path) {
		if r.Error != nil {
			errs = append(errs, &celeval.ExpressionError{Field: fld.String(), Err: r.Error})
		}
	}
	spec := field.NewPath("spec")

	variables := celeval.NewVariables()
	for i, v := range p.Spec.Variables {
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, vars, mode)
		check(r, spec.Child("variables").Index(i).Child("expression"))
		variables.Add(v.Name, r)
	}

	compileAll := func(accessors []plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations, fld func(int) *field.Path) plugincel.ConditionEvaluator {
		results := make([]plugincel.CompilationResult, len(accessors))
		for i, a := range accessors {
			if a == nil {
				continue
			}
			results[i] = compiler.CompileCELExpression(a, opts, mode)
			check(results[i], fld(i))
		}
		return celeval.NewConditionEvaluator(variables, results)
	}

	x := expressionsOf(p)
	var sets conditionSets
	if len(x.matchConditions) > 0 {
		sets.matchConditions = compileAll(x.matchConditions, vars, func(i int) *field.Path { return spec.Child("matchConditions").Index(i).Child("expression") })
	}
	sets.validations = compileAll(x.validations, vars, func(i int) *field.Path { return spec.Child("validations").Index(i).Child("expression") })
	sets.annotations = compileAll(x.annotations, vars, func(i int) *field.Path { return spec.Child("auditAnnotations").Index(i).Child("valueExpression") })
	sets.messages = compileAll(x.messages, messageVars, func(i int) *field.Path { return spec.Child("validations").Index(i).Child("messageExpression") })
	// How upstream's validator and matcher pass the budget on: the
	// validations' remaining budget to the messages; the other sets each
	// start from a full budget, and their remaining is dropped.
	celeval.BudgetChain(sets.validations, sets.messages)
	celeval.BudgetChain(sets.annotations)
	if sets.matchConditions != nil {
		celeval.BudgetChain(sets.matchConditions)
	}
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
