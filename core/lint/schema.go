package lint

import (
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// builtins resolves the OpenAPI schema of a built-in kind from its Go type
// in a scheme, the way kube-apiserver's generated definitions describe it
// for type checking: field names and types, no validation. kube-apiserver
// resolves from definitions generated into k8s.io/kubernetes, which admitfn
// does not depend on; the Go types of k8s.io/api are the same source.
type builtins struct {
	scheme *runtime.Scheme
	cache  map[schema.GroupVersionKind]*spec.Schema
}

var _ resolver.SchemaResolver = (*builtins)(nil)

func (b *builtins) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	if s, ok := b.cache[gvk]; ok {
		return s, nil
	}
	t, ok := b.scheme.AllKnownTypes()[gvk]
	if !ok {
		return nil, fmt.Errorf("%v: %w", gvk, resolver.ErrSchemaNotFound)
	}
	s := schemaOf(t, map[reflect.Type]bool{})
	b.cache[gvk] = s
	return s, nil
}

type openAPIType interface {
	OpenAPISchemaType() []string
	OpenAPISchemaFormat() string
}

var (
	openAPITypeIface = reflect.TypeOf((*openAPIType)(nil)).Elem()
	intOrString      = reflect.TypeOf(intstr.IntOrString{})
	rawExtension     = reflect.TypeOf(runtime.RawExtension{})
)

// schemaOf describes t; visiting holds the struct types being described,
// so a recursive type ends in an open object.
func schemaOf(t reflect.Type, visiting map[reflect.Type]bool) *spec.Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == intOrString:
		s := &spec.Schema{}
		s.AddExtension("x-kubernetes-int-or-string", true)
		return s
	case t == rawExtension:
		return openObject()
	case t.Implements(openAPITypeIface) || reflect.PointerTo(t).Implements(openAPITypeIface):
		v := reflect.New(t).Interface().(openAPIType)
		return &spec.Schema{SchemaProps: spec.SchemaProps{Type: v.OpenAPISchemaType(), Format: v.OpenAPISchemaFormat()}}
	}
	switch t.Kind() {
	case reflect.String:
		return typed("string", "")
	case reflect.Bool:
		return typed("boolean", "")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return typed("integer", "int32")
	case reflect.Int64, reflect.Uint64:
		return typed("integer", "int64")
	case reflect.Float32, reflect.Float64:
		return typed("number", "double")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return typed("string", "byte")
		}
		s := typed("array", "")
		s.Items = &spec.SchemaOrArray{Schema: schemaOf(t.Elem(), visiting)}
		return s
	case reflect.Map:
		s := typed("object", "")
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: schemaOf(t.Elem(), visiting)}
		return s
	case reflect.Struct:
		if visiting[t] {
			return openObject()
		}
		visiting[t] = true
		defer delete(visiting, t)
		s := typed("object", "")
		s.Properties = map[string]spec.Schema{}
		addFields(s, t, visiting)
		return s
	default: // interfaces and anything else: any value
		return openObject()
	}
}

// addFields adds t's JSON fields to s, inlining embedded structs.
func addFields(s *spec.Schema, t reflect.Type, visiting map[reflect.Type]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) && ft.Kind() == reflect.Struct {
			addFields(s, ft, visiting)
			continue
		}
		if name == "" {
			name = f.Name
		}
		s.Properties[name] = *schemaOf(f.Type, visiting)
	}
}

func typed(typ, format string) *spec.Schema {
	return &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{typ}, Format: format}}
}

func openObject() *spec.Schema {
	s := typed("object", "")
	s.AddExtension("x-kubernetes-preserve-unknown-fields", true)
	return s
}

// restMapper maps the resources of a scheme's kinds (plurals guessed as
// kube-apiserver names built-in resources) to their kinds.
func restMapper(scheme *runtime.Scheme) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk, t := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") || t.Kind() != reflect.Struct {
			continue
		}
		if _, ok := t.FieldByName("ObjectMeta"); !ok {
			continue // options and events, not resources
		}
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return m
}
