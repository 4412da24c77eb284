package mutate

import (
	"context"
	"sync"
	"sync/atomic"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// typeConverters gives upstream's patchers the schema of a kind:
//   - built-in kinds: the OpenAPI schema compiled into client-go for the
//     Kubernetes version admitfn tracks, the schema kube-apiserver itself
//     publishes, so ApplyConfiguration merges exactly as in-cluster (list
//     maps such as containers keyed by name, atomic structs refused);
//   - any other kind (custom resources): a deduced schema, since the function
//     cannot read the cluster's CRDs. Maps merge key by key and a list in an
//     ApplyConfiguration replaces the object's list as a whole. In-cluster, a
//     CRD's schema decides: a list without x-kubernetes-list-type is atomic
//     there, and setting it is refused ("may not mutate atomic arrays");
//     admitfn cannot know, so it replaces. JSONPatch works on anything.
type typeConverters struct {
	builtin func() managedfields.TypeConverter // builtinConverter; tests count its calls
	deduced managedfields.TypeConverter
	known   sync.Map // schema.GroupVersionKind → bool (built in)
}

var _ patch.TypeConverterManager = (*typeConverters)(nil)

// builtinConverter parses client-go's OpenAPI schema, some 7 MiB of heap
// and tens of milliseconds: only bundles with ApplyConfiguration mutations
// pay for it (see Warm and NeedsSchema).
var builtinConverter = sync.OnceValue(func() managedfields.TypeConverter {
	defer schemaParsed.Store(true)
	return applyconfigurations.NewTypeConverter(scheme.Scheme)
})

var schemaParsed atomic.Bool

// SchemaParsed reports whether the built-in schema has been parsed (see
// Warm).
func SchemaParsed() bool { return schemaParsed.Load() }

func newTypeConverters() *typeConverters {
	return &typeConverters{builtin: builtinConverter, deduced: managedfields.NewDeducedTypeConverter()}
}

// Warm parses the built-in schema now rather than on the first review that
// needs it, and returns when it is parsed (at once if it was). Engines
// serving a policy that NeedsSchema start it in the background when they
// are built.
func Warm() { builtinConverter() }

// NeedsSchema reports whether p has an ApplyConfiguration mutation, whose
// merge needs the schema of the object's kind. A JSON Patch applies to the
// object as it is and its result is decoded into the kind's Go type, as
// kube-apiserver decodes it: no schema.
func NeedsSchema(p *admissionregistrationv1.MutatingAdmissionPolicy) bool {
	for _, m := range p.Spec.Mutations {
		if m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration {
			return true
		}
	}
	return false
}

// Run implements patch.TypeConverterManager: there is nothing to refresh.
func (t *typeConverters) Run(context.Context) {}

// GetTypeConverter implements patch.TypeConverterManager. Upstream's
// dispatcher asks for a converter before every mutation, of either patch
// type, but only an ApplyConfiguration uses it: the converter returned
// chooses between the built-in schema and a deduced one when it is first
// used, so a JSON Patch never parses the built-in schema.
func (t *typeConverters) GetTypeConverter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	return lazyConverter{t: t, gvk: gvk}
}

func (t *typeConverters) converter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	if t.isBuiltin(gvk) {
		return t.builtin()
	}
	return t.deduced
}

func (t *typeConverters) isBuiltin(gvk schema.GroupVersionKind) bool {
	if v, ok := t.known.Load(gvk); ok {
		return v.(bool)
	}
	stub := &unstructured.Unstructured{}
	stub.SetGroupVersionKind(gvk)
	_, err := t.builtin().ObjectToTyped(stub)
	t.known.Store(gvk, err == nil)
	return err == nil
}

// lazyConverter is the converter of one kind, chosen on first use.
type lazyConverter struct {
	t   *typeConverters
	gvk schema.GroupVersionKind
}

func (c lazyConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	return c.t.converter(c.gvk).ObjectToTyped(obj, opts...)
}

func (c lazyConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return c.t.converter(c.gvk).TypedToObject(v)
}
