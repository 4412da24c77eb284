// Package cost is what admitfn knows of CEL's cost model, to evaluate
// expressions in less time than cel-go's cost tracking takes with the same
// outcomes: a bound on what an expression may cost on a review, computed
// before it runs (Of; below), under which its condition set runs without
// cel-go's cost observer (UntrackedOption); and a tracker that charges
// what cel-go's does, step by step, in time linear in the review where
// cel-go's grows with its square (LinearOption, EvalLinear; linear.go).
// Both price the calls Kubernetes' library prices at run time by copies of
// its formulas (callCost, callCostOf), which prices_test.go holds to
// upstream's on every function of every environment admitfn compiles in
// (internal/envs).
//
// What it reads of cel-go's private names it reads through
// internal/celgo. Planning programs with these options, keeping them, and
// reporting a fast path that cannot be planned are core/celeval's; the
// extra cost of the functions that build large values is
// internal/bounded's.
package cost

import (
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"

	"github.com/admitfn/admitfn/core/celeval/internal/bounded"
)

// Evaluation without cost tracking.
//
// cel-go's cost observer prices every step of an evaluation, a large part
// of what evaluating costs (docs/performance.md, P8). What it decides is binary
// and all a user can observe of it: an expression passes its per-call limit
// or fails, a condition set runs out of its budget or not. When a bound
// computed before evaluating proves that neither can happen on this review,
// the set is evaluated by programs planned without the observer
// (UntrackedOption); otherwise exactly as upstream, with the observer.
//
// The bound. Every value a review's expressions start from (object,
// oldObject, request, namespaceObject, params) is a tree in which no list
// or map has more than L entries and no string more than T bytes, the
// longest of each in the review (core/celeval's inputSize). sizer walks an expression's
// checked AST and bounds, for each node, the size cel-go's cost model gives
// its value (a list's or map's length, a string's runes, 1 for anything
// else) and that of anything inside it, as a list or map and as a string
// apart: a comprehension iterates a list or map, a string function reads a
// string. cel-go's static cost estimator then prices the expression with
// those sizes, and sizeEstimator prices the calls Kubernetes' library
// charges for by their runtime formulas. An expression that calls a
// function whose result sizer cannot size, or an amplifying one (internal/bounded:
// its extra cost is admitfn's), or reads `variables` whole, has no bound.
// Bounds are computed once per pair of powers of two over L and T
// (Class) and kept, by core/celeval.
//
// TestCostBoundAgreesWithExactCost and FuzzCostBound (core/validate) hold
// every outcome to exact tracking's on budgets down to one below the exact
// cost, so a bound below a true cost shows.

// Unbounded is a size or cost without a bound.
const Unbounded = math.MaxUint64

// extent bounds a value: listLen its size if it is a list or map, strLen
// if it is a string or bytes; innerListLen and innerStrLen the same for
// anything inside it (elements, keys and values, at any depth).
type extent struct{ listLen, strLen, innerListLen, innerStrLen uint64 }

var (
	scalar   = extent{listLen: 1, strLen: 1}
	noExtent = extent{Unbounded, Unbounded, Unbounded, Unbounded}
	// minInputLength: the typed request and namespace are maps of up to
	// ~20 fields.
	minInputLength = uint64(32)
)

// AddSat is a+b, unbounded when it overflows.
func AddSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return Unbounded
	}
	return a + b
}

// mulSat is a×b, unbounded when it overflows.
func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return Unbounded
	}
	return lo
}

// size is the value's size whatever it is.
func (x extent) size() uint64 { return max(x.listLen, x.strLen) }

// element is any value inside x.
func (x extent) element() extent {
	return extent{x.innerListLen, x.innerStrLen, x.innerListLen, x.innerStrLen}
}

// holding is a container of values like x, of length n.
func holding(n uint64, xs ...extent) extent {
	c := extent{listLen: n}
	for _, x := range xs {
		c.innerListLen, c.innerStrLen = max(c.innerListLen, x.listLen, x.innerListLen), max(c.innerStrLen, x.strLen, x.innerStrLen)
	}
	return c
}

func text(n uint64) extent { return extent{strLen: n} }

func union(a, b extent) extent {
	return extent{max(a.listLen, b.listLen), max(a.strLen, b.strLen), max(a.innerListLen, b.innerListLen), max(a.innerStrLen, b.innerStrLen)}
}

// selectsPriced is a copy of a whose select operands are all typed as maps
// where they were not a map, a struct or a type parameter: cel-go's
// estimator prices a field selection only on those (Kubernetes' typed
// schemas), while its runtime charges every selection, and on an object of
// type dyn the estimate would fall below what is charged.
func selectsPriced(a *cel.Ast) (*cel.Ast, error) {
	checked, err := cel.AstToCheckedExpr(a)
	if err != nil {
		return nil, err
	}
	mapType, err := types.TypeToExprType(types.NewMapType(types.StringType, types.DynType))
	if err != nil {
		return nil, err
	}
	native := a.NativeRep()
	for _, e := range ast.MatchDescendants(ast.NavigateAST(native), ast.KindMatcher(ast.SelectKind)) {
		op := e.AsSelect().Operand()
		switch native.GetType(op.ID()).Kind() {
		case types.MapKind, types.StructKind, types.TypeParamKind:
		default:
			checked.TypeMap[op.ID()] = mapType
		}
	}
	return cel.CheckedExprToAst(checked), nil
}

// Bound is what an expression may cost and hold at a class of inputs.
type Bound struct {
	Cost   uint64
	Result extent
	// Vars are the variables the expression reads, by their index in
	// the policy's order.
	Vars []int
}

// None is no bound: the expression stays tracked.
var None = Bound{Cost: Unbounded, Result: noExtent}

// Of bounds the expression checked in env for inputs of class k. index
// gives the policy's variables by name and vars their bounds at k, in
// order (those before the expression's own, for a variable); nil when the
// expression has no variables to read.
func Of(env *cel.Env, checked *cel.Ast, k Class, index map[string]int, vars []Bound) (b Bound) {
	// A bound that cannot be computed is no bound: the expression stays
	// tracked, whatever cel-go's estimator does with an AST it was not
	// written for.
	defer func() {
		if recover() != nil {
			b = None
		}
	}()
	priced, err := selectsPriced(checked)
	if err != nil {
		return None
	}
	native := priced.NativeRep()
	sz := &sizer{ast: native, env: env, input: k.input(), index: index, vars: vars, sizes: map[int64]extent{}, ranges: map[int64]bool{}}
	result := sz.expr(native.Expr())
	b = Bound{Cost: Unbounded, Result: result, Vars: sz.read}
	if sz.unpriced {
		return b
	}
	est, err := env.EstimateCost(priced, &sizeEstimator{sizes: sz.sizes, ranges: sz.ranges})
	if err == nil {
		b.Cost = est.Max
	}
	return b
}

// sizeEstimator gives cel-go's estimator the sizes sizer bounded, and
// prices the calls Kubernetes' library prices at runtime
// (library.CostEstimator.CallCost) by that runtime formula, on those
// sizes. Kubernetes' own static estimates are not used: they are written
// for typed schemas, and some fall below what the runtime charges (join's
// counts the result once, the runtime twice). Every other call is
// cel-go's, whose static and runtime costs are one model.
type sizeEstimator struct {
	sizes map[int64]extent
	// ranges are the comprehension ranges: iterated, their size is their
	// length as a list or map (a string is no range).
	ranges map[int64]bool
}

func (e *sizeEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if n == nil || n.Expr() == nil {
		return nil
	}
	x, ok := e.sizes[n.Expr().ID()]
	if !ok {
		return nil
	}
	size := x.size()
	if e.ranges[n.Expr().ID()] {
		size = x.listLen
	}
	// No bound is said, not left to cel-go, which would size the node by
	// its checked type.
	return &checker.SizeEstimate{Min: 0, Max: size}
}

func (e *sizeEstimator) extent(n *checker.AstNode) extent {
	if n == nil || *n == nil || (*n).Expr() == nil {
		return noExtent
	}
	if x, ok := e.sizes[(*n).Expr().ID()]; ok {
		return x
	}
	return noExtent
}

// ceil is ceil(x × f), as the runtime rounds its factors.
func ceil(x uint64, f float64) uint64 {
	if x == Unbounded {
		return Unbounded
	}
	c := math.Ceil(float64(x) * f)
	if c >= math.MaxUint64 {
		return Unbounded
	}
	return uint64(c)
}

func (e *sizeEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	// The runtime's arguments: the receiver first.
	var all []*checker.AstNode
	if target != nil {
		all = append(all, target)
	}
	for i := range args {
		all = append(all, &args[i])
	}
	arg := func(i int) extent {
		if i < len(all) {
			return e.extent(all[i])
		}
		return noExtent
	}
	if function == operators.In {
		// The runtime charges a list's length (cel-go), a map's lookup 1;
		// the checker, given a dyn, cannot tell which and prices neither.
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 0, Max: max(arg(1).listLen, 1)}}
	}
	cost, ok := callCost(function, overloadID, arg)
	if !ok {
		return nil
	}
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 0, Max: cost}}
}

// callCost bounds what library.CostEstimator.CallCost charges a call of
// function, from the extents of its arguments (receiver first); ok false
// where it charges nothing (cel-go prices the call). Sizes are each
// argument's largest as anything (a list's length or a string's runes):
// the runtime prices whatever value it is given, the overload run or not.
func callCost(function, overloadID string, arg func(int) extent) (uint64, bool) {
	const traversal, regex = 0.1, 0.25
	switch function {
	case "check":
		return 350000, true
	case "serviceAccount", "path", "group", "resource", "subresource", "namespace", "name", "allowed", "reason", "error", "errored",
		"masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast",
		"format.named", "sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan", "compareTo", "add", "sub",
		"major", "minor", "patch", "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery":
		return 1, true
	case "fieldSelector", "labelSelector":
		l := arg(1).size()
		return AddSat(AddSat(10, ceil(l, traversal)), ceil(ceil(l, 0.5), 50)), true
	case "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes":
		// A traversal of the first argument, nested lists and maps
		// included, whatever overload ran or failed (a string overload
		// given a list inside `||` is charged the list's traversal and
		// its error absorbed): no bound.
		return Unbounded, true
	case "url", "lowerAscii", "upperAscii", "substring", "trim", "jsonpatch.escapeKey", "cidr", "isIP", "isCIDR",
		"quantity", "isQuantity", "semver", "isSemver":
		return ceil(arg(0).size(), traversal), true
	case "ip":
		if overloadID == "cidr_ip" {
			return 1, true
		}
		return ceil(arg(0).size(), traversal), true
	case "ip.isCanonical", "replace", "split":
		return ceil(arg(0).size(), 2*traversal), true
	case "join":
		list := arg(0)
		r, _ := callExtent(overloadID, &list, []extent{arg(1)})
		return ceil(r.strLen, 2*traversal), true
	case "find", "findAll":
		return mulSat(ceil(AddSat(arg(0).size(), 1), traversal), ceil(arg(1).size(), regex)), true
	case "containsIP", "containsCIDR":
		c := AddSat(AddSat(ceil(mulSat(arg(0).size(), 2), traversal), ceil(arg(0).size(), traversal)), 1)
		return AddSat(c, ceil(arg(1).size(), traversal)), true
	case "validate":
		// The format's longest regex is not known here.
		return Unbounded, true
	}
	return 0, false
}

// sizer bounds the size of every node of one expression.
type sizer struct {
	ast *ast.AST
	env *cel.Env
	// input bounds every value the expression starts from.
	input extent
	index map[string]int
	vars  []Bound
	sizes map[int64]extent
	// ranges are the comprehensions' ranges (sizeEstimator).
	ranges map[int64]bool
	scope  []scoped
	// read are the variables read; unpriced: the estimator cannot price
	// the expression (an amplifying call, `variables` read whole).
	read     []int
	unpriced bool
	// visits counts the nodes walked: each comprehension walks its step
	// three times, so nesting multiplies the walk, and a policy could
	// make it endless. Past maxVisits the expression has no bound.
	visits int
}

const maxVisits = 100_000

type scoped struct {
	name string
	ext  extent
}

// expr bounds e. Checked types are not trusted to size a value: where
// dyn meets a type parameter the checker may infer a narrower type than
// the value has (optional(dyn).orValue(null) checks as null_type and
// evaluates to whatever the optional held), so only literals and calls
// whose every overload returns a scalar are sized as scalars.
func (s *sizer) expr(e ast.Expr) extent {
	if s.visits++; s.visits > maxVisits {
		s.unpriced = true
		s.sizes[e.ID()] = noExtent
		return noExtent
	}
	x := s.compute(e)
	s.sizes[e.ID()] = x
	return x
}

// isScalar: values of these types are no traits.Sizer, so cel-go's cost
// model sizes them 1.
func isScalar(t *types.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.NullTypeKind,
		types.TimestampKind, types.DurationKind, types.TypeKind:
		return true
	}
	return false
}

func (s *sizer) lookup(name string) (extent, bool) {
	for i := len(s.scope) - 1; i >= 0; i-- {
		if s.scope[i].name == name {
			return s.scope[i].ext, true
		}
	}
	return extent{}, false
}

func (s *sizer) compute(e ast.Expr) extent {
	switch e.Kind() {
	case ast.LiteralKind:
		switch v := e.AsLiteral().(type) {
		case types.String:
			return text(uint64(utf8.RuneCountInString(string(v))))
		case types.Bytes:
			return text(uint64(len(v)))
		}
		return scalar
	case ast.IdentKind:
		return s.ident(e.AsIdent())
	case ast.SelectKind:
		sel := e.AsSelect()
		if sel.IsTestOnly() {
			s.expr(sel.Operand())
			return scalar
		}
		if op := sel.Operand(); op.Kind() == ast.IdentKind && op.AsIdent() == plugincel.VariableVarName {
			if _, local := s.lookup(plugincel.VariableVarName); !local {
				s.sizes[op.ID()] = noExtent
				return s.variable(sel.FieldName())
			}
		}
		return s.expr(sel.Operand()).element()
	case ast.CallKind:
		return s.call(e)
	case ast.ListKind:
		elems := e.AsList().Elements()
		xs := make([]extent, len(elems))
		for i, el := range elems {
			xs[i] = s.expr(el)
		}
		return holding(uint64(len(elems)), xs...)
	case ast.MapKind:
		entries := e.AsMap().Entries()
		var xs []extent
		for _, en := range entries {
			m := en.AsMapEntry()
			xs = append(xs, s.expr(m.Key()), s.expr(m.Value()))
		}
		return holding(uint64(len(entries)), xs...)
	case ast.StructKind:
		fields := e.AsStruct().Fields()
		var xs []extent
		for _, f := range fields {
			xs = append(xs, s.expr(f.AsStructField().Value()))
		}
		return holding(uint64(len(fields)), xs...)
	case ast.ComprehensionKind:
		return s.comprehension(e.AsComprehension())
	}
	s.unpriced = true
	return noExtent
}

func (s *sizer) ident(name string) extent {
	if x, ok := s.lookup(name); ok {
		return x
	}
	switch name {
	case plugincel.ObjectVarName, plugincel.OldObjectVarName, plugincel.RequestVarName,
		plugincel.NamespaceVarName, plugincel.ParamsVarName:
		return s.input
	case plugincel.VariableVarName:
		// Read whole (iterated, indexed): every variable would be
		// evaluated, which this bound does not count.
		s.unpriced = true
	}
	// Anything else (a type name, `authorizer`) is sized by its type
	// (expr), or has no bound.
	return noExtent
}

func (s *sizer) variable(name string) extent {
	i, ok := s.index[name]
	if !ok || i >= len(s.vars) {
		s.unpriced = true
		return noExtent
	}
	if !slices.Contains(s.read, i) {
		s.read = append(s.read, i)
	}
	return s.vars[i].Result
}

// comprehension bounds a fold: its variables range over the elements (or
// keys and values) of its range, and its accumulator may grow by at most
// what one step adds to an empty one, once per element. A step that grows
// faster (one that doubles the accumulator, say) has no bound; no macro's
// does.
func (s *sizer) comprehension(c ast.ComprehensionExpr) extent {
	s.ranges[c.IterRange().ID()] = true
	r := s.expr(c.IterRange())
	// Over a list the first variable is an index, over a map a key; the
	// range's checked type is not trusted to say which.
	elem := r.element()
	v1, v2 := union(elem, scalar), elem
	init := s.expr(c.AccuInit())
	step := func(accu extent) extent {
		n := len(s.scope)
		s.scope = append(s.scope, scoped{c.IterVar(), v1})
		if c.HasIterVar2() {
			s.scope = append(s.scope, scoped{c.IterVar2(), v2})
		}
		s.scope = append(s.scope, scoped{c.AccuVar(), accu})
		s.expr(c.LoopCondition())
		x := s.expr(c.LoopStep())
		s.scope = s.scope[:n]
		return x
	}
	const probe = 1 << 40
	grow := step(extent{})
	big := step(extent{probe, probe, probe, probe})
	accu := noExtent
	if big.listLen <= AddSat(probe, grow.listLen) && big.strLen <= AddSat(probe, grow.strLen) && big.innerListLen <= max(probe, grow.innerListLen) && big.innerStrLen <= max(probe, grow.innerStrLen) {
		accu = extent{
			listLen:      AddSat(init.listLen, mulSat(r.listLen, grow.listLen)),
			strLen:       AddSat(init.strLen, mulSat(r.listLen, grow.strLen)),
			innerListLen: max(init.innerListLen, grow.innerListLen),
			innerStrLen:  max(init.innerStrLen, grow.innerStrLen),
		}
	}
	step(accu) // the sizes the estimator reads are the last pass's
	s.scope = append(s.scope, scoped{c.AccuVar(), accu})
	x := s.expr(c.Result())
	s.scope = s.scope[:len(s.scope)-1]
	return x
}

func (s *sizer) call(e ast.Expr) extent {
	call := e.AsCall()
	var target *extent
	if call.IsMemberFunction() {
		t := s.expr(call.Target())
		target = &t
	}
	args := make([]extent, len(call.Args()))
	for i, a := range call.Args() {
		args[i] = s.expr(a)
	}
	ids := s.ast.GetOverloadIDs(e.ID())
	if len(ids) == 0 {
		s.unpriced = true
		return noExtent
	}
	var x extent
	for _, id := range ids {
		if bounded.Uncharged(id) {
			s.unpriced = true
		}
		r, ok := callExtent(id, target, args)
		if !ok {
			if !scalarOverload(s.env, id) {
				return noExtent
			}
			r = scalar
		}
		x = union(x, r)
	}
	return x
}

// callExtent bounds what an overload returns from what it is given, for
// every overload of the environment whose result is not a scalar; ok false
// for the others.
func callExtent(id string, target *extent, args []extent) (extent, bool) {
	arg := func(i int) extent {
		if i < len(args) {
			return args[i]
		}
		return noExtent
	}
	// self is the receiver: the target of a member call, else the first
	// argument.
	self := arg(0)
	if target != nil {
		self = *target
	}
	switch id {
	case "add_list":
		return extent{AddSat(arg(0).listLen, arg(1).listLen), 0, max(arg(0).innerListLen, arg(1).innerListLen), max(arg(0).innerStrLen, arg(1).innerStrLen)}, true
	case "add_string", "add_bytes":
		return text(AddSat(arg(0).strLen, arg(1).strLen)), true
	case "conditional":
		return union(arg(1), arg(2)), true
	case "index_list", "index_map", "optional_list_index_int", "optional_map_index_value",
		"select_optional_field", "list_optindex_optional_int", "map_optindex_optional_value",
		"optional_list_optindex_optional_int", "optional_map_optindex_optional_value":
		return arg(0).element(), true
	case "list_first", "list_last", "list_string_max_string", "list_string_min_string",
		"list_bytes_max_bytes", "list_bytes_min_bytes":
		return self.element(), true
	case "to_dyn", "optional_of", "optional_ofNonZeroValue", "string_to_string", "bytes_to_bytes":
		return arg(0), true
	case "optional_value", "optional_unwrap", "optional_unwrapOpt", "list_distinct", "list_reverse", "list_slice":
		return self, true
	case "optional_or_optional", "optional_orValue_value":
		return union(self, arg(0)), true
	case "optional_none", "string_to_quantity", "quantity_add", "quantity_add_int", "quantity_sub",
		"quantity_sub_int", "string_to_semver", "string_bool_to_semver", "format-named":
		return scalar, true
	case "list_flatten":
		return extent{mulSat(self.listLen, max(self.innerListLen, 1)), 0, self.innerListLen, self.innerStrLen}, true
	case "@mapInsert_map_key_value":
		return union(holding(AddSat(arg(0).listLen, 1), arg(1), arg(2)), extent{innerListLen: arg(0).innerListLen, innerStrLen: arg(0).innerStrLen}), true
	case "@mapInsert_map_map":
		return extent{AddSat(arg(0).listLen, arg(1).listLen), 0, max(arg(0).innerListLen, arg(1).innerListLen), max(arg(0).innerStrLen, arg(1).innerStrLen)}, true
	case "bool_to_string", "double_to_string", "duration_to_string", "int64_to_string",
		"timestamp_to_string", "uint64_to_string", "cidr_to_string", "ip_to_string":
		return text(64), true
	case "string_to_ip", "string_to_cidr", "cidr_ip", "cidr_masked":
		// An IP or a CIDR is sized by its address's bytes.
		return extent{listLen: 16, strLen: 16}, true
	case "bytes_to_string", "string_lower_ascii", "string_upper_ascii", "string_trim",
		"string_substring_int", "string_substring_int_int", "string_char_at_int", "string_find_string":
		return text(self.strLen), true
	case "string_to_bytes":
		return text(mulSat(self.strLen, 4)), true
	case "string_split_string", "string_split_string_int", "string_find_all_string", "string_find_all_string_int":
		return extent{listLen: AddSat(self.strLen, 1), innerStrLen: self.strLen}, true
	case "strings_quote":
		return text(AddSat(mulSat(arg(0).strLen, 12), 2)), true
	case "string_jsonpatch_escapeKey_string":
		return text(mulSat(arg(0).strLen, 2)), true
	case "list_join":
		return text(mulSat(self.listLen, self.innerStrLen)), true
	case "list_join_string":
		return text(AddSat(mulSat(self.listLen, self.innerStrLen), mulSat(self.listLen, arg(0).strLen))), true
	case "string_to_url":
		// A URL is sized 1; what its parts are read from is its string.
		return extent{listLen: 1, strLen: 1, innerStrLen: arg(0).strLen}, true
	case "url_get_escaped_path", "url_get_host", "url_get_hostname", "url_get_port", "url_get_scheme":
		return text(mulSat(self.innerStrLen, 3)), true
	case "url_get_query":
		return extent{listLen: self.innerStrLen, innerListLen: self.innerStrLen, innerStrLen: mulSat(self.innerStrLen, 3)}, true
	}
	// sort(), and the receiver of sortBy's <list>.@sortByAssociatedKeys(<keys>).
	if strings.HasPrefix(id, "list_") && (strings.HasSuffix(id, "_sort") || strings.HasSuffix(id, "_sortByAssociatedKeys")) {
		return self, true
	}
	return noExtent, false
}

// scalars says, by overload id, whether an overload returns a scalar, for
// every overload of the environments bounds were computed in: an id names
// one declaration, whatever environment holds it. Kept by id, not by
// environment: a policy with variables has an environment of its own, and
// a process keeps none of a bundle it no longer serves.
var scalars sync.Map // overload id → bool

// scalarOverload reports whether the overload id of env returns a scalar.
func scalarOverload(env *cel.Env, id string) bool {
	if v, ok := scalars.Load(id); ok {
		return v.(bool)
	}
	for _, fn := range env.Functions() {
		for _, o := range fn.OverloadDecls() {
			scalars.LoadOrStore(o.ID(), isScalar(o.ResultType()))
		}
	}
	v, ok := scalars.Load(id)
	return ok && v.(bool)
}

// Class is a pair of powers of two, over the longest list or map (L) and
// the longest string (T) of a review's inputs: bounds are computed for the
// class, so for any input no longer.
type Class struct{ l, t uint8 }

// Bounds are computed for classes up to lists of 1,048,576 entries and
// strings of 1 MiB: a review beyond is tracked. Each class a set sees
// costs its bound's computation once, so a caller varying its reviews'
// sizes can make each set compute at most 16 × 21 of them.
const maxClassL, maxClassT = 20, 20

// ClassOf is the class of inputs whose longest list or map has l entries
// and longest string t bytes.
func ClassOf(l, t uint64) Class {
	return Class{uint8(bits.Len64(max(l, minInputLength) - 1)), uint8(bits.Len64(max(t, 1) - 1))}
}

// Bounded reports whether bounds are computed for k: beyond, a review is
// tracked.
func (k Class) Bounded() bool { return k.l <= maxClassL && k.t <= maxClassT }

// input bounds every value an input holds, in class k.
func (k Class) input() extent {
	pow := func(n uint8) uint64 {
		if n >= 64 {
			return Unbounded
		}
		return 1 << n
	}
	l, t := pow(k.l), pow(k.t)
	return extent{l, t, l, t}
}
