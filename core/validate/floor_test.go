package validate

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/internal/perf"
)

// The evaluation floor of P1 and P2 (docs/performance.md): the CEL that the
// answer needs, and nothing else. Each policy of the 20-policy bundle that
// matches the Pod is evaluated by its validator called directly, once per
// binding: its validations, then every message expression, then its audit
// annotations, with kube-apiserver's compiled programs, cost limits and
// budget, each variable evaluated once per policy and the objects' CEL
// values shared, as admitfn evaluates them; no dispatcher, no matching,
// no decisions gathered into an answer. An evaluator that keeps upstream's
// programs and budgets, as admitfn must, evaluates at least this much.

// floorPolicy is one matching policy's compiled validator and, for each of
// its bindings, the params it reads.
type floorPolicy struct {
	validator validating.Validator
	params    []runtime.Object
}

// evaluationFloor compiles the policies of the 20-policy bundle that match
// the Pod's review.
func evaluationFloor(tb testing.TB, attrs *Attributes) []floorPolicy {
	tb.Helper()
	fsys, err := perf.Bundle20(perf.RepoRoot())
	if err != nil {
		tb.Fatal(err)
	}
	b, err := policy.LoadFS(fsys, ".")
	if err != nil {
		tb.Fatal(err)
	}
	c := NewCompiler()
	var out []floorPolicy
	for _, p := range b.Policies {
		matches := false
		for _, r := range p.Spec.MatchConstraints.ResourceRules {
			if (&rules.Matcher{Rule: r.RuleWithOperations, Attr: attrs}).Matches() {
				matches = true
			}
		}
		if !matches {
			continue
		}
		v, errs := c.Compile(p)
		if len(errs) > 0 {
			tb.Fatalf("%s: %v", p.Name, errs)
		}
		fp := floorPolicy{validator: v}
		for _, pb := range b.Bindings {
			if pb.Spec.PolicyName != p.Name {
				continue
			}
			var params runtime.Object
			if ref := pb.Spec.ParamRef; ref != nil {
				for _, obj := range b.Params {
					if obj.GetName() == ref.Name && obj.GetNamespace() == ref.Namespace {
						params = obj
					}
				}
				if params == nil {
					tb.Fatalf("%s: no params %s/%s", pb.Name, ref.Namespace, ref.Name)
				}
			}
			fp.params = append(fp.params, params)
		}
		out = append(out, fp)
	}
	return out
}

// floorReview evaluates every policy once per binding on attrs, as a
// validating review shares their inputs, and counts what they decided.
func floorReview(ctx context.Context, attrs *Attributes, policies []floorPolicy) (evaluations, denials, annotations int) {
	attrs.shareObjects = true
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: attrs.GetKind()}
	va.VersionedObject.Set(attrs.GetObject())
	va.VersionedOldObject.Set(attrs.GetOldObject())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: attrs.GetNamespace()}}
	for _, p := range policies {
		for _, params := range p.params {
			res := p.validator.Validate(ctx, attrs.GetResource(), va, params, ns, celconfig.RuntimeCELCostBudget, nil)
			evaluations++
			for _, d := range res.Decisions {
				if d.Action != validating.ActionAdmit || d.Evaluation != validating.EvalAdmit {
					denials++
				}
			}
			annotations += len(res.AuditAnnotations)
		}
	}
	return evaluations, denials, annotations
}

// The floor evaluates what the engine does on the Pod: the 17 policies of
// the bundle that match it (TestPerfFixtures in core/engine), allowing it,
// with one audit annotation.
func TestEvaluationFloor(t *testing.T) {
	attrs := NewAttributes(decodePod(t))
	policies := evaluationFloor(t, attrs)
	evaluations, denials, annotations := floorReview(context.Background(), attrs, policies)
	if len(policies) != 17 || evaluations != 17 || denials != 0 || annotations != 1 {
		t.Fatalf("%d policies evaluated %d times: %d denials, %d audit annotations; want 17, 17, 0, 1", len(policies), evaluations, denials, annotations)
	}
	// A privileged container breaks the baseline profile's control (the
	// restricted policy holds only the controls it adds).
	priv := decodePod(t)
	containers := priv.Object.Object["spec"].(map[string]any)["containers"].([]any)
	containers[0].(map[string]any)["securityContext"].(map[string]any)["privileged"] = true
	if _, denials, _ := floorReview(context.Background(), NewAttributes(priv), policies); denials != 1 {
		t.Fatalf("a privileged container: %d denials, want 1", denials)
	}
}

// BenchmarkEvaluationFloor: the CEL the Pod's answer needs, each expression
// evaluated once (above); hack/benchsum divides it by P2's upstream and, with
// the Pod's decoding, by P1's floor, to print the floors of P1 and P2.
func BenchmarkEvaluationFloor(b *testing.B) {
	req := decodePod(b)
	policies := evaluationFloor(b, NewAttributes(req))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, denials, _ := floorReview(ctx, NewAttributes(req), policies); denials != 0 {
			b.Fatal("the Pod was denied")
		}
	}
}
