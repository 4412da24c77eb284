package mutate_test

import (
	"reflect"
	"sync/atomic"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/mutate"
	"github.com/admitfn/admitfn/core/policy"
)

// onPods is a MutatingAdmissionPolicy on Pod CREATEs with one mutation.
func onPods(name, failurePolicy, mutation string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  reinvocationPolicy: Never
  failurePolicy: ` + failurePolicy + `
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - ` + mutation + "\n"
}

// compileOne parses the policy of doc, as a bundle of its own, and compiles
// it.
func compileOne(t *testing.T, doc string) (*admissionregistrationv1.MutatingAdmissionPolicy, mutating.PolicyEvaluator) {
	t.Helper()
	b, err := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(doc)}})
	if err != nil {
		t.Fatal(err)
	}
	p := b.MutatingPolicies[0]
	e, errs := mutate.Compile(celeval.NewCompiler(), p)
	if len(errs) > 0 {
		t.Fatalf("%s: %v", p.Name, errs)
	}
	return p, e
}

// A JSON Patch never parses client-go's schema of the built-in kinds (some
// 65 ms and 7 MiB at a cold start): its result is decoded into the kind's Go
// type, as in-cluster. An ApplyConfiguration merges with the schema:
// containers are a list keyed by name, so the container keeps its image.
func TestOnlyApplyConfigurationsReadTheSchema(t *testing.T) {
	jsonPatch, jsonPatchEval := compileOne(t, onPods("jsonpatch", "Fail",
		`{patchType: JSONPatch, jsonPatch: {expression: '[JSONPatch{op: "add", path: "/metadata/labels/patched", value: "yes"}]'}}`))
	apply, applyEval := compileOne(t, onPods("apply", "Fail",
		`{patchType: ApplyConfiguration, applyConfiguration: {expression: 'Object{spec: Object.spec{containers: [Object.spec.containers{name: "app", imagePullPolicy: "Always"}]}}'}}`))
	if mutate.NeedsSchema(jsonPatch) || !mutate.NeedsSchema(apply) {
		t.Fatalf("NeedsSchema: jsonpatch %v, apply %v; want false, true", mutate.NeedsSchema(jsonPatch), mutate.NeedsSchema(apply))
	}

	var parses atomic.Int32
	d := mutate.NewDispatcherCountingSchema(&parses)
	run := func(p *admissionregistrationv1.MutatingAdmissionPolicy, e mutating.PolicyEvaluator) map[string]any {
		t.Helper()
		res := dispatchWith(t, d, p, e)
		if !res.Allowed {
			t.Fatalf("%s: %+v", p.Name, res)
		}
		return res.Object.(*unstructured.Unstructured).Object
	}

	obj := run(jsonPatch, jsonPatchEval)
	if got, _, _ := unstructured.NestedStringMap(obj, "metadata", "labels"); !reflect.DeepEqual(got, map[string]string{"app": "web", "patched": "yes"}) {
		t.Errorf("jsonpatch: labels %v, want app=web, patched=yes", got)
	}
	if n := parses.Load(); n != 0 {
		t.Errorf("jsonpatch: the built-in schema was asked for %d times, want 0", n)
	}

	obj = run(apply, applyEval)
	containers, _, _ := unstructured.NestedSlice(obj, "spec", "containers")
	want := []any{map[string]any{"name": "app", "image": "example.com/app:1.0", "imagePullPolicy": "Always"}}
	if !reflect.DeepEqual(containers, want) {
		t.Errorf("apply: containers %v, want %v", containers, want)
	}
	if parses.Load() == 0 {
		t.Error("apply: merged without the built-in schema")
	}
}

// A JSON Patch result is decoded into the kind's Go type as kube-apiserver
// decodes it: a malformed quantity, which a schema check let through, is an
// internal error with the decoder's message (as in the e2e parity case
// jsonpatch-malformed-quantity).
func TestJSONPatchResultsDecodeStrictly(t *testing.T) {
	p, e := compileOne(t, onPods("quantity", "Ignore",
		`{patchType: JSONPatch, jsonPatch: {expression: '[JSONPatch{op: "add", path: "/spec/containers/0/resources", value: {"limits": {"cpu": "lots"}}}]'}}`))
	res := dispatch(t, p, e)
	want := "Internal error occurred: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
	if res.Allowed || res.Status == nil || res.Status.Code != 500 || res.Status.Reason != metav1.StatusReasonInternalError || res.Status.Message != want {
		t.Errorf("got allowed=%v status %+v, want a 500 InternalError %q (failurePolicy Ignore does not apply)", res.Allowed, res.Status, want)
	}
}
