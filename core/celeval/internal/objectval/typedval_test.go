package objectval

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/kubernetes/scheme"
	sigsjson "sigs.k8s.io/json"
	smdvalue "sigs.k8s.io/structured-merge-diff/v6/value"
)

// typedExprs are where kube-apiserver's typed object (a built-in kind read
// by reflection over its Go value) and the unstructured value of the same
// JSON differ: zero values, keys and indexes of the wrong type or out of
// range, conversions, equality of structs, concatenations with the
// object's elements, printing.
var typedExprs = []string{
	`object.spec.containers[0.0].name`,
	`object.spec.containers[1.5]`,
	`object.spec.containers[99]`,
	`object.spec.containers[-1]`,
	`object.spec.containers["a"]`,
	`object.spec[1]`,
	`1 in object.spec`,
	`object.metadata.labels[1]`,
	`1 in object.metadata.labels`,
	`dyn(object.spec)[?1].hasValue()`,
	`optional.ofNonZeroValue(object.spec.containers[0].resources).hasValue()`,
	`optional.ofNonZeroValue(object.spec.securityContext).hasValue()`,
	`optional.ofNonZeroValue(object.spec.containers[0].lifecycle).hasValue()`,
	`object.spec.containers[0].lifecycle == {}`,
	`optional.ofNonZeroValue(object.metadata.labels).hasValue()`,
	`optional.ofNonZeroValue(object.spec.containers).hasValue()`,
	`string(object.spec)`,
	`string(object.spec.containers)`,
	`string(object.metadata.labels)`,
	`type(object.spec.containers[0]) == map && type(object.spec.containers) == list`,
	`object.spec == oldObject.spec`,
	`object.spec.containers[0] == oldObject.spec.containers[0]`,
	`object.spec.containers[1] == oldObject.spec.containers[1]`,
	`object.spec.containers == oldObject.spec.containers`,
	`object.spec.containers[1] in oldObject.spec.containers`,
	`object.spec.containers[0] in oldObject.spec.containers`,
	`object.spec.containers[0] == {"name": object.spec.containers[0].name}`,
	`{"name": object.spec.containers[0].name} == object.spec.containers[0]`,
	`object.metadata.labels == oldObject.metadata.labels`,
	`object.spec.containers + [{"name": "x"}]`,
	`[{"name": "x"}] + object.spec.containers`,
	`[object.spec.containers[0]] + object.spec.containers`,
	`(object.spec.containers + oldObject.spec.containers)[3].name`,
	`(object.spec.containers + oldObject.spec.containers)[9]`,
	`(object.spec.containers + oldObject.spec.containers) == (oldObject.spec.containers + object.spec.containers)`,
	`object.spec.containers[0] in (object.spec.containers + [])`,
	`object.spec.containers.join(",")`,
	`object.spec.containers.map(c, c.name).join(",")`,
	`object.spec.containers.map(c, {"name": c.name, "image": c.image})`,
	`object.metadata.finalizers.join(",")`,
	`"%s".format([object.spec.containers[0].name])`,
	`"%s".format([object.metadata.labels])`,
	`object.spec.containers.all(c, c.name != "")`,
	`object.metadata.labels.all(k, v, k != "")`,
	`object.spec.containers.exists(c, has(c.securityContext) && c.securityContext.?runAsNonRoot.orValue(false))`,
	`object.spec.containers[0]`,
	`object.metadata.labels`,
	`object.metadata.creationTimestamp`,
	`object.spec.containers[0].resources`,
	`object.spec.containers[0].ports`,
	`[object.spec.containers[0]]`,
	`[object.metadata.labels]`,
}

// typedPod is the perf Pod with finalizers and an empty lifecycle, and an old one that differs
// in one container's image.
func typedPod(t *testing.T) (obj, old map[string]any) {
	t.Helper()
	req := decodePod(t)
	obj = req.Object.Object
	obj["metadata"].(map[string]any)["finalizers"] = []any{"a", "b"}
	obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["lifecycle"] = map[string]any{}
	data, _ := json.Marshal(obj)
	if err := utiljson.Unmarshal(data, &old); err != nil {
		t.Fatal(err)
	}
	old["spec"].(map[string]any)["containers"].([]any)[1].(map[string]any)["image"] = "changed"
	return obj, old
}

// upstreamTyped is kube-apiserver's value of a built-in object: the JSON
// decoded into its Go type, read through the LazyObject a condition reads.
func upstreamTyped(t *testing.T, obj map[string]any, into runtime.Object) ref.Val {
	t.Helper()
	data, _ := json.Marshal(obj)
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
	lazy := admission.NewLazyObject(into)
	lazy.UseSchemalessTypeRef = true //nolint:staticcheck // upstream's switch, as its conditions set it.
	v, err := lazy.CELValue()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Over a Pod, every expression of the shared value's own cases and every
// typed difference gives what kube-apiserver's typed value gives: result,
// error text, runtime cost, and the result's conversion to JSON (what a
// JSONPatch value goes through), each evaluated twice on one shared value.
func TestTypedObjectValueMatchesUpstream(t *testing.T) {
	obj, old := typedPod(t)
	want := func() (ref.Val, ref.Val) {
		return upstreamTyped(t, obj, &corev1.Pod{}), upstreamTyped(t, old, &corev1.Pod{})
	}
	s := KindShape(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	if s == nil {
		t.Fatal("Pod has no shape")
	}
	exprs := append(append([]string{}, objectExprs...), typedExprs...)
	shared, sharedOld := Shaped(obj, s), Shaped(old, s)
	for i, prog := range programs(t, exprs) {
		up, upOld := want()
		w := evalTyped(prog, up, upOld)
		for n := range 2 {
			if got := evalTyped(prog, shared, sharedOld); got != w {
				t.Errorf("%s, evaluation %d:\n got %s\nwant %s", exprs[i], n+1, got, w)
			}
		}
	}
}

// evalTyped is an evaluation's outcome as text, as evalOn's but with the
// result's Go value as JSON (a typed value holds pointers), and the
// result's conversion to JSON.
func evalTyped(prog cel.Program, object, oldObject ref.Val) string {
	out, cost, err := evalCost(prog, object, oldObject)
	if err != nil {
		return fmt.Sprintf("error %v, cost %d", err, cost)
	}
	native, convErr := out.ConvertToNative(reflect.TypeFor[any]())
	goJSON, _ := json.Marshal(native)
	return fmt.Sprintf("%s %T %s (%v), cost %d; JSON %s", out.Type().TypeName(), native, goJSON, convErr, cost, jsonOf(out))
}

func jsonOf(v ref.Val) string {
	native, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return "error " + err.Error()
	}
	b, err := protojson.Marshal(native.(*structpb.Value))
	if err != nil {
		return "error " + err.Error()
	}
	var compact any
	_ = json.Unmarshal(b, &compact)
	out, _ := json.Marshal(compact)
	return string(out)
}

// Every kind kube-apiserver holds as a Go type has a shape; a custom
// resource's kind has none, and its object reads as cel-go's unstructured
// value.
func TestKindShapes(t *testing.T) {
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Pod"}, {Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Namespace"},
		{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "batch", Version: "v1", Kind: "CronJob"},
		{Group: "autoscaling", Version: "v1", Kind: "Scale"}, {Group: "policy", Version: "v1", Kind: "Eviction"},
	} {
		if KindShape(gvk) == nil {
			t.Errorf("%v has no shape", gvk)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "rules.admitfn.io", Version: "v1", Kind: "Limit"},
		// Served by kube-apiserver, outside client-go's scheme
		// (docs/differences.md).
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
		{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"},
	} {
		if s := KindShape(gvk); s != nil {
			t.Errorf("%v has shape %v", gvk, s.t)
		}
	}
	pod := KindShape(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	for path, want := range map[string]reflect.Type{
		"spec":                   reflect.TypeFor[corev1.PodSpec](),
		"spec.containers":        reflect.TypeFor[[]corev1.Container](),
		"spec.securityContext":   reflect.TypeFor[corev1.PodSecurityContext](),
		"metadata.labels":        reflect.TypeFor[map[string]string](),
		"metadata.managedFields": reflect.TypeFor[[]metav1.ManagedFieldsEntry](),
	} {
		s := pod
		for _, name := range splitPath(path) {
			s = s.field(name)
		}
		if s == nil || s.t != want {
			t.Errorf("%s: shape %v, want %v", path, s, want)
		}
	}
	// What converts itself to unstructured is read as that.
	for _, path := range []string{"metadata.creationTimestamp", "spec.containers.resources.limits", "metadata.managedFields.fieldsV1"} {
		s := pod
		for _, name := range splitPath(path) {
			if name == "containers" || name == "managedFields" {
				s = s.field(name).element()
				continue
			}
			s = s.field(name)
		}
		if path == "spec.containers.resources.limits" {
			if s == nil || s.field("cpu") != nil {
				t.Errorf("%s: a map of quantities read as %v", path, s)
			}
			continue
		}
		if s != nil {
			t.Errorf("%s: shape %v, want unstructured", path, s.t)
		}
	}
	if s := KindShape(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}); s.field("spec").t != reflect.TypeFor[appsv1.DeploymentSpec]() {
		t.Errorf("Deployment spec: %v", s.field("spec").t)
	}
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := range len(p) + 1 {
		if i == len(p) || p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

// An object that does not decode into its Go type (a CLI user's hand-written
// Pod with a string for a number) keeps the unstructured value rather than
// failing: kube-apiserver would have refused it before admission.
func TestTypedValueFallsBack(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a", "ports": []any{map[string]any{"containerPort": "eighty"}}}}}}
	s := KindShape(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	v := Shaped(obj, s).(*objectMap)
	spec := v.Get(types.String("spec")).(*objectMap)
	if got := spec.Equal(types.DefaultTypeAdapter.NativeToValue(obj["spec"])); got != types.True {
		t.Fatalf("spec == its unstructured value: %v", got)
	}
	if spec.shape != nil {
		t.Fatal("a part that does not decode kept its shape")
	}
}

// FuzzTypedObjectValue: on any pair of Pods, sent as kube-apiserver sends
// a webhook its typed object (the Go value encoded as JSON), expressions
// that read, test, compare, concatenate, iterate and convert them give
// over the shaped values what they give over upstream's typed ones: result,
// error text, runtime cost and JSON conversion.
func FuzzTypedObjectValue(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"spec":{"containers":[{"name":"a","resources":{},"ports":[{"containerPort":80}]}]}}`, `{"spec":{"containers":[{"name":"a"}]}}`},
		{`{"metadata":{"labels":{"a":"b"},"finalizers":["x"]},"spec":{"securityContext":{},"containers":[]}}`, `{"metadata":{"labels":{}}}`},
		{`{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1000m"}}}],"nodeName":"n"}}`, `{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1"}}}]}}`},
		{`{"spec":{"initContainers":[{"name":"i","env":[{"name":"E","value":""}]}],"hostNetwork":true}}`, `{}`},
	} {
		f.Add(seed[0], seed[1])
	}
	progs := programs(f, typedFuzzExprs)
	s := KindShape(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	f.Fuzz(func(t *testing.T, objJSON, oldJSON string) {
		obj, okObj := sentPod(objJSON)
		old, okOld := sentPod(oldJSON)
		if !okObj || !okOld {
			return
		}
		up, upOld := upstreamTyped(t, obj, &corev1.Pod{}), upstreamTyped(t, old, &corev1.Pod{})
		shared, sharedOld := Shaped(obj, s), Shaped(old, s)
		for i, prog := range progs {
			want := evalTyped(prog, up, upOld)
			if got := evalTyped(prog, shared, sharedOld); got != want {
				t.Errorf("%s on %s and %s:\n got %s\nwant %s", typedFuzzExprs[i], objJSON, oldJSON, got, want)
			}
		}
	})
}

// sentPod is the JSON a webhook receives for a Pod that decodes from
// data: the typed Pod encoded, decoded as a review's object is.
func sentPod(data string) (map[string]any, bool) {
	var pod corev1.Pod
	if sigsjson.UnmarshalCaseSensitivePreserveInts([]byte(data), &pod) != nil {
		return nil, false
	}
	sent, err := json.Marshal(&pod)
	if err != nil {
		return nil, false
	}
	var obj map[string]any
	if utiljson.Unmarshal(sent, &obj) != nil {
		return nil, false
	}
	return obj, true
}

var typedFuzzExprs = []string{
	`object.spec == oldObject.spec`,
	`object.metadata == oldObject.metadata`,
	`object.spec.?containers.orValue([]) == oldObject.spec.?containers.orValue([])`,
	`object.spec.?containers[?0].orValue(null) == oldObject.spec.?containers[?0].orValue(null)`,
	`object.spec.?containers[?0].orValue(null) in oldObject.spec.?containers.orValue([])`,
	`has(object.spec.securityContext) && has(object.spec.hostNetwork)`,
	`optional.ofNonZeroValue(object.spec.?securityContext.orValue({})).hasValue()`,
	`optional.ofNonZeroValue(object.spec.?containers.orValue([])).hasValue()`,
	`optional.ofNonZeroValue(object.metadata.?labels.orValue({})).hasValue()`,
	`object.spec.?containers[?0].?resources.orValue(null)`,
	`object.spec.?containers.orValue([]).map(c, optional.ofNonZeroValue(c.?resources.orValue({})).hasValue())`,
	`object.spec.?containers.orValue([]) + oldObject.spec.?containers.orValue([])`,
	`[object.spec] + object.spec.?initContainers.orValue([])`,
	`object.spec.?containers.orValue([]).all(c, c.all(k, k != ""))`,
	`object.spec.map(k, k).size() + size(object.metadata)`,
	`object.spec.?containers[?0].?ports.orValue([])`,
	`object.metadata.?labels.orValue({})`,
	`dyn(object.spec)[1]`,
	`dyn(object.spec.?containers.orValue([]))[0.0]`,
	`string(object.spec)`,
	`type(object.spec) == map && type(object.spec.?containers.orValue([])) == list`,
}

// structFields names every struct's fields as SMD's reflect cache does,
// which upstream's typed value reads them by: the same JSON names and
// field types, for every struct type of every kind in the scheme.
func TestStructFieldsFollowSMD(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Map || rt.Kind() == reflect.Array {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || seen[rt] {
			return
		}
		seen[rt] = true
		want := map[string]reflect.Type{}
		zero := reflect.New(rt).Elem()
		for name, f := range smdvalue.TypeReflectEntryOf(rt).Fields() {
			want[name] = f.GetFrom(zero).Type()
		}
		got := map[string]reflect.Type{}
		structFields(rt, func(name string, ft reflect.Type) { got[name] = ft })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: fields %v, SMD's %v", rt, got, want)
		}
		for _, ft := range got {
			walk(ft)
		}
	}
	for _, rt := range scheme.Scheme.AllKnownTypes() {
		walk(rt)
	}
	if len(seen) < 500 {
		t.Errorf("walked %d struct types; the scheme holds more", len(seen))
	}
}
