package validate

import (
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celcommon "k8s.io/apiserver/pkg/cel/common"

	"github.com/admitfn/admitfn/core/review"
)

const body = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
 "uid":"u1",
 "kind":{"group":"autoscaling","version":"v1","kind":"Scale"},
 "resource":{"group":"apps","version":"v1","resource":"deployments"},
 "subResource":"scale",
 "requestKind":{"group":"autoscaling","version":"v1","kind":"Scale"},
 "requestResource":{"group":"apps","version":"v1beta2","resource":"deployments"},
 "requestSubResource":"scale",
 "name":"web","namespace":"default","operation":"UPDATE",
 "userInfo":{"username":"alice","uid":"42","groups":["devs","system:authenticated"],"extra":{"scopes":["a","b"]}},
 "object":{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web","namespace":"default"},"spec":{"replicas":3}},
 "oldObject":{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web","namespace":"default"},"spec":{"replicas":2}},
 "dryRun":true,
 "options":{"apiVersion":"meta.k8s.io/v1","kind":"UpdateOptions","fieldManager":"kubectl"}}}`

func decode(t *testing.T) *review.Request {
	t.Helper()
	r, err := review.Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// decodePod is the Pod of the benchmarks (test/perf), which the Pod
// Security and library policies evaluate in full.
func decodePod(t *testing.T) *review.Request {
	t.Helper()
	body, err := os.ReadFile("../../test/perf/testdata/pod-review.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := review.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The shared `request` value is the one upstream builds on every call,
// built once: equal to upstream's, and the same value on every use within a
// review, so what one policy converted the next one reuses.
func TestSharedRequestValueMatchesUpstreamConversion(t *testing.T) {
	req := decode(t)
	attrs := NewAttributes(req)
	shared := attrs.celRequest()
	if attrs.celRequest() != shared {
		t.Error("request value rebuilt within one review")
	}

	// Upstream: a plain attributes record, CreateAdmissionRequest per call,
	// wrapped for CEL; requestKind/requestResource come from the original
	// request kube-apiserver received.
	upstreamReq := plugincel.CreateAdmissionRequest(attrs.Attributes, metav1.GroupVersionResource(attrs.GetResource()), metav1.GroupVersionKind(attrs.GetKind()))
	upstreamReq.RequestResource = &metav1.GroupVersionResource{Group: "apps", Version: "v1beta2", Resource: "deployments"}
	if got := shared.Equal(celcommon.SchemalessTypedToVal(upstreamReq)); got != types.True {
		t.Errorf("shared request value %v differs from upstream's %v", shared.Value(), upstreamReq)
	}
	// The same, as the unstructured map kube-apiserver 1.36 converted it to.
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(upstreamReq)
	if err != nil {
		t.Fatal(err)
	}
	if got := shared.Equal(types.DefaultTypeAdapter.NativeToValue(want)); got != types.True {
		t.Errorf("shared request value %v differs from %v", shared.Value(), want)
	}
	if ns := (&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); attrs.celNamespace(ns) != attrs.celNamespace(ns) {
		t.Error("namespaceObject value rebuilt within one review")
	}

	// And the fallback path, for attributes admitfn did not build, converts
	// per call exactly like upstream.
	plain := &admission.VersionedAttributes{Attributes: attrs.Attributes, VersionedKind: attrs.GetKind(), VersionedObject: admission.NewLazyObject(req.Object), VersionedOldObject: admission.NewLazyObject(req.OldObject)}
	act, err := newActivation(plain, upstreamReq, plugincel.OptionalVariableBindings{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := act.request.(ref.Val); !ok || got.Equal(shared) != types.True || act.namespace != types.NullValue {
		t.Errorf("fallback activation: request %v, namespace %v", act.request, act.namespace)
	}
}

// Every request field a policy can read, through the real compiler and
// condition evaluator.
func TestRequestVariables(t *testing.T) {
	req := decode(t)
	attrs := NewAttributes(req)
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
	c := NewCompiler()
	for expr, want := range exprs {
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				Validations: []admissionregistrationv1.Validation{{Expression: expr + " == '" + want + "'", MessageExpression: "string(" + expr + ")"}},
			},
		}
		validator, errs := c.Compile(p)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", expr, errs)
		}
		res := validator.Validate(context.Background(), attrs.GetResource(), va, nil, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, 10_000_000, nil)
		if len(res.Decisions) != 1 || res.Decisions[0].Action != validating.ActionAdmit {
			t.Errorf("%s == %q: %+v", expr, want, res.Decisions)
		}
	}
}

func TestParamStore(t *testing.T) {
	cm := func(ns, name string, lbl map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(lbl)
		return u
	}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	s := NewParamStore(gvk, true, []*unstructured.Unstructured{
		cm("b", "z", map[string]string{"x": "1"}), cm("a", "y", map[string]string{"x": "1"}), cm("b", "a", map[string]string{"x": "1"}), cm("b", "n", nil),
	})
	if s.Scope() != meta.RESTScopeNamespace || !s.Informer().HasSynced() {
		t.Errorf("scope %v synced %v", s.Scope(), s.Informer().HasSynced())
	}
	names := func(objs []runtime.Object) (out []string) {
		for _, o := range objs {
			m, _ := meta.Accessor(o)
			out = append(out, m.GetNamespace()+"/"+m.GetName())
		}
		return out
	}
	sel := labels.SelectorFromSet(labels.Set{"x": "1"})
	all, _ := s.Lister().List(sel)
	inB, _ := s.Lister().ByNamespace("b").List(sel)
	if got := names(all); !reflect.DeepEqual(got, []string{"a/y", "b/a", "b/z"}) {
		t.Errorf("List = %v", got)
	}
	if got := names(inB); !reflect.DeepEqual(got, []string{"b/a", "b/z"}) {
		t.Errorf("ByNamespace(b).List = %v", got)
	}
	if _, err := s.Lister().ByNamespace("a").Get("z"); err == nil {
		t.Error("Get found a param in the wrong namespace")
	}
	if cluster := NewParamStore(gvk, false, nil); cluster.Scope() != meta.RESTScopeRoot {
		t.Errorf("cluster scope = %v", cluster.Scope())
	}
}

func TestAnnotationsKeepUpstreamsFirstValueRule(t *testing.T) {
	attrs := NewAttributes(decode(t))
	if err := attrs.AddAnnotation("p/k", "one"); err != nil {
		t.Fatal(err)
	}
	if err := attrs.AddAnnotation("p/k", "one"); err != nil {
		t.Errorf("same value again: %v", err)
	}
	if err := attrs.AddAnnotation("p/k", "two"); err == nil {
		t.Error("overwrote an annotation")
	}
	attrs.AddAnnotation("a/b", "x")
	keys, values := attrs.Annotations()
	if !reflect.DeepEqual(keys, []string{"p/k", "a/b"}) || values["p/k"] != "one" {
		t.Errorf("annotations %v %v", keys, values)
	}
}
