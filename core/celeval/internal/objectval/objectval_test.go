package objectval

import (
	"fmt"
	"github.com/admitfn/admitfn/core/review"
	"github.com/admitfn/admitfn/core/review/reviewtest"
	"reflect"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Expressions over the shared object value (Of) and over
// upstream's (cel-go's DefaultTypeAdapter over the same map, as
// admission.LazyObject builds it) give the same result, the same error
// text and the same runtime cost, every expression evaluated twice on one
// shared value so the second reads what the first remembered. The cases
// reach every operation the shared value does itself (field and element
// reads, iteration, folds, `in` on a map, emptiness, printing) and those it
// leaves to cel-go (equality both ways, conversion, concatenation, size,
// indexes that are not in-range integers).
func TestObjectValueMatchesUpstream(t *testing.T) {
	pod, old := decodePod(t), decodePod(t)
	// The old object differs in one nested field, so equality walks it.
	old.Object.Object["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "changed"
	obj := pod.Object.Object
	obj["extra"] = map[string]any{"nothing": nil, "float": 1.5, "big": int64(1) << 62, "nested": []any{[]any{int64(1), "a"}, map[string]any{}}, "dots.and-dashes": true, "empty": []any{}, "one": []any{"x"}}
	for i := range 12 { // past smallMap, so a map remembers in both ways
		obj["extra"].(map[string]any)[fmt.Sprintf("k%02d", i)] = int64(i)
	}

	for i, prog := range programs(t, objectExprs) {
		if msg := compareValues(prog, obj, old.Object.Object); msg != "" {
			t.Errorf("%s: %s", objectExprs[i], msg)
		}
	}
}

// objectExprs reach every operation of the object's values.
var objectExprs = []string{
	// reads, presence, optionals
	`object.spec.containers[0].name`,
	`object.spec.containers[1].securityContext.runAsNonRoot`,
	`object.metadata.labels`,
	`has(object.spec.hostNetwork)`,
	`has(object.spec.containers[0].securityContext)`,
	`object.?spec.?nodeName.orValue("none")`,
	`object.spec.containers[?7].hasValue()`,
	`object.spec.containers[?0].?name.orValue("")`,
	`object.extra.nothing == null`,
	`object.extra.float + 1.0`,
	`object.extra.big`,
	`object.extra.nested[0][1]`,
	`object.extra["dots.and-dashes"]`,
	`object.extra.k11`,
	`object.missing`,
	`object.spec.containers[1.0].name`,
	`object.spec.containers[1.5]`,
	`object.spec.containers[-1]`,
	`object.spec.containers[99]`,
	`object.spec.containers["a"]`,
	`object[1]`,
	`dyn(object)[1] == 1`,
	// iteration and folds
	`object.spec.containers.all(c, has(c.resources) && c.resources.?limits.?memory.hasValue())`,
	`object.spec.containers.exists(c, c.image.endsWith(":latest"))`,
	`object.spec.containers.map(c, c.name)`,
	`object.spec.containers.filter(c, c.?securityContext.?privileged.orValue(false))`,
	`object.spec.containers.all(i, c, i >= 0 && c.name != "")`,
	`object.spec.containers.transformList(i, c, c.name + string(i))`,
	`object.extra.all(k, v, k != "" && (type(v) != int || v >= 0))`,
	`object.extra.transformMap(k, v, type(v) == int, v + 1)`,
	`object.metadata.labels.exists(k, object.metadata.labels[k] == "web")`,
	`object.extra.map(k, k).size()`,
	`[object.spec.containers, object.spec.containers].map(l, l.size())`,
	// what cel-go's own value does
	`object == oldObject`,
	`oldObject == object`,
	`object.spec.containers == oldObject.spec.containers`,
	`object.metadata == oldObject.metadata`,
	`object.spec.containers + object.spec.containers`,
	`(object.spec.containers + oldObject.spec.containers)[2].name`,
	`object.spec.containers + []`,
	`[] + object.spec.containers`,
	`object.spec.containers[0] in object.spec.containers`,
	`"spec" in object`,
	`1 in object`,
	`object.spec.containers.size()`,
	`size(object.extra)`,
	`string(object.metadata.name)`,
	`type(object.spec.containers) == list && type(object.spec) == map`,
	`object.spec.containers.sortBy(c, c.name).map(c, c.name)`,
	`object.spec.containers.map(c, c.name).isSorted()`,
	`optional.ofNonZeroValue(object.extra.nested[1]).hasValue()`,
	`optional.ofNonZeroValue(object.spec.containers).hasValue()`,
	`optional.ofNonZeroValue(object.extra.empty).hasValue()`,
	`optional.ofNonZeroValue(object.extra.one).hasValue()`,
	`object.extra.one + object.extra.empty + object.extra.one`,
	`object.extra.nested[1] == {}`,
	`object.spec.containers.map(c, c.?ports.orValue([])).exists(p, p.size() > 0)`,
	`object.spec.containers[0].ports[0].containerPort + 0`,
	// concatenations with the object's lists first
	`(object.spec.containers + object.spec.initContainers).map(c, c.name)`,
	`(object.spec.containers + object.spec.initContainers + object.spec.containers).all(i, c, c.name != "" && i >= 0)`,
	`(object.spec.containers + object.spec.initContainers).transformList(i, c, string(i) + c.name)`,
	`(object.spec.containers + object.spec.initContainers).exists(c, c.name == "migrate")`,
	`(object.spec.containers + object.spec.initContainers)[2].name`,
	`(object.spec.containers + object.spec.initContainers)[1.0].name`,
	`(object.spec.containers + object.spec.initContainers)[1.5]`,
	`(object.spec.containers + object.spec.initContainers)[-1]`,
	`(object.spec.containers + object.spec.initContainers)[99]`,
	`(object.spec.containers + object.spec.initContainers)[?5].hasValue()`,
	`(object.spec.containers + object.spec.initContainers) == (object.spec.containers + object.spec.initContainers)`,
	`(object.spec.containers + object.spec.initContainers) == object.spec.containers`,
	`(object.spec.containers + object.spec.initContainers) == oldObject.spec.containers + oldObject.spec.initContainers`,
	`oldObject.spec.containers + oldObject.spec.initContainers == object.spec.containers + object.spec.initContainers`,
	`object.spec.initContainers[0] in (object.spec.containers + object.spec.initContainers)`,
	`object.spec.containers[1] in (object.spec.containers + object.spec.initContainers)`,
	`oldObject.spec.containers[0] in (object.spec.containers + object.spec.initContainers)`,
	`"x" in (object.extra.one + object.extra.one)`,
	`(object.extra.one + object.extra.one).join(",")`,
	`(object.extra.one + object.extra.one + ["y"]).join(",")`,
	`optional.ofNonZeroValue(object.extra.one + object.extra.one).hasValue()`,
	`type(object.extra.one + object.extra.one) == list`,
	`dyn(object.extra.one) + 1`,
	`dyn(object.extra.one + object.extra.one) + 1`,
	`(object.extra.nested[0] + [2]).map(x, string(x))`,
	`(object.extra.one + object.extra.one).size() + size(object.extra.one + object.extra.empty)`,
	`object.spec.containers + object.spec.initContainers`,
}

// programs compiles exprs as a policy's expressions are, with `object` and
// `oldObject` and kube-apiserver's cost limit per call.
func programs(tb testing.TB, exprs []string) []cel.Program {
	tb.Helper()
	base, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable(plugincel.ObjectVarName, cel.DynType), cel.Variable(plugincel.OldObjectVarName, cel.DynType)},
	}, environment.StrictCostOpt)
	if err != nil {
		tb.Fatal(err)
	}
	env, err := base.Env(environment.NewExpressions)
	if err != nil {
		tb.Fatal(err)
	}
	var progs []cel.Program
	for _, expr := range exprs {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			tb.Fatalf("%s: %v", expr, iss.Err())
		}
		prog, err := env.Program(ast, cel.CostTracking(nil), cel.CostLimit(1_000_000))
		if err != nil {
			tb.Fatalf("%s: %v", expr, err)
		}
		progs = append(progs, prog)
	}
	return progs
}

// compareValues evaluates prog over upstream's values of obj and old and
// twice over the shared ones (the second evaluation reads what the first
// remembered), and says how they differ, or "".
func compareValues(prog cel.Program, obj, old map[string]any) string {
	want := evalOn(prog, types.DefaultTypeAdapter.NativeToValue(obj), types.DefaultTypeAdapter.NativeToValue(old))
	shared, sharedOld := Of(obj), Of(old)
	for i := range 2 {
		if got := evalOn(prog, shared, sharedOld); got != want {
			return fmt.Sprintf("evaluation %d:\n got %s\nwant %s", i+1, got, want)
		}
	}
	return ""
}

// evalOn is an evaluation's outcome as text: the value (its type and Go
// value) or the error, and the runtime cost.
func evalOn(prog cel.Program, object, oldObject ref.Val) string {
	out, cost, err := evalCost(prog, object, oldObject)
	if err != nil {
		return fmt.Sprintf("error %v, cost %d", err, cost)
	}
	native, convErr := out.ConvertToNative(reflect.TypeFor[any]())
	return fmt.Sprintf("%s %#v (%v), cost %d", out.Type().TypeName(), native, convErr, cost)
}

// evalCost evaluates prog over object and oldObject: the result, its
// runtime cost, the error.
func evalCost(prog cel.Program, object, oldObject ref.Val) (ref.Val, uint64, error) {
	out, det, err := prog.Eval(map[string]any{plugincel.ObjectVarName: object, plugincel.OldObjectVarName: oldObject})
	cost := uint64(0)
	if det != nil && det.ActualCost() != nil {
		cost = *det.ActualCost()
	}
	return out, cost, err
}

// The shared value remembers what it read: the same field or element is
// the same CEL value on every read, through Get, Find, an iterator and a
// fold alike.
func TestObjectValueRemembers(t *testing.T) {
	m := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}}
	obj := Of(m).(traits.Mapper)
	spec := obj.Get(types.String("spec"))
	if again, _ := obj.Find(types.String("spec")); again != spec {
		t.Fatal("a field read twice is converted twice")
	}
	list := spec.(traits.Mapper).Get(types.String("containers")).(traits.Lister)
	first := list.Get(types.Int(0))
	it := list.Iterator()
	if it.HasNext() != types.True || it.Next() != first || it.Next() != list.Get(types.Int(1)) || it.HasNext() != types.False || it.Next() != nil {
		t.Fatal("the iterator does not give the remembered elements")
	}
	var folded []ref.Val
	list.(traits.Foldable).Fold(folder(func(_, v any) bool { folded = append(folded, v.(ref.Val)); return true }))
	if len(folded) != 2 || folded[0] != first {
		t.Fatalf("fold gave %v", folded)
	}
	if list.Get(types.Double(0)).Equal(first) != types.True {
		t.Fatal("a lossless double index reads another element")
	}
	// A map read in more fields than smallMap remembers every one of them.
	wide := map[string]any{}
	for i := range 3 * smallMap {
		wide[fmt.Sprint(i)] = map[string]any{}
	}
	w := Of(wide).(traits.Mapper)
	read := map[string]ref.Val{}
	for k := range wide {
		read[k] = w.Get(types.String(k))
	}
	for k, v := range read {
		if w.Get(types.String(k)) != v {
			t.Fatalf("field %s of a wide map converted twice", k)
		}
	}
	// A concatenation prints as cel-go's does.
	celList := types.DefaultTypeAdapter.NativeToValue(m["spec"].(map[string]any)["containers"]).(traits.Lister)
	if got, want := fmt.Sprint(list.Add(list)), fmt.Sprint(celList.Add(celList)); got != want {
		t.Fatalf("concatenation printed %s, cel-go prints %s", got, want)
	}
	if obj.(traits.Zeroer).IsZeroValue() || Of(map[string]any{}).(traits.Zeroer).IsZeroValue() != true {
		t.Fatal("emptiness")
	}
	if got, want := fmt.Sprint(list), fmt.Sprint(types.DefaultTypeAdapter.NativeToValue(m["spec"].(map[string]any)["containers"])); got != want {
		t.Fatalf("printed %s, cel-go prints %s", got, want)
	}
}

type folder func(k, v any) bool

func (f folder) FoldEntry(k, v any) bool { return f(k, v) }

// FuzzObjectValue: on any pair of JSON objects, as util/json decodes them,
// expressions that read, index, concatenate, compare and iterate them give
// over the shared values what they give over upstream's: result, error text
// and runtime cost. (No comprehension here may stop early over a map's keys,
// whose order is Go's map order: its cost would differ between two
// evaluations of upstream's value alone.)
func FuzzObjectValue(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"a":[1,"x",null,{"b":2}],"b":[true]}`, `{"a":[1,"x",null,{"b":2}]}`},
		{`{"a":{"b":{"c":[[]]}},"b":{}}`, `{"a":{"b":3}}`},
		{`{"a":[{"b":[1,2]},{"b":"s"}],"b":[{"b":1.5e300}]}`, `{"a":[]}`},
		{`{"a":1,"b":"x","c":[1,2,3]}`, `{"a":1,"b":"x","c":[1,2,3]}`},
		{`{}`, `{"a":null}`},
		{`{"a":[1],"b":[2]}`, `{"a":[1,2,3]}`},
	} {
		f.Add(seed[0], seed[1])
	}
	progs := programs(f, fuzzExprs)
	f.Fuzz(func(t *testing.T, objJSON, oldJSON string) {
		var obj, old map[string]any
		if utiljson.Unmarshal([]byte(objJSON), &obj) != nil || utiljson.Unmarshal([]byte(oldJSON), &old) != nil || obj == nil || old == nil {
			return
		}
		for i, prog := range progs {
			if msg := compareValues(prog, obj, old); msg != "" {
				t.Errorf("%s on %s and %s: %s", fuzzExprs[i], objJSON, oldJSON, msg)
			}
		}
	})
}

var fuzzExprs = []string{
	`object == oldObject`,
	`oldObject == object`,
	`object.?a.orValue(null)`,
	`object.?a.?b.orValue(0)`,
	`has(object.a) && has(object.a.b)`,
	`type(object.?a.orValue(null))`,
	`object.?a.orValue(null) == oldObject.?a.orValue(null)`,
	`dyn(object.?a.orValue([]))[0]`,
	`dyn(object.?a.orValue([]))[1.0]`,
	`dyn(object.?a.orValue([]))[-1]`,
	`dyn(object.?a.orValue([]))[?1].orValue("none")`,
	`dyn(object.?a.orValue([])) + dyn(object.?b.orValue([]))`,
	`(dyn(object.?a.orValue([])) + dyn(object.?b.orValue([])) + dyn(object.?c.orValue([])))[?2].orValue("none")`,
	`(dyn(object.?a.orValue([])) + dyn(object.?b.orValue([]))) == dyn(oldObject.?a.orValue([]))`,
	`dyn(object.?a.orValue([])) + dyn(object.?b.orValue([])) == dyn(object.?b.orValue([])) + dyn(object.?a.orValue([]))`,
	`dyn(object.?b.orValue([])).all(x, x in (dyn(object.?a.orValue([])) + dyn(object.?b.orValue([]))))`,
	`dyn(object.?a.orValue([])).map(x, type(x))`,
	`dyn(object.?a.orValue([])).exists(x, type(x) == map && x.filter(k, k == "b").size() == 1)`,
	`dyn(object.?a.orValue([])).all(i, x, i >= 0 && x != object)`,
	`(dyn(object.?a.orValue([])) + dyn(object.?a.orValue([]))).transformList(i, x, type(x) == list ? i : -i)`,
	`dyn(object.?a.orValue([])).size()`,
	`size(object) + size(oldObject)`,
	`object.filter(k, type(object[k]) == map).size()`,
	`object.map(k, type(object[k])).size()`,
	`object.transformMap(k, v, type(v)).size()`,
	`"a" in object && dyn(object.a) in [object.a]`,
	`optional.ofNonZeroValue(object.?a.orValue(0)).hasValue()`,
	`[object.?a.orValue(0)].exists(x, x == oldObject.?a.orValue(0))`,
	`object.?a.?b.?c.orValue([]) == oldObject.?a.?b.?c.orValue([])`,
}

func decodePod(t *testing.T) *review.Request {
	return reviewtest.Read(t, "../../../../test/perf/testdata/pod-review.json")
}
