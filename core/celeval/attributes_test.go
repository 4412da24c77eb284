package celeval

import (
	"reflect"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celcommon "k8s.io/apiserver/pkg/cel/common"

	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/core/review/reviewtest"
)

// decode is an UPDATE of a Deployment's scale subresource, with every
// request field set.
func decode(t *testing.T) *review.Request {
	return reviewtest.Read(t, "testdata/scale-review.json")
}

// decodePod is the Pod of the benchmarks (test/perf), which the Pod
// Security and library policies evaluate in full.
func decodePod(t *testing.T) *review.Request {
	return reviewtest.Read(t, "../../test/perf/testdata/pod-review.json")
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
	act, err := newActivation(plain, upstreamReq, plugincel.OptionalVariableBindings{}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := act.request.(ref.Val); !ok || got.Equal(shared) != types.True || act.namespace != types.NullValue {
		t.Errorf("fallback activation: request %v, namespace %v", act.request, act.namespace)
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

// versioned is what upstream's dispatcher gives a validator for req, on a
// validating review.
func versioned(req *review.Request) (*Attributes, *admission.VersionedAttributes) {
	attrs := NewAttributes(req).Validating()
	return attrs, &admission.VersionedAttributes{Attributes: attrs, VersionedKind: attrs.GetKind(), VersionedObject: admission.NewLazyObject(attrs.GetObject()), VersionedOldObject: admission.NewLazyObject(attrs.GetOldObject())}
}
