package validate

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apiserver/pkg/cel/lazy"
)

// The CEL value of a request's object, as kube-apiserver builds it
// (admission.LazyObject.CELValue: cel-go's DefaultTypeAdapter over the
// unstructured map), converts a field anew each time an expression reads it:
// every read of `c.securityContext` in a comprehension over the containers,
// in every policy, wraps the same map again, and every list goes through
// cel-go's reflection. objectValue is that value with a memory: a map or list
// remembers the CEL value of each field or element once read, so the
// policies of a validating review share one conversion of each part of the
// object they read. Everything but reading a field or an element, its size
// and its Go value (equality, conversion, `+`, `in` on a list, iterating a
// map's keys, printing) is done by cel-go's own value, built the first time
// it is needed, so the values behave exactly as upstream's; only reads are
// remembered, and CEL values are immutable.
//
// The object must not change while its value is in use: only a validating
// review, whose object nothing modifies, uses it.

// objectValue is the CEL value of v, a value of an unstructured object.
func objectValue(v any) ref.Val {
	switch v := v.(type) {
	case map[string]any:
		return &objectMap{m: v}
	case []any:
		return &objectList{s: v}
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// smallMap is how many fields a map remembers in place before it remembers
// them in a Go map: most of an object's maps are read a few fields each.
const smallMap = 4

type objectMap struct {
	m    map[string]any
	cel  traits.Mapper // cel-go's value of m, once needed
	nfew int
	few  [smallMap]objectField
	many map[string]ref.Val
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

// upstream is cel-go's value of the map, as LazyObject.CELValue makes it.
func (o *objectMap) upstream() traits.Mapper {
	if o.cel == nil {
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
	v := objectValue(raw)
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
// found.
func (o *objectMap) Find(key ref.Val) (ref.Val, bool) {
	name, ok := key.(types.String)
	if !ok {
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
	v, found := o.Find(key)
	if !found {
		return types.ValOrErr(v, "no such key: %v", key)
	}
	return v
}

// Contains is cel-go's map's, over Find.
func (o *objectMap) Contains(key ref.Val) ref.Val {
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

func (o *objectMap) Size() ref.Val     { return types.Int(len(o.m)) }
func (o *objectMap) IsZeroValue() bool { return len(o.m) == 0 }
func (o *objectMap) Type() ref.Type    { return types.MapType }
func (o *objectMap) Value() any        { return o.m }

func (o *objectMap) Iterator() traits.Iterator { return o.upstream().Iterator() }
func (o *objectMap) Equal(other ref.Val) ref.Val {
	return o.upstream().Equal(other)
}
func (o *objectMap) ConvertToNative(t reflect.Type) (any, error) {
	return o.upstream().ConvertToNative(t)
}
func (o *objectMap) ConvertToType(t ref.Type) ref.Val { return o.upstream().ConvertToType(t) }
func (o *objectMap) String() string                   { return fmt.Sprint(o.upstream()) }

type objectList struct {
	s     []any
	cel   traits.Lister // cel-go's value of s, once needed
	elems []ref.Val
}

// upstream is cel-go's value of the list, as LazyObject.CELValue makes it.
func (l *objectList) upstream() traits.Lister {
	if l.cel == nil {
		l.cel = types.DefaultTypeAdapter.NativeToValue(l.s).(traits.Lister)
	}
	return l.cel
}

func (l *objectList) elem(i int) ref.Val {
	if l.elems == nil {
		l.elems = make([]ref.Val, len(l.s))
	}
	if l.elems[i] == nil {
		l.elems[i] = objectValue(l.s[i])
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

func (l *objectList) Iterator() traits.Iterator {
	return &objectListIterator{list: l}
}

// Fold gives each index and its remembered element, in order.
func (l *objectList) Fold(f traits.Folder) {
	for i := range l.s {
		if !f.FoldEntry(i, l.elem(i)) {
			break
		}
	}
}

func (l *objectList) Size() ref.Val     { return types.Int(len(l.s)) }
func (l *objectList) IsZeroValue() bool { return len(l.s) == 0 }
func (l *objectList) Type() ref.Type    { return types.ListType }
func (l *objectList) Value() any        { return l.s }

func (l *objectList) Add(other ref.Val) ref.Val        { return l.upstream().Add(other) }
func (l *objectList) Contains(elem ref.Val) ref.Val    { return l.upstream().Contains(elem) }
func (l *objectList) Equal(other ref.Val) ref.Val      { return l.upstream().Equal(other) }
func (l *objectList) ConvertToType(t ref.Type) ref.Val { return l.upstream().ConvertToType(t) }
func (l *objectList) ConvertToNative(t reflect.Type) (any, error) {
	return l.upstream().ConvertToNative(t)
}
func (l *objectList) String() string { return fmt.Sprint(l.upstream()) }

// objectListIterator walks the remembered elements. Iterators are never
// values an expression sees; as one it is cel-go's list iterator.
type objectListIterator struct {
	list   *objectList
	cursor int
}

func (it *objectListIterator) HasNext() ref.Val { return types.Bool(it.cursor < len(it.list.s)) }

func (it *objectListIterator) Next() ref.Val {
	if it.cursor >= len(it.list.s) {
		return nil
	}
	it.cursor++
	return it.list.elem(it.cursor - 1)
}

func (it *objectListIterator) upstream() traits.Iterator { return it.list.upstream().Iterator() }
func (it *objectListIterator) ConvertToNative(t reflect.Type) (any, error) {
	return it.upstream().ConvertToNative(t)
}
func (it *objectListIterator) ConvertToType(t ref.Type) ref.Val {
	return it.upstream().ConvertToType(t)
}
func (it *objectListIterator) Equal(other ref.Val) ref.Val { return it.upstream().Equal(other) }
func (it *objectListIterator) Type() ref.Type              { return it.upstream().Type() }
func (it *objectListIterator) Value() any                  { return it.upstream().Value() }

// variablesMap is upstream's `variables` (a lazy.MapValue, which evaluates a
// variable when it is first read and keeps its value) remembering, by the
// name an expression reads, what it found. Upstream's Find unescapes the
// name with a regular expression on every read (cel.Unescape), and a
// comprehension over `variables.containers` reads it once per step; a name
// without "__" is its own unescaping, so it is remembered after its first
// read, which is upstream's (evaluation and cost accounting included).
// Every other operation is upstream's.
type variablesMap struct {
	*lazy.MapValue
	seen []objectField
}

func (v *variablesMap) Find(key ref.Val) (ref.Val, bool) {
	name, ok := key.(types.String)
	if !ok || strings.Contains(string(name), "__") {
		return v.MapValue.Find(key)
	}
	for _, f := range v.seen {
		if f.name == string(name) {
			return f.val, true
		}
	}
	val, found := v.MapValue.Find(key)
	if found {
		v.seen = append(v.seen, objectField{string(name), val})
	}
	return val, found
}

// Get is upstream's, over Find.
func (v *variablesMap) Get(key ref.Val) ref.Val {
	if val, found := v.Find(key); found {
		return val
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

// Contains is upstream's, over Find.
func (v *variablesMap) Contains(key ref.Val) ref.Val {
	val, found := v.Find(key)
	if val != nil && types.IsUnknownOrError(val) {
		return val
	}
	return types.Bool(found)
}

// Equal is upstream's: the same map, by identity.
func (v *variablesMap) Equal(other ref.Val) ref.Val {
	if o, ok := other.(*variablesMap); ok {
		return types.Bool(v.MapValue == o.MapValue)
	}
	return v.MapValue.Equal(other)
}

// ConvertToType to the map's own type is the map itself.
func (v *variablesMap) ConvertToType(t ref.Type) ref.Val {
	if t == v.MapValue.Type() {
		return v
	}
	return v.MapValue.ConvertToType(t)
}
