package objectval

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celcommon "k8s.io/apiserver/pkg/cel/common"
	"k8s.io/client-go/kubernetes/scheme"
	sigsjson "sigs.k8s.io/json"
)

// Typed objects.
//
// kube-apiserver holds an object of a built-in kind (a Pod, a Deployment)
// as its Go type, and since 1.37 its policy conditions read it through
// common.SchemalessTypedToVal, which reflects over the Go value instead of
// converting it to unstructured (admission.LazyObject.UseSchemalessTypeRef,
// set by every condition evaluation: validations, match conditions, audit
// annotations; mutations read it so only once a condition has). Reads agree
// with the unstructured value of the same JSON; everything else follows
// the Go type, and a policy sees the difference:
//
//   - a struct, a Go map or a slice is never a zero value, so
//     optional.ofNonZeroValue of an empty `resources: {}` has a value;
//   - a key that is not a string, an index that is not an int, or one out
//     of range, is an error in upstream's words ("unsupported map key
//     type", "unsupported index type", "index out of bounds");
//   - conversion to JSON or a native value fails for a struct ("type
//     conversion error from struct type v1.Container to *structpb.Value")
//     and for a list or map to anything but its Go type, so a mutation's
//     JSONPatch value that holds part of the object is refused; a list
//     built with the object's elements converts them through their Go
//     values ("unsupported conversion to ref.Val: (v1.Container)…");
//   - two structs are equal by apimachinery's semantic equality.
//
// admitfn reads the object as JSON, so Of is given the object's
// shape: for each map and list, the Go type kube-apiserver holds it as.
// Reads stay its own; the rest is delegated to upstream's own value
// of that part, decoded into its Go type when first needed (typedValue).
// Custom resources have no Go type and keep cel-go's unstructured value.
//
// k8s.io/apiserver's own TestJSONPatch ("jsonPatch with list concatenation
// between structured object and typed type (structured + typed)") expects
// `[Object…{…}] + object.spec…containers` to apply: it evaluates no
// condition first, so its object is unstructured. kube-apiserver 1.37.2
// refuses it once a condition has run; admitfn follows the binary (the
// jsonpatch-concat-object-list parity cases in test/e2e).
//
// Kinds served by kube-apiserver but not in client-go's scheme
// (CustomResourceDefinition, APIService) are read as unstructured: a
// difference docs/differences.md names.

// Shape is the Go type kube-apiserver reads a map or list of an object as
// (a struct, a Go map or a slice), with the shapes of what it holds, each
// worked out when first read: a review reads a few of a kind's types, and
// walking them all touches enough of the binary to slow a cold start.
type Shape struct {
	t     reflect.Type
	float bool // a float scalar: a JSON integer is a double

	once   sync.Once
	ready  atomic.Bool       // init has run: read on every field, so cheaper than once
	fields map[string]*Shape // a struct's, by JSON name; nil entry: read as unstructured
	elem   *Shape            // a map's or a slice's elements'
}

// floatScalar is the shape of a float field or element.
var floatScalar = &Shape{float: true}

var shapes sync.Map // reflect.Type → *Shape (nil: read as unstructured)

// KindShape is the shape of gvk's objects, or nil for a kind kube-apiserver
// does not hold as a Go type.
func KindShape(gvk schema.GroupVersionKind) *Shape {
	t, ok := scheme.Scheme.AllKnownTypes()[gvk]
	if !ok {
		return nil
	}
	return shapeOf(t)
}

// shapeOf follows SchemalessTypedToVal: a type that converts itself to
// unstructured (Time, Quantity, IntOrString, RawExtension) is read as that
// (nil); pointers are followed; a byte slice is a string; scalars and
// interfaces (which hold what JSON decoding gives) are nil.
func shapeOf(t reflect.Type) *Shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*Shape)
	}
	s, _ := shapes.LoadOrStore(t, newShape(t))
	return s.(*Shape)
}

// newShape is shapeOf(t) worked out, the shape of a struct, map or slice
// being the one shapes holds for its type.
func newShape(t reflect.Type) *Shape {
	for {
		if convertsItself(t) {
			return nil
		}
		if t.Kind() != reflect.Pointer {
			break
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return floatScalar
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
	case reflect.Struct, reflect.Map:
	default:
		return nil
	}
	if s, ok := shapes.Load(t); ok {
		return s.(*Shape)
	}
	s, _ := shapes.LoadOrStore(t, &Shape{t: t})
	return s.(*Shape)
}

// init works out the shapes s holds, once.
func (s *Shape) init() {
	s.once.Do(func() {
		if s.t.Kind() == reflect.Struct {
			s.fields = map[string]*Shape{}
			structFields(s.t, func(name string, ft reflect.Type) {
				if fs := shapeOf(ft); fs != nil {
					s.fields[name] = fs
				}
			})
		} else {
			s.elem = shapeOf(s.t.Elem())
		}
		s.ready.Store(true)
	})
}

// field is the shape of a struct's field or a map's value.
func (s *Shape) field(name string) *Shape {
	if s == nil || s.t == nil {
		return nil
	}
	if !s.ready.Load() {
		s.init()
	}
	if s.fields != nil {
		return s.fields[name]
	}
	return s.elem
}

// element is the shape of a list's elements.
func (s *Shape) element() *Shape {
	if s == nil || s.t == nil {
		return nil
	}
	if !s.ready.Load() {
		s.init()
	}
	return s.elem
}

// structFields calls f with the JSON name and type of each field of struct
// t as SMD's reflect cache names them (value.buildStructCacheEntry): an
// exported or embedded field, under its json tag's name or its Go name,
// "-" skipped, an untagged embedded struct's fields inlined. (SMD's cache
// copies itself for every type it has not seen, so asking it for each type
// of an object is slow; TestStructFieldsFollowSMD holds the two equal.)
func structFields(t reflect.Type, f func(name string, ft reflect.Type)) {
	for i := range t.NumField() {
		field := t.Field(i)
		if field.PkgPath != "" && !field.Anonymous {
			continue
		}
		tag := field.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if field.Anonymous && name == "" {
			e := field.Type
			if e.Kind() == reflect.Pointer {
				e = e.Elem()
			}
			if e.Kind() == reflect.Struct {
				structFields(e, f)
			}
			continue
		}
		if name == "" {
			name = field.Name
		}
		f(name, field.Type)
	}
}

// convertsItself is SMD's CanConvertToUnstructured, asked of the type
// directly (see structFields): t or *t marshals itself to JSON, which
// SMD's UnstructuredConverter and UnstructuredConverterWithError both
// require.
func convertsItself(t reflect.Type) bool {
	return t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// typedValue is upstream's CEL value of raw, a part of an object of shape
// s: raw decoded into s's Go type as kube-apiserver decodes a request's
// JSON, read by SchemalessTypedToVal. ok is false when raw does not decode
// (an object kube-apiserver would have refused, given to the CLI): the
// caller keeps the unstructured value.
func typedValue(s *Shape, raw any) (ref.Val, bool) {
	if s.t == nil {
		return nil, false
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, false
	}
	p := reflect.New(s.t)
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, p.Interface()); err != nil {
		return nil, false
	}
	v := celcommon.SchemalessTypedToVal(p.Elem().Interface())
	if types.IsError(v) {
		return nil, false
	}
	return v, true
}
