package celeval

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celcommon "k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"

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

// Params of a built-in kind are what each upstream dispatcher gives CEL:
// the validating one wraps the informer's typed object so that CEL reads it
// unstructured with the paramKind's apiVersion and kind (the bundle's
// object as it is); the mutating one gives the typed object, read through
// its Go type, without apiVersion and kind (the informer keeps none).
// A custom resource's params are unstructured in both.
func TestParamsAsTheDispatchersGiveThem(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "p"}, "data": map[string]any{"a": "1"}}}
	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Data: map[string]string{"a": "1"}}
	crd := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rules.admitfn.io/v1", "kind": "Limit", "metadata": map[string]any{"name": "p"}, "max": int64(3)}}
	eval := func(expr string, params ref.Val) string {
		out, _, err := program(t, expr, plugincel.ParamsVarName).Eval(map[string]any{plugincel.ParamsVarName: params})
		if err != nil {
			return "error " + err.Error()
		}
		return fmt.Sprint(out)
	}
	for _, expr := range []string{`has(params.kind) ? params.kind : "none"`, `params.data[1]`, `optional.ofNonZeroValue(params.metadata).hasValue()`, `params.data == {"a": "1"}`} {
		if got, want := eval(expr, paramsValue(cm, false)), eval(expr, celcommon.SchemalessTypedToVal(cm)); got != want {
			t.Errorf("validating, %s: %s, want %s", expr, got, want)
		}
		if got, want := eval(expr, paramsValue(cm, true)), eval(expr, celcommon.SchemalessTypedToVal(typed)); got != want {
			t.Errorf("mutating, %s: %s, want %s", expr, got, want)
		}
	}
	if got := eval(`has(params.kind) ? params.kind : "none"`, paramsValue(cm, true)); got != "none" {
		t.Errorf("a mutating policy's built-in params have kind %s", got)
	}
	if got := eval(`params.kind`, paramsValue(crd, true)); got != "Limit" {
		t.Errorf("a custom resource's params: kind %s", got)
	}
}

// A mutating review's object value is kept, as upstream's LazyObject keeps
// it, until the object is replaced: read before a condition switched the
// object to its Go type, it stays unstructured; the next object, read
// after, is typed (a built-in kind); with no switch it is upstream's.
func TestMutatingValueKeptUntilReplaced(t *testing.T) {
	req := decodePod(t)
	attrs := NewAttributes(req)
	lazy := admission.NewLazyObject(req.Object)
	zero := `optional.ofNonZeroValue(object.spec.containers[0].lifecycle).hasValue()`
	req.Object.Object["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["lifecycle"] = map[string]any{}
	prog := program(t, zero, plugincel.ObjectVarName, plugincel.OldObjectVarName)
	eval := func() string {
		v, err := attrs.celObject(&lazy, &attrs.object)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prog.Eval(map[string]any{plugincel.ObjectVarName: v, plugincel.OldObjectVarName: nil})
		return fmt.Sprint(out, err)
	}
	before := eval()
	if want, _ := lazy.CELValue(); before != "false <nil>" || want == nil {
		t.Fatalf("before the switch: %s, want false (unstructured, as upstream's %T)", before, want)
	}
	lazy.UseSchemalessTypeRef = true //nolint:staticcheck // upstream's switch, set as a condition sets it.
	if got := eval(); got != before {
		t.Fatalf("after the switch, same object: %s, want the kept %s", got, before)
	}
	lazy.Set(req.Object.DeepCopy())
	if got := eval(); got != "true <nil>" {
		t.Fatalf("after the switch, a new object: %s, want true (typed: a struct is never zero)", got)
	}
}

// program compiles expr in kube-apiserver's base environment with vars
// declared dyn.
func program(t *testing.T, expr string, vars ...string) cel.Program {
	t.Helper()
	var opts []cel.EnvOption
	for _, v := range vars {
		opts = append(opts, cel.Variable(v, cel.DynType))
	}
	set, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{IntroducedVersion: version.MajorMinor(1, 0), EnvOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	env, err := set.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prog, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	return prog
}
