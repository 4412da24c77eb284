package validate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/policy/testpolicies"
	"github.com/admitfn/admitfn/core/review"
)

// A policy evaluation, condition set after condition set as upstream's
// validator runs them (validations, their messages with what budget is
// left, audit annotations with a budget of their own), gives the same
// values, errors and remaining budgets with admitfn's composition, which
// remembers each variable across the sets, as with upstream's, which
// evaluates it again in each. Budgets are the default and, for each
// policy, the exact costs upstream spends, one less and halfway: where the
// budget runs out is where a cost counted differently would show.
//
// With celeval.ExactCost every remaining budget is upstream's. Without it,
// a set a bound proves within its limits and budget is evaluated untracked
// and returns a remaining budget no higher than upstream's (the true one is
// not known): everything else, where the budget runs out included, is the
// same.
func TestVariablesMatchUpstream(t *testing.T) {
	for _, mode := range []struct {
		name  string
		opt   celeval.Option
		exact bool
	}{
		{"exact cost", celeval.ExactCost(), true},
		{"bounded cost", nil, false},
		// The linear tracker counts as cel-go's does: budgets left to the
		// unit.
		{"linear cost", celeval.LinearCost(), true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			opts := []celeval.Option{}
			if mode.opt != nil {
				opts = append(opts, mode.opt)
			}
			variablesMatchUpstream(t, celeval.NewCompiler(opts...), mode.exact)
		})
	}
}

func variablesMatchUpstream(t *testing.T, c *celeval.Compiler, exact bool) {
	cases, err := testpolicies.File("testdata/variables-parity.yaml")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := testpolicies.Repository("../..")
	if err != nil {
		t.Fatal(err)
	}
	var policies []*admissionregistrationv1.ValidatingAdmissionPolicy
	for _, p := range append(cases.Validating, repo.Validating...) {
		if len(p.Spec.Variables) > 0 {
			policies = append(policies, p)
		}
	}
	if len(cases.Validating) != 5 || len(policies) < 15 {
		t.Fatalf("%d cases, %d policies with variables: the corpus no longer covers what it should", len(cases.Validating), len(policies))
	}
	pod := decodePod(t)
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	params := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"limit": "5"}}}

	var compared, outOfBudget, overLimit, failing, replayed int
	for _, p := range policies {
		got, _ := compileSets(c.ForPolicy(true), p)
		want, err := upstreamSets(c, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range []*review.Request{decode(t), pod} {
			for _, ns := range []*corev1.Namespace{nil, namespace} {
				for _, param := range []runtime.Object{nil, params} {
					name := fmt.Sprintf("%s (%s, namespace %v, params %v)", p.Name, req.Kind.Kind, ns != nil, param != nil)
					in := evaluationInput{req: req, namespace: ns, params: param}
					full := in.run(want, celconfig.RuntimeCELCostBudget, nil)
					budgets := []int64{celconfig.RuntimeCELCostBudget}
					if spent := full.spent(); spent > 0 {
						budgets = append(budgets, spent, spent-1, spent/2)
					}
					for _, budget := range budgets {
						w := in.run(want, budget, nil)
						g := in.run(got, budget, nil)
						if !g.agrees(w, exact) {
							t.Errorf("%s, budget %d:\n%s\nupstream:\n%s", name, budget, strings.Join(g.trace, "\n"), strings.Join(w.trace, "\n"))
						}
						compared++
						trace := strings.Join(w.trace, "\n")
						if strings.Contains(trace, "running out of cost budget") {
							outOfBudget++
						}
						if strings.Contains(trace, "actual cost limit exceeded") {
							overLimit++
						}
						if strings.Contains(trace, "fails to evaluate") {
							failing++
						}
					}
					// The same evaluation again on the same review, as
					// another binding of the policy: every variable is
					// remembered, every set replays.
					attrs, va := versioned(req)
					same := &shared{attrs, va}
					first := in.run(got, celconfig.RuntimeCELCostBudget, same)
					again := in.run(got, celconfig.RuntimeCELCostBudget, same)
					if !again.agrees(full, exact) || !first.agrees(full, exact) {
						t.Errorf("%s, evaluated twice:\n%s\nupstream:\n%s", name, strings.Join(again.trace, "\n"), strings.Join(full.trace, "\n"))
					}
					if attrs.Remembered() > 0 {
						replayed++
					}
					// With other params, or in another namespace, on the
					// same review: nothing remembered applies.
					otherParams := evaluationInput{req: req, namespace: ns, params: params}
					if param != nil {
						otherParams.params = nil
					}
					otherNamespace := evaluationInput{req: req, namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, params: param}
					if ns == nil {
						otherNamespace.namespace = namespace
					}
					for _, other := range []evaluationInput{otherParams, otherNamespace} {
						if g, w := other.run(got, celconfig.RuntimeCELCostBudget, same), other.run(want, celconfig.RuntimeCELCostBudget, nil); !g.agrees(w, exact) {
							t.Errorf("%s, then with params %v in namespace %v: left %v, upstream %v\n%s\nupstream:\n%s", name, other.params != nil, other.namespace, g.left, w.left, strings.Join(g.trace, "\n"), strings.Join(w.trace, "\n"))
						}
					}
				}
			}
		}
	}
	t.Logf("%d comparisons, %d out of budget, %d over the per-call limit, %d with failing variables, %d remembered", compared, outOfBudget, overLimit, failing, replayed)
	if compared < 300 || outOfBudget < 50 || overLimit < 8 || failing < 50 || replayed < 100 {
		t.Errorf("%d comparisons, %d out of budget, %d over the per-call limit, %d with failing variables, %d remembered: the cases no longer cover what they should", compared, outOfBudget, overLimit, failing, replayed)
	}
}

type evaluationInput struct {
	req       *review.Request
	namespace *corev1.Namespace
	params    runtime.Object
}

// shared is the review of an evaluation to run again.
type shared struct {
	attrs *celeval.Attributes
	va    *admission.VersionedAttributes
}

type evaluation struct {
	trace []string
	// budgets left after the validations, the messages and the audit
	// annotations (-1 when a set failed or was not evaluated).
	left []int64
}

// agrees: the same traces, and remaining budgets equal to w's or, evaluated
// with bounds, no higher and failed alike.
func (e evaluation) agrees(w evaluation, exact bool) bool {
	if !slices.Equal(e.trace, w.trace) || len(e.left) != len(w.left) {
		return false
	}
	for i := range e.left {
		if exact && e.left[i] != w.left[i] || e.left[i] > w.left[i] || (e.left[i] < 0) != (w.left[i] < 0) {
			return false
		}
	}
	return true
}

// spent is the cost of the validations and messages together, from a run
// with a budget of RuntimeCELCostBudget.
func (e evaluation) spent() int64 {
	if len(e.left) < 2 || e.left[1] < 0 {
		return 0
	}
	return celconfig.RuntimeCELCostBudget - e.left[1]
}

// run evaluates the condition sets as validating.(*validator).Validate
// does, on a review of its own unless again is given (as another binding
// of the policy would).
func (in evaluationInput) run(sets conditionSets, budget int64, again *shared) evaluation {
	attrs, va := versioned(in.req)
	if again != nil {
		attrs, va = again.attrs, again.va
	}
	// A request value of its own, as upstream's validator builds for each
	// call (admitfn's activation reads the review's).
	request := plugincel.CreateAdmissionRequest(attrs, metav1.GroupVersionResource(attrs.GetResource()), metav1.GroupVersionKind(attrs.GetKind()))
	ctx := context.Background()
	ns := plugincel.CreateNamespaceObject(in.namespace)
	var out evaluation
	record := func(set string, results []plugincel.EvaluationResult, left int64, err error) bool {
		out.left = append(out.left, left)
		out.trace = append(out.trace, fmt.Sprintf("%s: error %v", set, err))
		for i, r := range results {
			out.trace = append(out.trace, fmt.Sprintf("  %d: %s", i, describe(r)))
		}
		return err == nil
	}
	results, left, err := sets.validations.ForInput(ctx, va, request, plugincel.OptionalVariableBindings{VersionedParams: in.params}, ns, budget)
	if record("validations", results, left, err) {
		results, left, err := sets.messages.ForInput(ctx, va, request, plugincel.OptionalVariableBindings{VersionedParams: in.params}, ns, left)
		record("messages", results, left, err)
	} else {
		out.left = append(out.left, -1)
	}
	results, left, err = sets.annotations.ForInput(ctx, va, request, plugincel.OptionalVariableBindings{VersionedParams: in.params}, in.namespace, budget)
	record("audit annotations", results, left, err)
	return out
}

func describe(r plugincel.EvaluationResult) string {
	switch {
	case r.ExpressionAccessor == nil:
		return "placeholder"
	case r.Error != nil:
		return "error " + r.Error.Error()
	case r.EvalResult == nil:
		return "no result"
	}
	return fmt.Sprintf("%s %v", r.EvalResult.Type().TypeName(), r.EvalResult.Value())
}

// The objects are part of what is remembered: on one review, another
// version of the object (another kind a policy matches by equivalence)
// evaluates the variables again.
func TestVariablesRememberedPerObject(t *testing.T) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
		Variables:   []admissionregistrationv1.Variable{{Name: "replicas", Expression: "object.spec.replicas"}},
		Validations: []admissionregistrationv1.Validation{{Expression: "variables.replicas == 3"}},
	}}
	sets, errs := compileSets(celeval.NewCompiler().ForPolicy(true), p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	attrs, va := versioned(decode(t))
	// The old Scale (two replicas) as the object of another version.
	other := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: attrs.GetKind(), VersionedObject: admission.NewLazyObject(attrs.GetOldObject()), VersionedOldObject: admission.NewLazyObject(attrs.GetOldObject())}
	for _, tc := range []struct {
		va   *admission.VersionedAttributes
		want ref.Val
	}{{va, types.True}, {other, types.False}, {va, types.True}} {
		results, _, err := sets.validations.ForInput(context.Background(), tc.va, nil, plugincel.OptionalVariableBindings{}, nil, celconfig.RuntimeCELCostBudget)
		if err != nil || len(results) != 1 || results[0].EvalResult != tc.want {
			t.Errorf("replicas == 3 on %v: %+v, %v; want %v", tc.va.VersionedObject.Object().(*unstructured.Unstructured).Object["spec"], results, err, tc.want)
		}
	}
	if n := attrs.Remembered(); n != 2 {
		t.Errorf("%d memories, want one per object", n)
	}
}

// upstreamSets compiles p as kube-apiserver's ValidatingAdmissionPolicy
// plugin does (validating.compilePolicy): its own compiler for the policy
// and its condition evaluator, which converts the request on every call.
func upstreamSets(c *celeval.Compiler, p *admissionregistrationv1.ValidatingAdmissionPolicy) (conditionSets, error) {
	vars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	messageVars := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil}
	const mode = environment.StoredExpressions
	compiler, err := plugincel.NewCompositedCompiler(c.Env())
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
