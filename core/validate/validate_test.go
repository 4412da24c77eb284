package validate

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/core/review/reviewtest"
)

// decode is an UPDATE of a Deployment's scale subresource, with every
// request field set.
func decode(t *testing.T) *review.Request {
	return reviewtest.Read(t, "../celeval/testdata/scale-review.json")
}

// decodePod is the Pod of the benchmarks (test/perf), which the Pod
// Security and library policies evaluate in full.
func decodePod(t *testing.T) *review.Request {
	return reviewtest.Read(t, "../../test/perf/testdata/pod-review.json")
}

// Every request field a policy can read, through the real compiler and
// condition evaluator.
func TestRequestVariables(t *testing.T) {
	req := decode(t)
	attrs := celeval.NewAttributes(req)
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: attrs.GetKind(), VersionedObject: admission.NewLazyObject(req.Object), VersionedOldObject: admission.NewLazyObject(req.OldObject)}
	exprs := map[string]string{
		"request.kind.group":                                     "autoscaling",
		"request.resource.version":                               "v1",
		"request.requestResource.version":                        "v1beta2",
		"request.subResource":                                    "scale",
		"request.requestSubResource":                             "scale",
		"request.userInfo.username":                              "alice",
		"request.userInfo.uid":                                   "42",
		"request.userInfo.groups[0]":                             "devs",
		"request.userInfo.extra['scopes'][1]":                    "b",
		"request.options.kind":                                   "UpdateOptions",
		"request.options.fieldManager":                           "kubectl",
		"string(request.dryRun)":                                 "true",
		"string(object.spec.replicas - oldObject.spec.replicas)": "1",
		"namespaceObject.metadata.name":                          "default",
	}
	c := celeval.NewCompiler()
	for expr, want := range exprs {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				Validations: []admissionregistrationv1.Validation{{Expression: expr + " == '" + want + "'", MessageExpression: "string(" + expr + ")"}},
			},
		}
		validator, errs := Compile(c, p)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", expr, errs)
		}
		res := validator.Validate(context.Background(), attrs.GetResource(), va, nil, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, 10_000_000, nil)
		if len(res.Decisions) != 1 || res.Decisions[0].Action != validating.ActionAdmit {
			t.Errorf("%s == %q: %+v", expr, want, res.Decisions)
		}
	}
}
