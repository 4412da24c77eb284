package mutate

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
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
	deduced managedfields.TypeConverter
	known   sync.Map // schema.GroupVersionKind → bool (built in)
}

var _ patch.TypeConverterManager = (*typeConverters)(nil)

// builtinConverter parses client-go's OpenAPI schema, some 7 MiB of heap
// and tens of milliseconds: only bundles with mutating policies pay for it
// (see Warm).
var builtinConverter = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(scheme.Scheme)
})

func newTypeConverters() *typeConverters {
	return &typeConverters{deduced: managedfields.NewDeducedTypeConverter()}
}

// Warm parses the built-in schema now rather than on the first mutating
// review. Engines serving mutating policies call it when they are built.
func Warm() { builtinConverter() }

// Run implements patch.TypeConverterManager: there is nothing to refresh.
func (t *typeConverters) Run(context.Context) {}

// GetTypeConverter implements patch.TypeConverterManager.
func (t *typeConverters) GetTypeConverter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	if t.isBuiltin(gvk) {
		return builtinConverter()
	}
	return t.deduced
}

func (t *typeConverters) isBuiltin(gvk schema.GroupVersionKind) bool {
	if v, ok := t.known.Load(gvk); ok {
		return v.(bool)
	}
	stub := &unstructured.Unstructured{}
	stub.SetGroupVersionKind(gvk)
	_, err := builtinConverter().ObjectToTyped(stub)
	t.known.Store(gvk, err == nil)
	return err == nil
}
