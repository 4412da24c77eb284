package lint

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	celcommon "github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/parser"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/admitfn/admitfn/core/policy"
)

// Mutations build objects whose shape kube-apiserver checks only when it
// applies them: a field the kind does not have, or a value of another
// type, fails the mutation on every request it acts on (and under
// failurePolicy Fail denies it). Upstream compiles Object types with no
// schema (any Object.<path>{field: …} compiles), so lint checks them
// against the kinds the policy's rules name: built-in kinds from their Go
// types, custom resources from a CustomResourceDefinition in the bundle. A
// field is reported only when none of those kinds has it.

// kindSchema is one kind a policy's rules match, and its schema.
type kindSchema struct {
	gvk    schema.GroupVersionKind
	schema *spec.Schema
}

// mutationKinds are the kinds p's rules name whose schema is known; none
// when a rule has wildcards or names a kind whose schema is not.
func mutationKinds(p *admissionregistrationv1.MutatingAdmissionPolicy, mapper meta.RESTMapper, resolver *builtins, crds map[schema.GroupVersionResource]kindSchema) []kindSchema {
	if p.Spec.MatchConstraints == nil {
		return nil
	}
	var out []kindSchema
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		if wild(r.APIGroups) || wild(r.APIVersions) || wild(r.Resources) {
			return nil
		}
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					if strings.Contains(res, "/") {
						return nil // a subresource's object is another kind
					}
					gvr := schema.GroupVersionResource{Group: g, Version: v, Resource: res}
					if k, ok := crds[gvr]; ok {
						out = append(out, k)
						continue
					}
					gvk, err := mapper.KindFor(gvr)
					if err != nil {
						return nil
					}
					s, err := resolver.ResolveSchema(gvk)
					if err != nil {
						return nil
					}
					out = append(out, kindSchema{gvk, s})
				}
			}
		}
	}
	return out
}

// bundleCRDs are the schemas of the custom resources the bundle's
// CustomResourceDefinitions define, by resource; metadata is ObjectMeta's.
func bundleCRDs(b *policy.Set, resolver *builtins) map[schema.GroupVersionResource]kindSchema {
	out := map[schema.GroupVersionResource]kindSchema{}
	meta, err := resolver.ResolveSchema(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	if err != nil {
		return out
	}
	objectMeta := meta.Properties["metadata"]
	for _, o := range b.CRDs {
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			name, _ := vm["name"].(string)
			raw, ok, _ := unstructured.NestedFieldNoCopy(vm, "schema", "openAPIV3Schema")
			if !ok {
				continue
			}
			data, err := json.Marshal(raw)
			if err != nil {
				continue
			}
			s := &spec.Schema{}
			if json.Unmarshal(data, s) != nil {
				continue
			}
			if s.Properties == nil {
				s.Properties = map[string]spec.Schema{}
			}
			s.Properties["metadata"] = objectMeta
			for _, f := range []string{"apiVersion", "kind"} {
				if _, ok := s.Properties[f]; !ok {
					s.Properties[f] = *typed("string", "")
				}
			}
			out[schema.GroupVersionResource{Group: group, Version: name, Resource: plural}] = kindSchema{schema.GroupVersionKind{Group: group, Version: name, Kind: kind}, s}
		}
	}
	return out
}

// open reports whether s takes fields it does not name.
func open(s *spec.Schema) bool {
	if s == nil {
		return true
	}
	if v, ok := s.Extensions.GetBool("x-kubernetes-preserve-unknown-fields"); ok && v {
		return true
	}
	if s.AdditionalProperties != nil && (s.AdditionalProperties.Allows || s.AdditionalProperties.Schema != nil) {
		return true
	}
	return len(s.Properties) == 0 && !slices.Contains(s.Type, "object")
}

// child is the schema of field name of s, and whether s has it (true with
// a nil schema when s takes any field).
func child(s *spec.Schema, name string) (*spec.Schema, bool) {
	if s == nil {
		return nil, true
	}
	if p, ok := s.Properties[name]; ok {
		return &p, true
	}
	if s.AdditionalProperties != nil {
		return s.AdditionalProperties.Schema, s.AdditionalProperties.Allows || s.AdditionalProperties.Schema != nil
	}
	return nil, open(s)
}

// element is the schema of s's elements when s is an array, s otherwise.
func element(s *spec.Schema) *spec.Schema {
	if s != nil && slices.Contains(s.Type, "array") && s.Items != nil {
		return s.Items.Schema
	}
	return s
}

// nearest is the name of names closest to name, "" if none is near.
func nearest(name string, names []string) string {
	best, bestD := "", len(name)/2+2
	for _, n := range names {
		if d := distance(strings.ToLower(name), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// missing says that no kind of kinds has field at path (schemas, one per
// kind, at path), with the nearest name one has.
func missing(path, field string, kinds []kindSchema, schemas []*spec.Schema) string {
	var names []string
	for _, s := range schemas {
		for n := range s.Properties {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	var kindNames []string
	for _, k := range kinds {
		kindNames = append(kindNames, k.gvk.GroupVersion().String()+" "+k.gvk.Kind)
	}
	msg := fmt.Sprintf("%s has no field %q in %s", path, field, strings.Join(kindNames, ", "))
	if n := nearest(field, names); n != "" {
		msg += fmt.Sprintf(": did you mean %q?", n)
	}
	return msg + ": kube-apiserver fails the mutation on every request it acts on"
}

// resolve follows path (field names; arrays stepped into) from each kind's
// schema; ok false, with the message, when a field is in none.
func resolve(kinds []kindSchema, what string, path []string) ([]*spec.Schema, string) {
	schemas := make([]*spec.Schema, len(kinds))
	for i, k := range kinds {
		schemas[i] = k.schema
	}
	for i, seg := range path {
		next, from := step(schemas, seg)
		if len(next) == 0 {
			return nil, missing(what+strings.Join(path[:i], "."), seg, kinds, from)
		}
		schemas = next
	}
	return schemas, ""
}

// step is the schemas of field seg of each of schemas (of their elements,
// for arrays), and the schemas it was looked for in.
func step(schemas []*spec.Schema, seg string) (next, from []*spec.Schema) {
	for _, s := range schemas {
		s = element(s)
		from = append(from, s)
		if c, ok := child(s, seg); ok {
			next = append(next, c)
		}
	}
	return next, from
}

// checkApplyConfiguration checks the Object types and fields an
// ApplyConfiguration expression builds against kinds.
func checkApplyConfiguration(field, expr string, kinds []kindSchema, at func(rule, field, msg string)) {
	a, ok := parseExpr(expr)
	if !ok {
		return
	}
	for _, e := range ast.MatchDescendants(ast.NavigateAST(a), ast.KindMatcher(ast.StructKind)) {
		st := e.AsStruct()
		name := st.TypeName()
		if name != "Object" && !strings.HasPrefix(name, "Object.") {
			continue
		}
		path := strings.Split(name, ".")[1:]
		schemas, msg := resolve(kinds, "Object", path)
		if msg != "" {
			at(MutationShape, field, msg)
			continue
		}
		for _, f := range st.Fields() {
			sf := f.AsStructField()
			fieldSchemas, from := step(schemas, sf.Name())
			if len(fieldSchemas) == 0 {
				at(MutationShape, field, missing(name, sf.Name(), kinds, from))
				continue
			}
			v := sf.Value()
			if v.Kind() == ast.StructKind {
				if want := name + "." + sf.Name(); v.AsStruct().TypeName() != want {
					at(MutationShape, field, fmt.Sprintf("%s sets %s to a %s, where kube-apiserver wants a %s", name, sf.Name(), v.AsStruct().TypeName(), want))
				}
				continue
			}
			if got := literalType(v); got != "" && !slices.ContainsFunc(fieldSchemas, func(s *spec.Schema) bool { return takes(s, got) }) {
				at(MutationShape, field, fmt.Sprintf("%s sets %s to %s, where %s wants %s: kube-apiserver fails the mutation on every request it acts on", name, sf.Name(), article(got), kindList(kinds), article(schemaType(fieldSchemas[0]))))
			}
		}
	}
}

// checkJSONPatch checks the literal paths of the JSONPatch operations a
// JSONPatch expression builds against kinds.
func checkJSONPatch(field, expr string, kinds []kindSchema, at func(rule, field, msg string)) {
	a, ok := parseExpr(expr)
	if !ok {
		return
	}
	for _, e := range ast.MatchDescendants(ast.NavigateAST(a), ast.KindMatcher(ast.StructKind)) {
		st := e.AsStruct()
		if st.TypeName() != "JSONPatch" {
			continue
		}
		for _, f := range st.Fields() {
			sf := f.AsStructField()
			if sf.Name() != "path" || sf.Value().Kind() != ast.LiteralKind {
				continue
			}
			p, ok := sf.Value().AsLiteral().(types.String)
			if !ok || !strings.HasPrefix(string(p), "/") {
				continue
			}
			if msg := checkPointer(string(p), kinds); msg != "" {
				at(MutationShape, field, msg)
			}
		}
	}
}

// checkPointer follows a JSON pointer through each kind's schema: array
// indexes (or -) in arrays, any key in maps, named fields elsewhere.
func checkPointer(pointer string, kinds []kindSchema) string {
	schemas := make([]*spec.Schema, len(kinds))
	for i, k := range kinds {
		schemas[i] = k.schema
	}
	segs := strings.Split(pointer[1:], "/")
	for i, seg := range segs {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		var next, at []*spec.Schema
		for _, s := range schemas {
			if s != nil && slices.Contains(s.Type, "array") {
				if _, err := strconv.Atoi(seg); err == nil || seg == "-" {
					next = append(next, element(s))
				}
				continue
			}
			at = append(at, s)
			if c, ok := child(s, seg); ok {
				next = append(next, c)
			}
		}
		if len(next) == 0 {
			if len(at) == 0 {
				return fmt.Sprintf("JSONPatch path %q: %q is not an index of the list at /%s", pointer, seg, strings.Join(segs[:i], "/"))
			}
			return "JSONPatch path " + strconv.Quote(pointer) + ": " + missing("/"+strings.Join(segs[:i], "/"), seg, kinds, at)
		}
		schemas = next
	}
	return ""
}

func parseExpr(expr string) (*ast.AST, bool) {
	p, err := parser.NewParser(parser.Macros(parser.AllMacros...), parser.EnableOptionalSyntax(true))
	if err != nil {
		return nil, false
	}
	parsed, errs := p.Parse(celcommon.NewTextSource(expr))
	if len(errs.GetErrors()) > 0 {
		return nil, false
	}
	return parsed, true
}

// literalType is the JSON type of a literal value, "" for anything else.
func literalType(e ast.Expr) string {
	switch e.Kind() {
	case ast.LiteralKind:
		switch e.AsLiteral().(type) {
		case types.String:
			return "string"
		case types.Bool:
			return "boolean"
		case types.Int, types.Uint:
			return "integer"
		case types.Double:
			return "number"
		}
	case ast.ListKind:
		return "array"
	case ast.MapKind:
		return "object"
	}
	return ""
}

// takes reports whether a field of schema s takes a value of JSON type t.
func takes(s *spec.Schema, t string) bool {
	if s == nil || len(s.Type) == 0 {
		return true
	}
	if v, ok := s.Extensions.GetBool("x-kubernetes-int-or-string"); ok && v {
		return t == "integer" || t == "string"
	}
	if t == "integer" && slices.Contains(s.Type, "number") {
		return true
	}
	return slices.Contains(s.Type, t)
}

func schemaType(s *spec.Schema) string {
	if s == nil || len(s.Type) == 0 {
		return "any value"
	}
	return s.Type[0]
}

func article(t string) string {
	switch t {
	case "any value":
		return t
	case "integer", "object", "array":
		return "an " + t
	}
	return "a " + t
}

func kindList(kinds []kindSchema) string {
	var names []string
	for _, k := range kinds {
		names = append(names, k.gvk.Kind)
	}
	return strings.Join(names, ", ")
}
