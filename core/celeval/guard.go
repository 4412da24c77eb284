package celeval

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/parser"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// Guards: push-down under failurePolicy Fail must never let kube-apiserver
// reject a request because a pushed condition failed to evaluate; the
// function alone gives that answer, in upstream's words. Guard finds, for a
// condition E, an expression G that cannot fail and is true wherever E
// could fail; kube-apiserver then evaluates G || (E), which cannot fail
// (CEL's || is true when either side is, whatever the other), is true
// wherever E is true or fails, and equals E elsewhere.
//
// G is built from the expression's structure over values whose shape is
// known wherever kube-apiserver calls a webhook:
//   - request: admission.k8s.io/v1 AdmissionRequest as kube-apiserver gives
//     it to a webhook's conditions, a field absent when it is empty and
//     marked omitempty;
//   - object and oldObject: null, or an object whose metadata has
//     ObjectMeta's fields and types (kube-apiserver decodes metadata into
//     ObjectMeta before admission, custom resources included); where the
//     policy's rules name one built-in kind (GuardOptions), an object of
//     that kind's Go type, G holding wherever the request's kind is another;
//     a CONNECT's object is its options, so every read of object on a
//     CONNECT is guarded;
//   - literals, and the elements of lists and keys of maps above.
//
// The operations allowed are those that cannot fail on values of those
// shapes: ==, != (scalars, or anything with null), !, &&, ||, ?:, in,
// has(), size(), <, <=, >, >= on two ints or two strings, string
// concatenation, startsWith, endsWith, contains, matches with a literal
// pattern that compiles, lowerAscii, upperAscii, trim, authorizer checks
// (a check's failure is its decision's error()), and all/exists over a
// list or map. A field or key that may be absent, an index that may be out
// of range, a null object and another kind are what G tests for.
// Everything else (integer arithmetic, which can overflow or divide by
// zero; other string functions, which fail on some input; fields the kind
// does not have or that no kind is known for; lists or maps read from a
// comprehension's variable) has no guard: Guard says why.
//
// Cost. kube-apiserver fails a condition past its per-call limit. Where
// G || (E) has no bound within it on every request (a list searched or
// iterated may hold a million entries), GuardCondition puts first in G
// size(L) > N for each list or map L the condition reads, N the largest
// power of two at which the rest is bounded: kube-apiserver evaluates ||
// left to right and stops at the first true term.

// shape is what a value is known to be.
type shape struct {
	kind shapeKind
	// fields of a struct: the field's shape, and whether it may be absent.
	fields map[string]fieldShape
	// elem of a list, value of a map (whose keys are strings).
	elem *shape
}

type fieldShape struct {
	*shape
	optional bool
}

type shapeKind int

const (
	shapeNull shapeKind = iota
	shapeBool
	shapeInt
	shapeUint
	shapeDouble
	shapeString
	shapeBytes
	shapeList
	shapeMap // string keys
	shapeStruct
	// shapeAuthz: authorizer and what its builders return; a check's
	// failure is its decision's error(), not the expression's.
	shapeAuthz
	shapeDecision
)

var (
	boolShape   = &shape{kind: shapeBool}
	intShape    = &shape{kind: shapeInt}
	stringShape = &shape{kind: shapeString}
	nullShape   = &shape{kind: shapeNull}
)

// shapeOf is the shape of a Go type as kube-apiserver's schemaless
// conversion and JSON give it; nil for types with no fixed shape here
// (times, raw objects, quantities).
func shapeOf(t reflect.Type) *shape {
	if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
		// Quantities, times, int-or-strings: JSON is not their Go shape.
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return shapeOf(t.Elem())
	case reflect.String:
		return stringShape
	case reflect.Bool:
		return boolShape
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intShape
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		if e := shapeOf(t.Elem()); e != nil {
			return &shape{kind: shapeList, elem: e}
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil
		}
		if e := shapeOf(t.Elem()); e != nil {
			return &shape{kind: shapeMap, elem: e}
		}
	case reflect.Struct:
		s := &shape{kind: shapeStruct, fields: map[string]fieldShape{}}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
				// Inline (TypeMeta): its fields are the struct's.
				if inner := shapeOf(f.Type); inner != nil {
					maps.Copy(s.fields, inner.fields)
				}
				continue
			}
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			fs := shapeOf(f.Type)
			if fs == nil {
				continue
			}
			s.fields[name] = fieldShape{fs, strings.Contains(opts, "omitempty") || f.Type.Kind() == reflect.Pointer}
		}
		return s
	}
	return nil
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

var (
	requestShape = shapeOf(reflect.TypeFor[admissionv1.AdmissionRequest]())
	// objectShape is what every object has: metadata.
	objectShape = &shape{kind: shapeStruct, fields: map[string]fieldShape{
		"metadata": {shapeOf(reflect.TypeFor[metav1.ObjectMeta]()), false},
	}}
)

// GuardOptions are what is known of a condition's requests beyond what
// every request has.
type GuardOptions struct {
	// Kind is the one kind of object the condition's policy matches, a
	// built-in kind; Type its Go type. With them, G holds that the
	// request's kind is Kind wherever the condition reads object or
	// oldObject beyond metadata, and their fields are Type's.
	Kind schema.GroupVersionKind
	Type reflect.Type
}

// Guarding is what push-down gives kube-apiserver for a condition.
type Guarding struct {
	// Expr is the condition as written when it cannot fail, G || (it)
	// otherwise.
	Expr string
	// Guard is G: "false" when the condition cannot fail.
	Guard string
	// Cost bounds Expr's cost on every request kube-apiserver accepts.
	Cost uint64
}

// GuardCondition guards expr (see above) and bounds the cost of the
// result. Where expr searches or iterates a list or map of the request,
// G also holds when one is longer than a size within which expr's cost
// is bounded (G's parts are evaluated first, and || stops at the first
// true one). It fails with the reason no guard covers expr, or with an
// error IsUnbounded recognizes when no size bounds its cost, or when
// kube-apiserver would refuse the result.
func GuardCondition(expr string, opts GuardOptions) (Guarding, error) {
	parts, sized, err := guardParts(expr, opts)
	if err != nil {
		return Guarding{}, err
	}
	g := Or(parts...)
	guarded := Guarded(expr, g)
	c, err := CheckWebhookCondition(guarded)
	if err == nil || !IsUnbounded(err) || len(sized) == 0 {
		return Guarding{Expr: guarded, Guard: g, Cost: c}, err
	}
	rest := Or(append(slices.Clone(parts), Embed(expr))...)
	for k := maxGuardedEntries; k >= 0; k-- {
		n := uint64(1) << k
		var sizes []string
		for _, l := range sized {
			sizes = append(sizes, "size("+l+") > "+strconv.FormatUint(n, 10))
		}
		sc, err := CheckWebhookCondition(Or(sizes...))
		if err != nil {
			return Guarding{}, err
		}
		rc, err := webhookBound(rest, n)
		switch {
		case IsUnbounded(err):
			continue
		case err != nil:
			return Guarding{}, err
		case sc+rc > celconfig.PerCallLimit:
			continue
		}
		g := Or(append(sizes, parts...)...)
		guarded := Or(append(sizes, rest)...)
		if _, err := webhookBound(guarded, n); err != nil && !IsUnbounded(err) {
			return Guarding{}, err
		}
		return Guarding{Expr: guarded, Guard: g, Cost: sc + rc}, nil
	}
	return Guarding{}, ErrUnbounded
}

// maxGuardedEntries: the longest list a size guard lets through is 2^20
// entries (cost classes go no further).
const maxGuardedEntries = 20

// Guard returns G for expr (see above), without size guards: "false"
// when expr cannot fail on any request kube-apiserver sends, an
// expression otherwise; an error says what in expr no guard can cover.
func Guard(expr string) (string, error) {
	parts, _, err := guardParts(expr, GuardOptions{})
	if err != nil {
		return "", err
	}
	return Or(parts...), nil
}

// guardParts are G's parts and the lists and maps whose size bounds
// expr's cost.
func guardParts(expr string, opts GuardOptions) (guard, []string, error) {
	celEnv, err := guardEnv()
	if err != nil {
		return nil, nil, err
	}
	parsed, issues := celEnv.Parse(expr)
	if issues != nil && issues.Err() != nil {
		return nil, nil, issues.Err()
	}
	a := parsed.NativeRep()
	g := &guarder{info: a.SourceInfo(), scope: map[string]*shape{}, object: objectShape}
	if opts.Type != nil {
		if s := shapeOf(opts.Type); s != nil && s.kind == shapeStruct {
			s.fields["metadata"] = objectShape.fields["metadata"]
			g.object, g.kindName = s, opts.Kind.Kind
			g.kind = Not(And(`request.kind.group == `+strconv.Quote(opts.Kind.Group), `request.kind.version == `+strconv.Quote(opts.Kind.Version),
				`request.kind.kind == `+strconv.Quote(opts.Kind.Kind)))
		}
	}
	_, gd, err := g.expr(a.Expr())
	if err != nil {
		return nil, nil, err
	}
	if g.printErr != nil {
		return nil, nil, unguardable{"has a part that does not print back as CEL: " + g.printErr.Error()}
	}
	if g.kindRead {
		gd = gd.or(g.kind)
	}
	return gd, g.sized, nil
}

// guard is a disjunction: true when one of its parts is; nil is false.
type guard []string

// or is the disjunction of g and parts, without repeats.
func (g guard) or(parts ...string) guard {
	out := slices.Clone(g)
	for _, p := range parts {
		if p != "false" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// join is the disjunction of guards.
func join(gs ...guard) guard {
	var out guard
	for _, g := range gs {
		out = out.or(g...)
	}
	return out
}

// without is g less the parts of other: what g adds where other is false.
func (g guard) without(other guard) guard {
	var out guard
	for _, p := range g {
		if !slices.Contains(other, p) {
			out = append(out, p)
		}
	}
	return out
}

// Guarded is the condition kube-apiserver is given for expr with guard g:
// expr itself when g is "false".
func Guarded(expr, g string) string {
	if g == "false" {
		return expr
	}
	return Or(g, Embed(expr))
}

// guardEnv parses as parseEnv does, keeping each macro's call so that
// parts of the expression print as written.
var guardEnv = sync.OnceValues(func() (*cel.Env, error) {
	env, err := parseEnv()
	if err != nil {
		return nil, err
	}
	return env.Extend(cel.EnableMacroCallTracking())
})

type guarder struct {
	info  *ast.SourceInfo
	scope map[string]*shape // comprehension variables
	// object is the shape of object and oldObject; kind, when their kind
	// is known, is the guard part that holds when the request's is not,
	// and kindRead says a field beyond metadata was read.
	object   *shape
	kind     string
	kindName string
	kindRead bool
	// sized are the lists and maps read outside comprehensions, whose
	// sizes bound the cost.
	sized []string
	// printErr is the first part of the expression text could not print.
	printErr error
}

type unguardable struct{ what string }

func (u unguardable) Error() string { return u.what }

// IsUnguardable reports whether err is GuardCondition's or Guard's "no
// guard covers it"; its text is what the condition does ("reads …").
func IsUnguardable(err error) bool {
	var u unguardable
	return errors.As(err, &u)
}

// text prints e back as CEL. Unparse fails only on ASTs the parser does
// not produce; should it, the first failure makes the whole condition
// unguardable (guardParts), never a panic.
func (g *guarder) text(e ast.Expr) string {
	s, err := parser.Unparse(e, g.info)
	if err != nil && g.printErr == nil {
		g.printErr = err
	}
	return s
}

// expr returns e's shape and its guard.
func (g *guarder) expr(e ast.Expr) (*shape, guard, error) {
	switch e.Kind() {
	case ast.LiteralKind:
		switch e.AsLiteral().(type) {
		case types.Bool:
			return boolShape, nil, nil
		case types.Int:
			return intShape, nil, nil
		case types.String:
			return stringShape, nil, nil
		case types.Null:
			return nullShape, nil, nil
		case types.Uint:
			return &shape{kind: shapeUint}, nil, nil
		case types.Double:
			return &shape{kind: shapeDouble}, nil, nil
		case types.Bytes:
			return &shape{kind: shapeBytes}, nil, nil
		}
	case ast.IdentKind:
		name := e.AsIdent()
		if s, ok := g.scope[name]; ok {
			return s, nil, nil
		}
		switch name {
		case plugincel.RequestVarName:
			return requestShape, nil, nil
		case plugincel.ObjectVarName, plugincel.OldObjectVarName:
			// null on a create (oldObject) or delete (object); a CONNECT's
			// object is its options, which have no metadata.
			return g.object, guard{name + " == null", `request.operation == "CONNECT"`}, nil
		case plugincel.AuthorizerVarName, plugincel.RequestResourceAuthorizerVarName:
			return &shape{kind: shapeAuthz}, nil, nil
		}
		return nil, nil, unguardable{"reads " + name + ", whose failures no guard can rule out"}
	case ast.SelectKind:
		return g.selectExpr(e)
	case ast.ListKind:
		var elem *shape
		var gd guard
		for _, el := range e.AsList().Elements() {
			s, eg, err := g.expr(el)
			if err != nil {
				return nil, nil, err
			}
			if elem != nil && elem.kind != s.kind {
				return nil, nil, unguardable{"builds a list of mixed types"}
			}
			elem, gd = s, join(gd, eg)
		}
		if elem == nil {
			elem = nullShape
		}
		return &shape{kind: shapeList, elem: elem}, gd, nil
	case ast.CallKind:
		return g.call(e)
	case ast.ComprehensionKind:
		return g.comprehension(e)
	}
	return nil, nil, unguardable{"uses " + g.text(e) + ", which may fail to evaluate"}
}

func (g *guarder) selectExpr(e ast.Expr) (*shape, guard, error) {
	sel := e.AsSelect()
	s, gd, err := g.expr(sel.Operand())
	if err != nil {
		return nil, nil, err
	}
	operand := g.text(sel.Operand())
	field := sel.FieldName()
	switch s.kind {
	case shapeStruct:
		f, ok := s.fields[field]
		if !ok {
			if sel.Operand().Kind() == ast.IdentKind && (operand == plugincel.ObjectVarName || operand == plugincel.OldObjectVarName) {
				if g.kindName != "" {
					return nil, nil, unguardable{"reads " + operand + "." + field + ", a field " + g.kindName + " does not have"}
				}
				return nil, nil, unguardable{"reads " + operand + "." + field + ", whose shape depends on the kind (the policy's rules name no one built-in kind)"}
			}
			return nil, nil, unguardable{"reads " + operand + "." + field + ", which is not a field kube-apiserver sets"}
		}
		objectRoot := operand == plugincel.ObjectVarName || operand == plugincel.OldObjectVarName
		if objectRoot && field != "metadata" && g.kind != "" {
			g.kindRead = true
		}
		if sel.IsTestOnly() {
			return boolShape, gd, nil
		}
		if f.optional || objectRoot {
			gd = gd.or("!has(" + operand + "." + field + ")")
		}
		return f.shape, gd, g.read(e, f.shape)
	case shapeMap:
		if sel.IsTestOnly() {
			return boolShape, gd, nil
		}
		return s.elem, gd.or("!has(" + operand + "." + field + ")"), g.read(e, s.elem)
	}
	return nil, nil, unguardable{"selects ." + field + " of a value that has no fields"}
}

// cmp are the comparisons defined on two ints or two strings.
var cmp = map[string]bool{operators.Less: true, operators.LessEquals: true, operators.Greater: true, operators.GreaterEquals: true}

// stringTests take a string receiver and string arguments and cannot fail.
var stringTests = map[string]*shape{"startsWith": boolShape, "endsWith": boolShape, "contains": boolShape,
	"lowerAscii": stringShape, "upperAscii": stringShape, "trim": stringShape}

func (g *guarder) call(e ast.Expr) (*shape, guard, error) {
	c := e.AsCall()
	fn := c.FunctionName()
	var args []ast.Expr
	if c.IsMemberFunction() {
		args = append(args, c.Target())
	}
	args = append(args, c.Args()...)
	switch fn {
	case operators.LogicalAnd, operators.LogicalOr:
		// a && b fails only when one side fails and the other is not
		// false (for ||, not true): with S the parts of both guards,
		// S || (A && (B || b)) || (B && (A || a)), A and B the rest of
		// each side's guard, and a and b negated for ||.
		_, ag, err := g.boolOperand(args[0])
		if err != nil {
			return nil, nil, err
		}
		_, bg, err := g.boolOperand(args[1])
		if err != nil {
			return nil, nil, err
		}
		a, b := Embed(g.text(args[0])), Embed(g.text(args[1]))
		if fn == operators.LogicalOr {
			a, b = Not(a), Not(b)
		}
		shared := ag.without(ag.without(bg))
		onlyA, onlyB := ag.without(shared), bg.without(shared)
		return boolShape, shared.or(
			And(Or(onlyA...), Or(append(slices.Clone(onlyB), b)...)),
			And(Or(onlyB...), Or(append(slices.Clone(onlyA), a)...))), nil
	case operators.Conditional:
		_, cg, err := g.boolOperand(args[0])
		if err != nil {
			return nil, nil, err
		}
		ts, tg, err := g.expr(args[1])
		if err != nil {
			return nil, nil, err
		}
		fs, fg, err := g.expr(args[2])
		if err != nil {
			return nil, nil, err
		}
		if ts.kind != fs.kind || ts.kind == shapeNull {
			return nil, nil, unguardable{"chooses between values of different types in " + g.text(e)}
		}
		if len(tg) == 0 && len(fg) == 0 {
			return ts, cg, nil
		}
		return ts, cg.or("(" + Embed(g.text(args[0])) + " ? " + Or(tg...) + " : " + Or(fg...) + ")"), nil
	case operators.LogicalNot:
		_, ag, err := g.boolOperand(args[0])
		return boolShape, ag, err
	case operators.NotStrictlyFalse:
		// Only inside comprehensions the parser builds.
		_, ag, err := g.boolOperand(args[0])
		return boolShape, ag, err
	}
	shapes := make([]*shape, len(args))
	var gd guard
	for i, a := range args {
		s, ag, err := g.expr(a)
		if err != nil {
			return nil, nil, err
		}
		shapes[i], gd = s, join(gd, ag)
	}
	switch {
	case len(shapes) > 0 && shapes[0].kind == shapeAuthz && c.IsMemberFunction() && authzBuilders[fn] && allKind(shapes[1:], shapeString):
		if fn == "check" {
			return &shape{kind: shapeDecision}, gd, nil
		}
		return shapes[0], gd, nil
	case len(shapes) == 1 && shapes[0].kind == shapeDecision && c.IsMemberFunction() && decisionReads[fn] != nil:
		return decisionReads[fn], gd, nil
	case fn == operators.Equals || fn == operators.NotEquals:
		// Scalars of any two types compare (false across types), and
		// anything compares with null; a list, map or object kube-apiserver
		// holds as its Go type fails against a value of another type.
		if comparableShapes(shapes[0], shapes[1]) {
			return boolShape, gd, nil
		}
		return nil, nil, unguardable{"compares " + g.text(e) + ", which fails on values of other types"}
	case cmp[fn]:
		if shapes[0].kind == shapes[1].kind && (shapes[0].kind == shapeInt || shapes[0].kind == shapeString) {
			return boolShape, gd, nil
		}
		return nil, nil, unguardable{"compares " + g.text(e) + ", which fails on values of other types"}
	case fn == operators.In:
		switch shapes[1].kind {
		case shapeList:
			if comparableShapes(shapes[0], shapes[1].elem) {
				return boolShape, gd, nil
			}
		case shapeMap:
			if shapes[0].kind == shapeString {
				return boolShape, gd, nil
			}
		}
		return nil, nil, unguardable{"tests " + g.text(e) + ", which fails on values of other types"}
	case fn == operators.Index:
		return g.index(e, args, shapes, gd)
	case fn == "size" && len(args) == 1:
		switch shapes[0].kind {
		case shapeString, shapeList, shapeMap, shapeBytes:
			return intShape, gd, nil
		}
	case fn == operators.Add && shapes[0].kind == shapeString && shapes[1].kind == shapeString:
		return stringShape, gd, nil
	case stringTests[fn] != nil && c.IsMemberFunction() && allKind(shapes, shapeString):
		return stringTests[fn], gd, nil
	case fn == "matches" && c.IsMemberFunction() && allKind(shapes, shapeString):
		lit, ok := args[1].AsLiteral().(types.String)
		if args[1].Kind() != ast.LiteralKind || !ok {
			return nil, nil, unguardable{"matches a pattern that is not a literal, which may not compile"}
		}
		if _, err := regexp.Compile(string(lit)); err != nil {
			return nil, nil, unguardable{"matches " + strconv.Quote(string(lit)) + ", which does not compile"}
		}
		return boolShape, gd, nil
	case fn == operators.Add || fn == operators.Subtract || fn == operators.Multiply || fn == operators.Negate:
		return nil, nil, unguardable{"computes " + g.text(e) + ", which can overflow or take operands of other types"}
	case fn == operators.Divide || fn == operators.Modulo:
		return nil, nil, unguardable{"computes " + g.text(e) + ", which fails on a zero divisor"}
	}
	return nil, nil, unguardable{"calls " + strings.TrimSuffix(strings.TrimPrefix(fn, "_"), "_") + " in " + g.text(e) + ", which may fail to evaluate"}
}

// authzBuilders build an authorization check from strings, and check runs
// it; decisionReads read its decision (k8s.io/apiserver/pkg/cel/library
// authz): an authorizer's failure is the decision's error(), not the
// expression's.
var (
	authzBuilders = map[string]bool{"group": true, "resource": true, "subresource": true, "namespace": true, "name": true,
		"path": true, "serviceAccount": true, "check": true}
	decisionReads = map[string]*shape{"allowed": boolShape, "errored": boolShape, "reason": stringShape, "error": stringShape}
)

func scalar(s *shape) bool {
	switch s.kind {
	case shapeList, shapeMap, shapeStruct, shapeAuthz, shapeDecision:
		return false
	}
	return true
}

// comparableShapes: == and != on values of shapes a and b cannot fail.
func comparableShapes(a, b *shape) bool {
	switch {
	case a.kind == shapeNull || b.kind == shapeNull:
		return true
	case scalar(a) && scalar(b):
		return true
	case a.kind == shapeList && b.kind == shapeList:
		return comparableShapes(a.elem, b.elem)
	}
	return false
}

func allKind(shapes []*shape, k shapeKind) bool {
	for _, s := range shapes {
		if s.kind != k {
			return false
		}
	}
	return true
}

// boolOperand is an operand of !, &&, || or ?:, which must be a bool.
func (g *guarder) boolOperand(e ast.Expr) (*shape, guard, error) {
	s, guard, err := g.expr(e)
	if err != nil {
		return nil, nil, err
	}
	if s.kind != shapeBool {
		return nil, nil, unguardable{"uses " + g.text(e) + " as a condition, which fails when it is not a bool"}
	}
	return s, guard, nil
}

func (g *guarder) index(e ast.Expr, args []ast.Expr, shapes []*shape, gd guard) (*shape, guard, error) {
	coll, key := g.text(args[0]), g.text(args[1])
	switch {
	case shapes[0].kind == shapeMap && shapes[1].kind == shapeString:
		// An optional index costs what a lookup does; in may cost the
		// map's size.
		return shapes[0].elem, gd.or("!" + coll + "[?" + key + "].hasValue()"), g.read(e, shapes[0].elem)
	case shapes[0].kind == shapeList && shapes[1].kind == shapeInt:
		return shapes[0].elem, gd.or(Embed(key)+" < 0", Embed(key)+" >= size("+coll+")"), g.read(e, shapes[0].elem)
	}
	return nil, nil, unguardable{"indexes " + coll + "[" + key + "], which fails on values of other types"}
}

// read notes that e, of shape s, is read: a list or map read outside a
// comprehension is sized; one read from a comprehension's variable has a
// size no guard bounds.
func (g *guarder) read(e ast.Expr, s *shape) error {
	if s.kind != shapeList && s.kind != shapeMap {
		return nil
	}
	root := e
walk:
	for {
		switch root.Kind() {
		case ast.SelectKind:
			root = root.AsSelect().Operand()
		case ast.CallKind:
			c := root.AsCall()
			if c.FunctionName() != operators.Index {
				break walk
			}
			root = c.Args()[0]
		default:
			break walk
		}
	}
	if root.Kind() == ast.IdentKind {
		if _, local := g.scope[root.AsIdent()]; local {
			return unguardable{"reads " + g.text(e) + " in a comprehension, a list or map whose size no guard bounds"}
		}
	}
	if t := g.text(e); !slices.Contains(g.sized, t) {
		g.sized = append(g.sized, t)
	}
	return nil
}

// comprehension handles all and exists; other macros build values whose
// size and shape the guard cannot follow.
func (g *guarder) comprehension(e ast.Expr) (*shape, guard, error) {
	macro, ok := g.info.GetMacroCall(e.ID())
	if !ok || macro.Kind() != ast.CallKind {
		return nil, nil, unguardable{"uses a comprehension, which may fail to evaluate"}
	}
	name := macro.AsCall().FunctionName()
	comp := e.AsComprehension()
	if (name != "all" && name != "exists") || comp.HasIterVar2() {
		return nil, nil, unguardable{"uses " + name + "(), which may fail to evaluate"}
	}
	rs, rg, err := g.expr(comp.IterRange())
	if err != nil {
		return nil, nil, err
	}
	var elem *shape
	switch rs.kind {
	case shapeList:
		elem = rs.elem
	case shapeMap:
		elem = stringShape
	default:
		return nil, nil, unguardable{"iterates over " + g.text(comp.IterRange()) + ", which may not be a list or map"}
	}
	step := comp.LoopStep()
	if step.Kind() != ast.CallKind || len(step.AsCall().Args()) != 2 {
		return nil, nil, unguardable{"uses " + name + "() in a form the guard does not know"}
	}
	pred := step.AsCall().Args()[1]
	v := comp.IterVar()
	outer, shadowed := g.scope[v]
	g.scope[v] = elem
	_, pg, err := g.boolOperand(pred)
	if shadowed {
		g.scope[v] = outer
	} else {
		delete(g.scope, v)
	}
	if err != nil {
		return nil, nil, err
	}
	rest := pg.without(rg)
	if len(rest) == 0 {
		return boolShape, rg, nil
	}
	return boolShape, rg.or(Embed(g.text(comp.IterRange())) + ".exists(" + v + ", " + Or(rest...) + ")"), nil
}
