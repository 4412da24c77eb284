// Package objectval is the CEL value of a request's object, oldObject
// and params: what kube-apiserver's activation gives an expression, read
// faster.
//
// The CEL value of a request's object, as kube-apiserver builds it
// (admission.LazyObject.CELValue: cel-go's DefaultTypeAdapter over the
// unstructured map), converts a field anew each time an expression reads it:
// every read of `c.securityContext` in a comprehension over the containers,
// in every policy, wraps the same map again, and every list goes through
// cel-go's reflection. Of gives that value with a memory: a map or list
// remembers the CEL value of each field or element once read, so the
// policies of a validating review share one conversion of each part of the
// object they read. A concatenation with the object's list first is
// cel-go's, rewritten to read through the lists. Everything but reading a
// field or an element, its size and its Go value (equality, conversion, `in`
// on a list, iterating a map's keys, printing) is done by cel-go's own
// value, built the first time it is needed, so the values behave exactly as
// upstream's; only reads are remembered, and CEL values are immutable.
//
// An object of a built-in kind has a shape (typedval.go): its maps and
// lists then delegate to upstream's reflected value instead of cel-go's,
// and are never zero values, as kube-apiserver's typed object is.
//
// The object must not change while its value is in use: a validating
// review's is shared by every policy; a mutating review's is made anew for
// each evaluation.
package objectval

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Of is the CEL value of v, a value of an unstructured object.
func Of(v any) ref.Val { return Shaped(v, nil) }

// shapeFor is the shape of raw, a field name of a map of shape s or, with
// no name, an element of a list of shape s; looked up only for what a
// shape changes (maps, lists, integers that may be floats): most reads are
// of strings.
func shapeFor(raw any, s *Shape, name string) *Shape {
	if s == nil {
		return nil
	}
	switch raw.(type) {
	case map[string]any, []any, int64:
		if name == "" {
			return s.element()
		}
		return s.field(name)
	}
	return nil
}

// Shaped is the CEL value of v, a part of an object of shape s (nil
// for a custom resource's, or a part read as unstructured).
func Shaped(v any, s *Shape) ref.Val {
	if s != nil && s.t == nil && v != nil {
		if _, ok := v.(int64); !ok {
			s = nil // a float's shape on anything but a number
		}
	}
	switch v := v.(type) {
	case map[string]any:
		return &objectMap{m: v, shape: s}
	case []any:
		return &objectList{s: v, shape: s}
	case int64:
		if s != nil && s.float {
			return types.Double(v)
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// smallMap is how many fields a map remembers in place before it remembers
// them in a Go map: most of an object's maps are read a few fields each.
const smallMap = 4

type objectMap struct {
	m     map[string]any
	shape *Shape
	cel   traits.Mapper // cel-go's value of m, or upstream's typed one, once needed
	nfew  int
	few   [smallMap]objectField
	many  map[string]ref.Val
}

type objectField struct {
	name string
	val  ref.Val
}

var (
	_ traits.Mapper   = (*objectMap)(nil)
	_ traits.Foldable = (*objectMap)(nil)
	_ traits.Zeroer   = (*objectMap)(nil)
	_ traits.Lister   = (*objectList)(nil)
	_ traits.Foldable = (*objectList)(nil)
	_ traits.Zeroer   = (*objectList)(nil)
)

// upstream is the map's value as LazyObject.CELValue makes it: reflected
// over its Go type when it has one, else cel-go's.
func (o *objectMap) upstream() traits.Mapper {
	if o.cel == nil {
		if o.shape != nil {
			if v, ok := typedValue(o.shape, o.m); ok {
				o.cel = v.(traits.Mapper)
				return o.cel
			}
			o.shape = nil
		}
		o.cel = types.NewStringInterfaceMap(types.DefaultTypeAdapter, o.m).(traits.Mapper)
	}
	return o.cel
}

// field is the remembered value of m[name], raw.
func (o *objectMap) field(name string, raw any) ref.Val {
	if o.many != nil {
		if v, ok := o.many[name]; ok {
			return v
		}
	} else {
		for _, f := range o.few[:o.nfew] {
			if f.name == name {
				return f.val
			}
		}
	}
	v := Shaped(raw, shapeFor(raw, o.shape, name))
	switch {
	case o.many != nil:
		o.many[name] = v
	case o.nfew < smallMap:
		o.few[o.nfew] = objectField{name, v}
		o.nfew++
	default:
		o.many = make(map[string]ref.Val, 4*smallMap)
		for _, f := range o.few {
			o.many[f.name] = f.val
		}
		o.many[name] = v
		o.few, o.nfew = [smallMap]objectField{}, 0
	}
	return v
}

// Find is cel-go's string-keyed map's: a key that is not a string is not
// found (an error, for a typed map).
func (o *objectMap) Find(key ref.Val) (ref.Val, bool) {
	name, ok := key.(types.String)
	if !ok {
		if o.shape != nil {
			return o.upstream().Find(key)
		}
		return nil, false
	}
	raw, ok := o.m[string(name)]
	if !ok {
		return nil, false
	}
	return o.field(string(name), raw), true
}

// Get is cel-go's map's, over Find.
func (o *objectMap) Get(key ref.Val) ref.Val {
	if _, ok := key.(types.String); !ok && o.shape != nil {
		return o.upstream().Get(key)
	}
	v, found := o.Find(key)
	if !found {
		return types.ValOrErr(v, "no such key: %v", key)
	}
	return v
}

// Contains is cel-go's map's, over Find.
func (o *objectMap) Contains(key ref.Val) ref.Val {
	if _, ok := key.(types.String); !ok && o.shape != nil {
		return o.upstream().Contains(key)
	}
	_, found := o.Find(key)
	return types.Bool(found)
}

// Fold gives each key and its remembered value, in Go's map order as cel-go
// does.
func (o *objectMap) Fold(f traits.Folder) {
	for name, raw := range o.m {
		if !f.FoldEntry(name, o.field(name, raw)) {
			break
		}
	}
}

func (o *objectMap) Size() ref.Val  { return types.Int(len(o.m)) }
func (o *objectMap) Type() ref.Type { return types.MapType }

// IsZeroValue: a typed struct or map is never zero upstream.
func (o *objectMap) IsZeroValue() bool { return o.shape == nil && len(o.m) == 0 }

// Value is the Go value: the unstructured map, or the typed one.
func (o *objectMap) Value() any {
	if o.shape != nil {
		return o.upstream().Value()
	}
	return o.m
}

// Iterator gives the map's keys: a typed struct's are the fields its JSON
// holds, a typed map's its keys, so cel-go's iterator over the JSON gives
// them without decoding the Go value (in Go's map order, as both do).
func (o *objectMap) Iterator() traits.Iterator {
	if o.shape != nil {
		return types.NewStringInterfaceMap(types.DefaultTypeAdapter, o.m).(traits.Mapper).Iterator()
	}
	return o.upstream().Iterator()
}
func (o *objectMap) Equal(other ref.Val) ref.Val {
	return o.upstream().Equal(typedOrSelf(other))
}
func (o *objectMap) ConvertToNative(t reflect.Type) (any, error) {
	return o.upstream().ConvertToNative(t)
}
func (o *objectMap) ConvertToType(t ref.Type) ref.Val { return o.upstream().ConvertToType(t) }
func (o *objectMap) String() string                   { return fmt.Sprint(o.upstream()) }

type objectList struct {
	s     []any
	shape *Shape
	cel   traits.Lister // cel-go's value of s, or upstream's typed one, once needed
	elems []ref.Val
}

// upstream is the list's value as LazyObject.CELValue makes it: reflected
// over its Go type when it has one, else cel-go's.
func (l *objectList) upstream() traits.Lister {
	if l.cel == nil {
		if l.shape != nil {
			if v, ok := typedValue(l.shape, l.s); ok {
				l.cel = v.(traits.Lister)
				return l.cel
			}
			l.shape = nil
		}
		l.cel = types.DefaultTypeAdapter.NativeToValue(l.s).(traits.Lister)
	}
	return l.cel
}

func (l *objectList) elem(i int) ref.Val {
	if l.elems == nil {
		l.elems = make([]ref.Val, len(l.s))
	}
	if l.elems[i] == nil {
		l.elems[i] = Shaped(l.s[i], shapeFor(l.s[i], l.shape, ""))
	}
	return l.elems[i]
}

// Get remembers the elements read by an integer index in range; any other
// index (a lossless double, one out of range, a wrong type) is cel-go's,
// errors included.
func (l *objectList) Get(index ref.Val) ref.Val {
	if i, ok := index.(types.Int); ok && i >= 0 && int64(i) < int64(len(l.s)) {
		return l.elem(int(i))
	}
	return l.upstream().Get(index)
}

func (l *objectList) Iterator() traits.Iterator { return newListIterator(l) }

// Add is cel-go's, with this list first: the concatenation reads its
// elements through it. A typed list's is upstream's: a list of both lists'
// elements (read through this one), converted element by element.
func (l *objectList) Add(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	if l.shape != nil {
		n, _ := o.Size().(types.Int)
		elems := make([]ref.Val, 0, len(l.s)+int(n))
		for i := range l.s {
			elems = append(elems, l.elem(i))
		}
		// Upstream iterates the other list; reading it by index gives
		// the same elements without an iterator.
		for i := types.IntZero; i < n; i++ {
			elems = append(elems, o.Get(i))
		}
		return types.NewRefValList(types.DefaultTypeAdapter, elems)
	}
	return concat(l, o)
}

// Fold gives each index and its remembered element, in order.
func (l *objectList) Fold(f traits.Folder) {
	for i := range l.s {
		if !f.FoldEntry(i, l.elem(i)) {
			break
		}
	}
}

func (l *objectList) Size() ref.Val  { return types.Int(len(l.s)) }
func (l *objectList) Type() ref.Type { return types.ListType }

// IsZeroValue: a typed slice is never zero upstream.
func (l *objectList) IsZeroValue() bool { return l.shape == nil && len(l.s) == 0 }

// Value is the Go value: the unstructured slice, or the typed one.
func (l *objectList) Value() any {
	if l.shape != nil {
		return l.upstream().Value()
	}
	return l.s
}

func (l *objectList) Contains(elem ref.Val) ref.Val    { return l.upstream().Contains(typedOrSelf(elem)) }
func (l *objectList) Equal(other ref.Val) ref.Val      { return l.upstream().Equal(typedOrSelf(other)) }
func (l *objectList) ConvertToType(t ref.Type) ref.Val { return l.upstream().ConvertToType(t) }
func (l *objectList) ConvertToNative(t reflect.Type) (any, error) {
	return l.upstream().ConvertToNative(t)
}
func (l *objectList) String() string { return fmt.Sprint(l.upstream()) }

// listIterator is cel-go's list iterator (listIterator, unexported) over a
// list of the object: it reads the elements through the list's Get, so
// remembered ones stay remembered. As a value it is cel-go's baseIterator:
// iterators are never values an expression sees.
type listIterator struct {
	list   traits.Lister
	cursor types.Int
	len    types.Int
}

func newListIterator(l traits.Lister) *listIterator {
	return &listIterator{list: l, len: l.Size().(types.Int)}
}

func (it *listIterator) HasNext() ref.Val { return types.Bool(it.cursor < it.len) }

func (it *listIterator) Next() ref.Val {
	if it.cursor >= it.len {
		return nil
	}
	it.cursor++
	return it.list.Get(it.cursor - 1)
}

func (*listIterator) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("type conversion on iterators not supported")
}
func (*listIterator) ConvertToType(ref.Type) ref.Val { return types.NewErr("no such overload") }
func (*listIterator) Equal(ref.Val) ref.Val          { return types.NewErr("no such overload") }
func (*listIterator) Type() ref.Type                 { return types.IteratorType }
func (*listIterator) Value() any                     { return nil }

// concat is cel-go's list concatenation (newConcatList, unexported) with a
// list of the object first: an empty list gives the other itself, two
// lists a concatenation that reads through them.
func concat(prev, next traits.Lister) ref.Val {
	prevSize, nextSize := prev.Size().(types.Int), next.Size().(types.Int)
	if prevSize == types.IntZero {
		return next.(ref.Val)
	}
	if nextSize == types.IntZero {
		return prev.(ref.Val)
	}
	return &concatList{prev: prev, next: next, size: prevSize + nextSize}
}

// concatList is cel-go's concatList, method for method, over lists of
// which the first is the object's (object.spec.containers +
// object.spec.initContainers): its elements stay the ones remembered.
type concatList struct {
	prev, next traits.Lister
	size       types.Int
	value      []any
}

var (
	_ traits.Lister   = (*concatList)(nil)
	_ traits.Foldable = (*concatList)(nil)
	_ traits.Zeroer   = (*concatList)(nil)
)

func (l *concatList) Add(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return concat(l, o)
}

func (l *concatList) Contains(elem ref.Val) ref.Val {
	prev := l.prev.Contains(elem)
	if prev == types.True {
		return prev
	}
	next := l.next.Contains(elem)
	if next == types.True {
		return next
	}
	if types.IsUnknownOrError(prev) {
		return prev
	}
	return next
}

func (l *concatList) ConvertToNative(t reflect.Type) (any, error) {
	return types.NewDynamicList(types.DefaultTypeAdapter, l.Value().([]any)).ConvertToNative(t)
}

func (l *concatList) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.ListType:
		return l
	case types.TypeType:
		return types.ListType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.ListType, t)
}

func (l *concatList) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok || l.Size() != o.Size() {
		return types.False
	}
	var maybeErr ref.Val
	for i := types.IntZero; i < l.size; i++ {
		eq := types.Equal(l.Get(i), o.Get(i))
		if eq == types.False {
			return types.False
		}
		if maybeErr == nil && types.IsUnknownOrError(eq) {
			maybeErr = eq
		}
	}
	if maybeErr != nil {
		return maybeErr
	}
	return types.True
}

func (l *concatList) Get(index ref.Val) ref.Val {
	ind, err := types.IndexOrError(index)
	if err != nil {
		return types.ValOrErr(index, "%v", err)
	}
	i := types.Int(ind)
	prevSize := l.prev.Size().(types.Int)
	if i < prevSize {
		return l.prev.Get(i)
	}
	return l.next.Get(i - prevSize)
}

func (l *concatList) Fold(f traits.Folder) {
	for i := types.IntZero; i < l.size; i++ {
		if !f.FoldEntry(i, l.Get(i)) {
			break
		}
	}
}

func (l *concatList) Iterator() traits.Iterator { return newListIterator(l) }
func (l *concatList) IsZeroValue() bool         { return l.size == 0 }
func (l *concatList) Size() ref.Val             { return l.size }
func (l *concatList) Type() ref.Type            { return types.ListType }

func (l *concatList) String() string {
	var sb strings.Builder
	sb.WriteString("[")
	for i := types.IntZero; i < l.size; i++ {
		fmt.Fprintf(&sb, "%v", l.Get(i))
		if i != l.size-1 {
			sb.WriteString(", ")
		}
	}
	sb.WriteString("]")
	return sb.String()
}

func (l *concatList) Value() any {
	if l.value == nil {
		merged := make([]any, 0, l.size)
		for _, part := range []traits.Lister{l.prev, l.next} {
			for i, n := types.IntZero, part.Size().(types.Int); i < n; i++ {
				merged = append(merged, part.Get(i).Value())
			}
		}
		l.value = merged
	}
	return l.value
}

// typedOrSelf is upstream's typed value of v when v is a typed part of an
// object, so that upstream's equality sees two typed values as kube-apiserver
// does (two structs compare by semantic equality); otherwise v.
func typedOrSelf(v ref.Val) ref.Val {
	switch v := v.(type) {
	case *objectMap:
		if v.shape != nil {
			return v.upstream().(ref.Val)
		}
	case *objectList:
		if v.shape != nil {
			return v.upstream().(ref.Val)
		}
	}
	return v
}
