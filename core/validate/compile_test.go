package validate

import (
	"context"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/celeval/celevaltest"
	"github.com/admitfn/admitfn/core/policy/testpolicies"
	"github.com/admitfn/admitfn/core/review"
)

// Every ValidatingAdmissionPolicy of the repository (the example bundle, the
// policy library, the CLI's and the benchmarks' fixtures) and the cases of
// testdata/compile-parity.yaml compile to the same errors, in the same order,
// with admitfn's environments as with upstream's compiler; the ones that
// compile decide the same on a request.
func TestCompileMatchesUpstream(t *testing.T) {
	all, err := testpolicies.Repository("../..")
	if err != nil {
		t.Fatal(err)
	}
	policies := all.Validating
	if len(policies) < 30 {
		t.Fatalf("found %d policies in the repository, want 30 or more", len(policies))
	}
	c := celeval.NewCompiler()
	// The Scale of this package's tests, and the Pod of the benchmarks,
	// which the Pod Security and library policies evaluate in full.
	requests := []*review.Request{decode(t), decodePod(t)}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "dev"}}}
	params := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"limit": "5"}}}

	var withVariables, failing, evaluated int
	for _, p := range policies {
		got, gotErrs := Compile(c, p)
		upstream, err := celevaltest.UpstreamPolicyCompiler(c)
		if err != nil {
			t.Fatal(err)
		}
		want, wantErrs := CompileWith(upstream, p)
		if g, w := errorTexts(gotErrs), errorTexts(wantErrs); !slices.Equal(g, w) {
			t.Errorf("%s: errors\n%s\nupstream's compiler:\n%s", p.Name, strings.Join(g, "\n"), strings.Join(w, "\n"))
			continue
		}
		if len(p.Spec.Variables) > 0 {
			withVariables++
		}
		if len(gotErrs) > 0 {
			failing++
			continue
		}
		for _, req := range requests {
			attrs, va := versioned(req)
			for _, param := range []runtime.Object{nil, params} {
				g := validateOnce(got, attrs, va, param, ns)
				w := validateOnce(want, attrs, va, param, ns)
				if !equalResults(g, w) {
					t.Errorf("%s (%s, params %v): decided %+v\nupstream's compiler: %+v", p.Name, req.Kind.Kind, param != nil, g, w)
				}
				for _, d := range g.Decisions {
					if d.Evaluation != validating.EvalError {
						evaluated++
					}
				}
			}
		}
	}
	if withVariables < 10 || failing < 4 || evaluated < 100 {
		t.Errorf("%d policies with variables, %d that fail to compile, %d decisions without an evaluation error: the corpus no longer covers what it should", withVariables, failing, evaluated)
	}
}

// The cases of testdata/compile-parity.yaml that pin what upstream decides.
func TestCompileVariablesAndMessages(t *testing.T) {
	byName := map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{}
	cases, err := testpolicies.File("testdata/compile-parity.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cases.Validating {
		byName[p.Name] = p
	}
	c := celeval.NewCompiler()
	for name, want := range map[string][]string{
		"message-uses-authorizer":                   {"spec.validations[0].messageExpression: compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in container '')\n | authorizer.path('/healthz').check('get').allowed() ? 'a' : 'b'\n | ^"},
		"variable-types-reach-messages":             {"spec.validations[0].messageExpression: compilation failed: ERROR: <input>:1:17: found no matching overload for '_+_' applied to '(int, string)'\n | variables.count + 'x'\n | ................^"},
		"message-reads-a-variable-using-authorizer": nil,
		"variables-in-messages":                     nil,
	} {
		_, errs := Compile(c, byName[name])
		if got := errorTexts(errs); !slices.Equal(got, want) {
			t.Errorf("%s: errors %q, want %q", name, got, want)
		}
	}

	attrs, va := versioned(decode(t))
	for name, want := range map[string]validating.PolicyDecision{
		// Three replicas: denied, the message from the variables.
		"variables-in-messages": {Action: validating.ActionDeny, Evaluation: validating.EvalDeny, Message: "replicas 3", Reason: metav1.StatusReasonInvalid},
		// The message reads a variable that needs the authorizer, which
		// the function has none of: the static message stands.
		"message-reads-a-variable-using-authorizer": {Action: validating.ActionDeny, Evaluation: validating.EvalDeny, Message: "static message", Reason: metav1.StatusReasonInvalid},
	} {
		v, _ := Compile(c, byName[name])
		res := validateOnce(v, attrs, va, nil, nil)
		if len(res.Decisions) != 1 || res.Decisions[0].Action != want.Action || res.Decisions[0].Evaluation != want.Evaluation || res.Decisions[0].Message != want.Message || res.Decisions[0].Reason != want.Reason {
			t.Errorf("%s: decisions %+v, want %+v", name, res.Decisions, want)
		}
	}
}

// versioned is what upstream's dispatcher gives a validator for req, on a
// validating review (Dispatch): admitfn's evaluations share the objects'
// CEL values, upstream's convert them as upstream does.
func versioned(req *review.Request) (*celeval.Attributes, *admission.VersionedAttributes) {
	attrs := celeval.NewAttributes(req).Validating()
	return attrs, &admission.VersionedAttributes{Attributes: attrs, VersionedKind: attrs.GetKind(), VersionedObject: admission.NewLazyObject(attrs.GetObject()), VersionedOldObject: admission.NewLazyObject(attrs.GetOldObject())}
}

func validateOnce(v validating.Validator, attrs *celeval.Attributes, va *admission.VersionedAttributes, params runtime.Object, ns *corev1.Namespace) validating.ValidateResult {
	return v.Validate(context.Background(), attrs.GetResource(), va, params, ns, 10_000_000, nil)
}

// equalResults compares two results but for the time each evaluation took.
func equalResults(a, b validating.ValidateResult) bool {
	return slices.EqualFunc(a.Decisions, b.Decisions, func(x, y validating.PolicyDecision) bool {
		x.Elapsed, y.Elapsed = 0, 0
		return x == y
	}) && slices.EqualFunc(a.AuditAnnotations, b.AuditAnnotations, func(x, y validating.PolicyAuditAnnotation) bool {
		x.Elapsed, y.Elapsed = 0, 0
		return x == y
	})
}

func errorTexts(errs []*celeval.ExpressionError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
