// Package validatetest gives tests and benchmarks kube-apiserver's own
// validator of a policy, to measure and compare admitfn's with.
package validatetest

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/admitfn/admitfn/core/celeval"
)

// CompileUpstream compiles p as kube-apiserver's ValidatingAdmissionPolicy
// plugin does (validating.compilePolicy, which is unexported), on c's base
// environment: a compiler of its own for the policy, and its condition
// evaluator, which converts the request for CEL on every call. It is the
// baseline of the P2 benchmark; compile errors are in the validator.
func CompileUpstream(c *celeval.Compiler, p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	vars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	messageVars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil}
	const mode = environment.StoredExpressions
	compiler, err := plugincel.NewCompositedCompiler(c.Env())
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, p.Spec.FailurePolicy, err)
	}
	named := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		named[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(named, vars, mode)

	var matcher matchconditions.Matcher
	if n := len(p.Spec.MatchConditions); n > 0 {
		conditions := make([]plugincel.ExpressionAccessor, n)
		for i := range p.Spec.MatchConditions {
			conditions[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(conditions, vars, mode), p.Spec.FailurePolicy, "policy", "validate", p.Name)
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
	return validating.NewValidator(
		compiler.CompileCondition(validations, vars, mode),
		matcher,
		compiler.CompileCondition(annotations, vars, mode),
		compiler.CompileCondition(messages, messageVars, mode),
		p.Spec.FailurePolicy, nil)
}
