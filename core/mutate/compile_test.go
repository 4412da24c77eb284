package mutate_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/celeval/celevaltest"
	"github.com/admitfn/admitfn/core/mutate"
	"github.com/admitfn/admitfn/core/policy/testpolicies"
	"github.com/admitfn/admitfn/core/review"
)

const podReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
 "uid":"u1",
 "kind":{"group":"","version":"v1","kind":"Pod"},
 "resource":{"group":"","version":"v1","resource":"pods"},
 "requestKind":{"group":"","version":"v1","kind":"Pod"},
 "requestResource":{"group":"","version":"v1","resource":"pods"},
 "name":"web","namespace":"default","operation":"CREATE",
 "userInfo":{"username":"alice","groups":["system:authenticated"]},
 "object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},
  "spec":{"containers":[{"name":"app","image":"example.com/app:1.0"}]}}}}`

// Every MutatingAdmissionPolicy of the repository and the cases of
// testdata/compile-parity.yaml compile to the same errors with admitfn's
// environments as with upstream's compiler, and the ones that compile
// mutate a Pod the same way.
func TestCompileMatchesUpstream(t *testing.T) {
	all, err := testpolicies.Repository("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Mutating) < 10 {
		t.Fatalf("found %d mutating policies in the repository, want 10 or more", len(all.Mutating))
	}
	c := celeval.NewCompiler()
	var withVariables, failing, mutated int
	for _, p := range all.Mutating {
		got, gotErrs := mutate.Compile(c, p)
		upstream, err := celevaltest.UpstreamPolicyCompiler(c)
		if err != nil {
			t.Fatal(err)
		}
		want, wantErrs := mutate.CompileWith(upstream, p)
		if g, w := errorTexts(gotErrs), errorTexts(wantErrs); !slices.Equal(g, w) {
			t.Errorf("%s: errors\n%q\nupstream's compiler:\n%q", p.Name, g, w)
			continue
		}
		if len(p.Spec.Variables) > 0 {
			withVariables++
		}
		if len(gotErrs) > 0 {
			failing++
			continue
		}
		if p.Spec.ParamKind != nil {
			continue
		}
		g, w := dispatch(t, p, got), dispatch(t, p, want)
		if g.Allowed != w.Allowed || !equality.Semantic.DeepEqual(g.Status, w.Status) || !equality.Semantic.DeepEqual(g.Object, w.Object) {
			t.Errorf("%s: mutated to %+v\nupstream's compiler: %+v", p.Name, g, w)
		}
		if !equality.Semantic.DeepEqual(g.Object, pod(t).Object) {
			mutated++
		}
	}
	if withVariables < 4 || failing < 2 || mutated < 4 {
		t.Errorf("%d policies with variables, %d that fail to compile, %d that mutate the Pod: the corpus no longer covers what it should", withVariables, failing, mutated)
	}
}

// The cases of testdata/compile-parity.yaml that pin what upstream does.
func TestCompileVariablesInMutations(t *testing.T) {
	cases, err := testpolicies.File("testdata/compile-parity.yaml")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*admissionregistrationv1.MutatingAdmissionPolicy{}
	for _, p := range cases.Mutating {
		byName[p.Name] = p
	}
	c := celeval.NewCompiler()
	_, errs := mutate.Compile(c, byName["wrong-types"])
	want := []string{
		"spec.mutations[0].applyConfiguration.expression: must evaluate to Object but got string",
		"spec.mutations[1].jsonPatch.expression: must evaluate to list(JSONPatch) but got Object",
		"spec.mutations[2].jsonPatch.expression: compilation failed: ERROR: <input>:1:74: found no matching overload for '_+_' applied to '(int, string)'\n | [JSONPatch{op: 'add', path: '/metadata/labels/n', value: variables.count + 'x'}]\n | .........................................................................^",
	}
	if got := errorTexts(errs); !slices.Equal(got, want) {
		t.Errorf("wrong-types: errors\n%q\nwant\n%q", got, want)
	}

	for name, want := range map[string]struct {
		field  string
		values map[string]string
	}{
		"apply-reads-variables":     {"labels", map[string]string{"app": "web", "count": "1", "owner": "alice"}},
		"jsonpatch-reads-variables": {"annotations", map[string]string{"example.com/alice": "app"}},
		"no-variables":              {"annotations", map[string]string{"seen-by": "alice"}},
	} {
		e, errs := mutate.Compile(c, byName[name])
		if len(errs) > 0 {
			t.Fatalf("%s: %v", name, errs)
		}
		res := dispatch(t, byName[name], e)
		obj, ok := res.Object.(*unstructured.Unstructured)
		if !res.Allowed || !ok {
			t.Fatalf("%s: %+v", name, res)
		}
		if got, _, _ := unstructured.NestedStringMap(obj.Object, "metadata", want.field); !maps.Equal(got, want.values) {
			t.Errorf("%s: %s %v, want %v", name, want.field, got, want.values)
		}
	}
}

func dispatch(t *testing.T, p *admissionregistrationv1.MutatingAdmissionPolicy, e mutating.PolicyEvaluator) mutate.Result {
	t.Helper()
	return dispatchWith(t, mutate.NewDispatcher(), p, e)
}

// dispatchWith applies p, bound once, to the Pod of podReview with d.
func dispatchWith(t *testing.T, d *mutate.Dispatcher, p *admissionregistrationv1.MutatingAdmissionPolicy, e mutating.PolicyEvaluator) mutate.Result {
	t.Helper()
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: p.Name}}
	res, err := d.Dispatch(context.Background(), celeval.NewAttributes(pod(t)), []mutate.Hook{mutate.NewHook(p, []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding}, e, nil)})
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	return res
}

func pod(t *testing.T) *review.Request {
	t.Helper()
	req, err := review.Decode([]byte(podReview))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func errorTexts(errs []*celeval.ExpressionError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
