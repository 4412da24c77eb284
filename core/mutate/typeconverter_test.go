package mutate

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/core/validate"
)

const schemaPolicies = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: jsonpatch}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/metadata/labels/patched", value: "yes"}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: apply}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{spec: Object.spec{containers: [Object.spec.containers{name: "app", imagePullPolicy: "Always"}]}}'
`

const podReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",
 "kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
 "name":"web","namespace":"default","operation":"CREATE","userInfo":{"username":"alice"},
 "object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},
  "spec":{"containers":[{"name":"app","image":"example.com/app:1.0"}]}}}}`

// A JSON Patch never parses client-go's schema of the built-in kinds (some
// 65 ms and 7 MiB at a cold start): its result is decoded into the kind's Go
// type, as in-cluster. An ApplyConfiguration merges with the schema:
// containers are a list keyed by name, so the container keeps its image.
func TestOnlyApplyConfigurationsReadTheSchema(t *testing.T) {
	b, err := policy.Parse([]policy.Source{{Name: "policies.yaml", Data: []byte(schemaPolicies)}})
	if err != nil {
		t.Fatal(err)
	}
	jsonPatch, apply := b.MutatingPolicy("jsonpatch"), b.MutatingPolicy("apply")
	if NeedsSchema(jsonPatch) || !NeedsSchema(apply) {
		t.Fatalf("NeedsSchema: jsonpatch %v, apply %v; want false, true", NeedsSchema(jsonPatch), NeedsSchema(apply))
	}

	var parses atomic.Int32
	tc := newTypeConverters()
	tc.builtin = func() managedfields.TypeConverter {
		parses.Add(1)
		return builtinConverter()
	}
	d := newDispatcher(tc)
	c := validate.NewCompiler()
	run := func(p *admissionregistrationv1.MutatingAdmissionPolicy) map[string]any {
		t.Helper()
		e, errs := Compile(c, p)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", p.Name, errs)
		}
		req, err := review.Decode([]byte(podReview))
		if err != nil {
			t.Fatal(err)
		}
		binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: p.Name}}
		res, err := d.Dispatch(context.Background(), validate.NewAttributes(req), []Hook{NewHook(p, []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding}, e, nil)})
		if err != nil || !res.Allowed {
			t.Fatalf("%s: %+v, %v", p.Name, res, err)
		}
		return res.Object.(*unstructured.Unstructured).Object
	}

	obj := run(jsonPatch)
	if got, _, _ := unstructured.NestedStringMap(obj, "metadata", "labels"); !reflect.DeepEqual(got, map[string]string{"app": "web", "patched": "yes"}) {
		t.Errorf("jsonpatch: labels %v, want app=web, patched=yes", got)
	}
	if n := parses.Load(); n != 0 {
		t.Errorf("jsonpatch: the built-in schema was asked for %d times, want 0", n)
	}

	obj = run(apply)
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
	b, err := policy.Parse([]policy.Source{{Name: "p.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: quantity}
spec:
  reinvocationPolicy: Never
  failurePolicy: Ignore
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/spec/containers/0/resources", value: {"limits": {"cpu": "lots"}}}]'
`)}})
	if err != nil {
		t.Fatal(err)
	}
	p := b.MutatingPolicy("quantity")
	e, errs := Compile(validate.NewCompiler(), p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	req, err := review.Decode([]byte(podReview))
	if err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "quantity"}, Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "quantity"}}
	res, err := NewDispatcher().Dispatch(context.Background(), validate.NewAttributes(req), []Hook{NewHook(p, []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding}, e, nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := "Internal error occurred: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
	if res.Allowed || res.Status == nil || res.Status.Code != 500 || res.Status.Reason != metav1.StatusReasonInternalError || res.Status.Message != want {
		t.Errorf("got allowed=%v status %+v, want a 500 InternalError %q (failurePolicy Ignore does not apply)", res.Allowed, res.Status, want)
	}
}
