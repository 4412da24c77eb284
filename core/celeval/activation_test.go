package celeval

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"

	"github.com/admitfn/admitfn/core/celeval/internal/objectval"
)

// On a validating review an object has one shared value, renewed if the
// versioned object is another; elsewhere (mutating reviews, whose object
// changes) the value is upstream's LazyObject's.
func TestCelObjectShared(t *testing.T) {
	req := decode(t)
	attrs, va := versioned(req)
	v1, err := attrs.celObject(&va.VersionedObject, &attrs.object)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.TypeOf(v1) != reflect.TypeOf(objectval.Of(map[string]any{})) {
		t.Fatalf("validating review: object value %T, want the shared value", v1)
	}
	if again, _ := attrs.celObject(&va.VersionedObject, &attrs.object); again != v1 {
		t.Fatal("object value rebuilt within one review")
	}
	old, _ := attrs.celObject(&va.VersionedOldObject, &attrs.oldObject)
	if old.Equal(v1) != types.False {
		t.Fatal("oldObject shares object's value")
	}
	other := decode(t)
	other.Object.Object["spec"] = map[string]any{"replicas": int64(9)}
	va.VersionedObject.Set(other.Object)
	v2, _ := attrs.celObject(&va.VersionedObject, &attrs.object)
	if v2 == v1 || v2.Equal(types.DefaultTypeAdapter.NativeToValue(other.Object.Object)) != types.True {
		t.Fatal("a new versioned object kept the old one's value")
	}
	if none, err := attrs.celObject(&admission.LazyObject{}, &sharedObject{}); none != nil || err != nil {
		t.Fatalf("no object: %v %v", none, err)
	}

	mutating := NewAttributes(req)
	lazy := admission.NewLazyObject(req.Object)
	got, _ := mutating.celObject(&lazy, &mutating.object)
	if want, _ := lazy.CELValue(); got != want {
		t.Fatalf("mutating review: %T, want upstream's value", got)
	}
}

// `variables` is built when an expression first reads it, once per
// activation.
func TestVariablesBuiltWhenRead(t *testing.T) {
	vars := NewVariables()
	vars.Add("a", plugincel.CompilationResult{})
	act := &activation{composition: &composition{Context: context.Background(), vars: vars}}
	if _, ok := act.ResolveName(plugincel.ObjectVarName); !ok || act.variables != nil {
		t.Fatalf("reading object built variables: %v", act.variables)
	}
	v1, _ := act.ResolveName(plugincel.VariableVarName)
	v2, _ := act.ResolveName(plugincel.VariableVarName)
	m, ok := v1.(*variablesValue)
	if !ok || v1 != v2 {
		t.Fatalf("variables is %T, the same value twice: %v", v1, v1 == v2)
	}
	if m.activation != act || m.Size() != types.Int(1) {
		t.Fatalf("variables of activation %p (want %p), size %v", m.activation, act, m.Size())
	}
	if got := m.Equal(v2.(ref.Val)); got != types.True {
		t.Fatalf("variables == variables is %v", got)
	}
}
