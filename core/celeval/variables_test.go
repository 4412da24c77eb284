package celeval

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/environment"
)

// `variables` behaves as upstream's lazy map in every operation CEL can
// apply to it, whatever the checker lets through.
func TestVariablesValueMatchesUpstream(t *testing.T) {
	upstream, err := plugincel.NewCompositedCompiler(NewCompiler().Env())
	if err != nil {
		t.Fatal(err)
	}
	vars := NewVariables()
	for _, v := range []struct{ name, expr string }{{"a", "1"}, {"b", "variables.a + 1"}, {"broken", "object.nope"}} {
		vars.Add(v.name, upstream.CompileAndStoreVariable(&validating.Variable{Name: v.name, Expression: v.expr}, plugincel.OptionalVariableDeclarations{}, environment.NewExpressions))
	}
	object := types.NewStringStringMap(types.DefaultTypeAdapter, map[string]string{})
	upstreamAct := &activation{object: object}
	want := upstream.CreateContext(context.Background()).Variables(upstreamAct)
	upstreamAct.variables = want
	act := &activation{object: object, composition: &composition{Context: context.Background(), vars: vars}}
	got := act.variablesValue()

	if g, w := got.Type().TypeName(), want.Type().TypeName(); g != w {
		t.Errorf("type %s, upstream %s", g, w)
	}
	if g, w := got.(interface{ Size() ref.Val }).Size(), want.(interface{ Size() ref.Val }).Size(); g != w {
		t.Errorf("size %v, upstream %v", g, w)
	}
	for _, key := range []ref.Val{types.String("a"), types.String("b"), types.String("broken"), types.String("c"), types.String("a__dot__b"), types.String("__if__"), types.Int(1), types.NewErr("boom")} {
		gm, wm := got.(interface {
			Find(ref.Val) (ref.Val, bool)
			Get(ref.Val) ref.Val
			Contains(ref.Val) ref.Val
		}), want.(interface {
			Find(ref.Val) (ref.Val, bool)
			Get(ref.Val) ref.Val
			Contains(ref.Val) ref.Val
		})
		gv, gf := gm.Find(key)
		wv, wf := wm.Find(key)
		if gf != wf || fmt.Sprint(gv) != fmt.Sprint(wv) {
			t.Errorf("Find(%v) = %v, %v; upstream %v, %v", key, gv, gf, wv, wf)
		}
		if g, w := fmt.Sprint(gm.Get(key)), fmt.Sprint(wm.Get(key)); g != w {
			t.Errorf("Get(%v) = %s; upstream %s", key, g, w)
		}
		if g, w := fmt.Sprint(gm.Contains(key)), fmt.Sprint(wm.Contains(key)); g != w {
			t.Errorf("Contains(%v) = %s; upstream %s", key, g, w)
		}
	}
	var gotKeys, wantKeys []string
	for it := got.(interface{ Iterator() traits.Iterator }).Iterator(); it.HasNext() == types.True; {
		gotKeys = append(gotKeys, fmt.Sprint(it.Next()))
	}
	for it := want.(interface{ Iterator() traits.Iterator }).Iterator(); it.HasNext() == types.True; {
		wantKeys = append(wantKeys, fmt.Sprint(it.Next()))
	}
	gi := got.(interface{ Iterator() traits.Iterator }).Iterator()
	wi := want.(interface{ Iterator() traits.Iterator }).Iterator()
	_, gErr := gi.ConvertToNative(reflect.TypeOf(""))
	_, wErr := wi.ConvertToNative(reflect.TypeOf(""))
	if g, w := fmt.Sprint(gi.ConvertToType(types.StringType), gErr, gi.Type(), gi.Value(), gi.Equal(gi), gi.Equal(types.Int(1))),
		fmt.Sprint(wi.ConvertToType(types.StringType), wErr, wi.Type(), wi.Value(), wi.Equal(wi), wi.Equal(types.Int(1))); g != w {
		t.Errorf("iterator: %s; upstream %s", g, w)
	}
	slices.Sort(gotKeys)
	slices.Sort(wantKeys)
	if !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("iterated %q, upstream %q", gotKeys, wantKeys)
	}
	if g, w := fmt.Sprint(got.ConvertToType(types.TypeType)), fmt.Sprint(want.ConvertToType(types.TypeType)); g != w {
		t.Errorf("type value %s, upstream %s", g, w)
	}
	if got.ConvertToType(got.Type()) != got {
		t.Errorf("conversion to its own type is not the value itself")
	}
	if g, w := fmt.Sprint(got.ConvertToType(types.StringType)), fmt.Sprint(want.ConvertToType(types.StringType)); g != w {
		t.Errorf("conversion to string %s, upstream %s", g, w)
	}
	_, gErr = got.ConvertToNative(reflect.TypeOf(""))
	_, wErr = want.ConvertToNative(reflect.TypeOf(""))
	if fmt.Sprint(gErr) != fmt.Sprint(wErr) {
		t.Errorf("ConvertToNative: %v, upstream %v", gErr, wErr)
	}
	if got.Equal(got) != types.True || got.Equal(act.composition.Variables(act)) != types.False || fmt.Sprint(got.Equal(types.Int(1))) != fmt.Sprint(want.Equal(types.Int(1))) {
		t.Errorf("equality is not by identity")
	}
	if fmt.Sprint(got.Value()) != fmt.Sprint(want.Value()) {
		t.Errorf("Value %v, upstream %v", got.Value(), want.Value())
	}
}

// A variable whose evaluation the review's deadline interrupted is not
// remembered: evaluated again, it would not end the same way.
func TestInterruptedVariableNotRemembered(t *testing.T) {
	compiler := NewCompiler().ForPolicy(true)
	vars := NewVariables()
	r := compiler.CompileAndStoreVariable(&validating.Variable{Name: "products", Expression: "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(y, x * y)).size()"}, plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.NewExpressions)
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	vars.Add("products", r)
	memo := &variableMemo{entries: make([]memoEntry, 1)}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, tc := range []struct {
		ctx  context.Context
		want string
		done bool
	}{
		{cancelled, `composited variable "products" fails to evaluate: operation interrupted: context canceled`, false},
		{context.Background(), "10", true},
	} {
		act := &activation{composition: &composition{Context: tc.ctx, vars: vars, memo: memo}}
		v, found := act.variablesValue().(*variablesValue).Find(types.String("products"))
		if !found || fmt.Sprint(v) != tc.want || memo.entries[0].done != tc.done {
			t.Errorf("with context error %v: %v (found %v), remembered %v; want %s, remembered %v", tc.ctx.Err(), v, found, memo.entries[0].done, tc.want, tc.done)
		}
	}
	if memo.entries[0].val != types.Int(10) || memo.entries[0].cost == 0 {
		t.Errorf("remembered %v at cost %d", memo.entries[0].val, memo.entries[0].cost)
	}
}
