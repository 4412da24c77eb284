// Package mutate applies MutatingAdmissionPolicies with kube-apiserver's own
// building blocks: its CEL compiler and environment, its patchers
// (k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch: server-side
// apply merges for ApplyConfiguration, JSON Patch for JSONPatch) and its MAP
// dispatcher, which owns matching, params, failurePolicy, the order of
// mutations and the errors users see. Expressions are evaluated with the
// validate package's activation, so `request` is built once per review and
// `authorizer` and the whole namespace are read from the review's cluster
// exactly as for validating policies.
package mutate

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/admitfn/admitfn/core/celeval"
)

// Compile compiles every expression of p the way kube-apiserver validates a
// new policy (environment.NewExpressions) and returns the evaluator
// upstream's dispatcher runs. All errors are returned, each with its field
// path; the evaluator is only usable when there are none.
func Compile(c *celeval.Compiler, p *admissionregistrationv1.MutatingAdmissionPolicy) (mutating.PolicyEvaluator, []*celeval.ExpressionError) {
	return CompileWith(c.ForPolicy(len(p.Spec.Variables) > 0), p)
}

// CompileWith is Compile with the given compiler of the policy.
func CompileWith(compiler celeval.PolicyCompiler, p *admissionregistrationv1.MutatingAdmissionPolicy) (mutating.PolicyEvaluator, []*celeval.ExpressionError) {
	vars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	patchVars := vars
	patchVars.HasPatchTypes = true
	const mode = environment.NewExpressions

	composition, err := compiler.Composition(vars)
	if err != nil {
		return mutating.PolicyEvaluator{}, []*celeval.ExpressionError{{Field: "spec", Err: err}}
	}
	if _, err := compiler.Composition(patchVars); err != nil {
		return mutating.PolicyEvaluator{}, []*celeval.ExpressionError{{Field: "spec", Err: err}}
	}
	var errs []*celeval.ExpressionError
	check := func(r plugincel.CompilationResult, fld *field.Path) plugincel.CompilationResult {
		if r.Error != nil {
			errs = append(errs, &celeval.ExpressionError{Field: fld.String(), Err: r.Error})
		}
		return r
	}
	spec := field.NewPath("spec")

	variables := celeval.NewVariables()
	for i, v := range p.Spec.Variables {
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, vars, mode)
		check(r, spec.Child("variables").Index(i).Child("expression"))
		variables.Add(v.Name, r)
	}

	var matcher matchconditions.Matcher
	if n := len(p.Spec.MatchConditions); n > 0 {
		results := make([]plugincel.CompilationResult, n)
		for i := range p.Spec.MatchConditions {
			accessor := (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
			results[i] = check(compiler.CompileCELExpression(accessor, vars, mode), spec.Child("matchConditions").Index(i).Child("expression"))
		}
		// "validate" is what upstream passes here too: it only labels metrics.
		matcher = reviewMatcher{matchconditions.NewMatcher(celeval.NewMutatingConditionEvaluator(variables, results), p.Spec.FailurePolicy, "policy", "validate", p.Name)}
	}

	// Expressions are compiled as written, untrimmed, as upstream's
	// dispatcher compiles them: error messages quote them verbatim.
	var exprs []string
	for _, v := range p.Spec.Variables {
		exprs = append(exprs, v.Expression)
	}
	for _, m := range p.Spec.Mutations {
		if m.JSONPatch != nil {
			exprs = append(exprs, m.JSONPatch.Expression)
		}
		if m.ApplyConfiguration != nil {
			exprs = append(exprs, m.ApplyConfiguration.Expression)
		}
	}
	readsNamespace := celeval.MentionsNamespaceObject(exprs...)
	patchers := make([]patch.Patcher, 0, len(p.Spec.Mutations))
	for i, m := range p.Spec.Mutations {
		fld := spec.Child("mutations").Index(i)
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			accessor := &patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}
			r := check(compiler.CompileCELExpression(accessor, patchVars, mode), fld.Child("jsonPatch", "expression"))
			patchers = append(patchers, checked{Patcher: patch.NewJSONPatcher(celeval.NewMutatingEvaluator(variables, r)), policy: p.Name, jsonPatch: true, readsNamespace: readsNamespace})
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			accessor := &patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}
			r := check(compiler.CompileCELExpression(accessor, patchVars, mode), fld.Child("applyConfiguration", "expression"))
			patchers = append(patchers, checked{Patcher: patch.NewApplyConfigurationPatcher(celeval.NewMutatingEvaluator(variables, r)), policy: p.Name, readsNamespace: readsNamespace})
		}
	}
	return mutating.PolicyEvaluator{Matcher: matcher, Mutators: patchers, CompositedCompiler: composition}, errs
}
