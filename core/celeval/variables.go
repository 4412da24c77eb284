package celeval

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// This file is upstream's composition (plugincel's compositionContext and
// lazy.MapValue: `variables.<name>` is evaluated when first read in a
// condition set, once, its runtime cost added to the expression that read
// it), with one difference: on a validating review, a variable's value is
// remembered across the condition sets of one policy evaluation, and across
// the bindings of the policy that read the same params.
//
// Upstream's validator evaluates a policy's validations, then every message
// expression (even for validations that passed), then its audit annotations,
// each set with a composition of its own, so each variable a message reads is
// evaluated again on the same inputs (upstream's messages, unlike its
// validations, have no `authorizer`; admitfn has none in any set). Its value
// cannot differ, but its cost is counted again against the policy's budget,
// and running out of budget is what a user can observe. So the second time a
// variable is read, it is not evaluated: its remembered value is returned,
// its remembered cost reported, and the variables its evaluation read are
// read again (replayed the same way when this composition has not yet read
// them), which reports exactly what upstream's evaluation would. Upstream's composition is not open to
// extension (its map of variables and its cost are unexported), hence this
// copy; TestVariablesMatchUpstream pins values, errors and costs to it.

// variablesTypeName is the type of `variables` (plugincel's own name).
const variablesTypeName = "kubernetes.variables"

// Variables are a policy's compiled variables, as upstream's composited
// compiler stores them.
type Variables struct {
	names   []string
	results []plugincel.CompilationResult
	index   map[string]int
	typ     *types.Type
	bounds  varBounds
}

// NewVariables returns a policy's empty set of variables.
func NewVariables() *Variables {
	return &Variables{index: map[string]int{}, typ: types.NewTypeValue(variablesTypeName, traits.IndexerType|traits.FieldTesterType|traits.IterableType)}
}

// Add stores a compiled variable; a name stored again replaces the first,
// as in upstream's map of compiled variables.
func (v *Variables) Add(name string, r plugincel.CompilationResult) {
	if i, ok := v.index[name]; ok {
		v.results[i] = r
		return
	}
	v.index[name] = len(v.names)
	v.names = append(v.names, name)
	v.results = append(v.results, r)
}

func (v *Variables) len() int {
	if v == nil {
		return 0
	}
	return len(v.names)
}

// composition is one condition set's plugincel.CompositionContext: the
// context its expressions are evaluated in, the cost of the variables they
// read, and what is remembered of them (nil: nothing shared).
type composition struct {
	context.Context
	vars *Variables
	memo *variableMemo
	cost int64
	// untracked: the set is evaluated without cost tracking
	// (costbound.go), and so are its variables; uninterrupted: also
	// without the review's context (uninterruptedBelow).
	untracked, uninterrupted bool
	// longest is the longest list of the review's inputs, -1 when
	// unmeasured: tracked evaluations are tracked linearly from a
	// program's threshold (lineartrack.go).
	longest int64
}

var _ plugincel.CompositionContext = (*composition)(nil)

func (c *composition) Variables(activation any) ref.Val {
	return &variablesValue{c: c, activation: activation, values: make([]ref.Val, c.vars.len())}
}

func (c *composition) GetAndResetCost() int64 {
	cost := c.cost
	c.cost = 0
	return cost
}

// variableMemo is what one policy evaluation remembers of its variables.
type variableMemo struct {
	params  runtime.Object
	entries []memoEntry
}

// memoEntry is one variable: whether it was evaluated to the end, its value
// (an error included) and own cost (unless it was evaluated untracked), and
// the variables its evaluation read.
type memoEntry struct {
	done, priced bool
	val          ref.Val
	cost         int64
	deps         []int
}

// memoKey identifies what a policy's variables read on a validating review
// besides params: the objects (the versioned attributes upstream's
// dispatcher keeps for each kind) and the namespace (a policy is given it
// by name only or whole, always the same way: celNamespace). `request` and
// `authorizer` are the same for every policy of the review. So every
// condition set of one policy evaluation, and every binding of the policy
// that matches with the same params, reads the same values.
type memoKey struct {
	vars       *Variables
	attr       *admission.VersionedAttributes
	namespaced bool
	namespace  string
}

// variableMemo is the memory of the policy evaluations the arguments of a
// condition set's ForInput share, or nil when nothing may be shared: a
// mutating review (its object changes between mutations) or a policy
// without variables.
func (a *Attributes) variableMemo(vars *Variables, attr *admission.VersionedAttributes, params runtime.Object, ns *corev1.Namespace) *variableMemo {
	if !a.shareObjects || vars.len() == 0 {
		return nil
	}
	key := memoKey{vars: vars, attr: attr}
	if ns != nil {
		key.namespaced, key.namespace = true, ns.Name
	}
	for _, m := range a.memos[key] {
		if sameObject(m.params, params) {
			return m
		}
	}
	if a.memos == nil {
		a.memos = map[memoKey][]*variableMemo{}
	}
	m := &variableMemo{params: params, entries: make([]memoEntry, vars.len())}
	a.memos[key] = append(a.memos[key], m)
	return m
}

// sameObject reports whether a and b are the same object (by pointer): only
// then do two condition sets read the same params. (Upstream's dispatcher
// wraps params without a kind anew for each binding: those are shared by
// the sets of one evaluation only.)
func sameObject(a, b runtime.Object) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && va.Kind() == reflect.Pointer && va.Pointer() == vb.Pointer()
}

// variablesValue is `variables` for one activation: lazy.MapValue's
// behaviour (every method below is upstream's), its fields by index.
type variablesValue struct {
	c          *composition
	activation any
	values     []ref.Val
	// evaluating are the variables being evaluated, innermost last: what
	// is read meanwhile is what the innermost one reads.
	evaluating []int
}

var (
	_ ref.Val       = (*variablesValue)(nil)
	_ traits.Mapper = (*variablesValue)(nil)
)

// lookup is the index of the variable an expression names by key: the name
// unescaped as upstream does (a name without "__" is its own unescaping).
func (m *variablesValue) lookup(name string) (int, bool) {
	if strings.Contains(name, "__") {
		var ok bool
		if name, ok = apiservercel.Unescape(name); !ok {
			return 0, false
		}
	}
	i, ok := m.c.vars.index[name]
	return i, ok
}

func (m *variablesValue) resolve(i int) ref.Val {
	if memo := m.c.memo; memo != nil && len(m.evaluating) > 0 {
		memo.read(m.evaluating[len(m.evaluating)-1], i)
	}
	if v := m.values[i]; v != nil {
		return v
	}
	v := m.evaluate(i)
	m.values[i] = v
	return v
}

// read records that the evaluation of variable `by` read variable i.
func (memo *variableMemo) read(by, i int) {
	e := &memo.entries[by]
	if e.done {
		return
	}
	for _, d := range e.deps {
		if d == i {
			return
		}
	}
	e.deps = append(e.deps, i)
}

// evaluate is upstream's variableAccessor.Callback (the same errors, the
// same cost), or what is remembered of its first evaluation.
func (m *variablesValue) evaluate(i int) ref.Val {
	c := m.c
	if c.memo != nil && c.memo.entries[i].done && (c.untracked || c.memo.entries[i].priced) {
		e := &c.memo.entries[i]
		m.evaluating = append(m.evaluating, i)
		for _, d := range e.deps {
			m.resolve(d)
		}
		m.evaluating = m.evaluating[:len(m.evaluating)-1]
		c.cost += e.cost
		return e.val
	}
	name, result := c.vars.names[i], c.vars.results[i]
	if result.Error != nil {
		return types.NewErr("composited variable %q fails to compile: %v", name, result.Error)
	}
	if c.untracked {
		return m.evaluateUntracked(i, name, result)
	}
	m.evaluating = append(m.evaluating, i)
	v, costPtr, detailed, err := evalTracked(c, c.longest, m.activation, result.Program)
	m.evaluating = m.evaluating[:len(m.evaluating)-1]
	if !detailed {
		return types.NewErr("unable to get evaluation details of variable %q", name)
	}
	if costPtr == nil {
		return types.NewErr("unable to calculate cost of variable %q", name)
	}
	cost := int64(*costPtr)
	if *costPtr > math.MaxInt64 {
		cost = math.MaxInt64
	}
	c.cost += cost
	if err != nil {
		v = types.NewErr("composited variable %q fails to evaluate: %v", name, err)
	}
	// An evaluation the review's deadline interrupted would not end the
	// same way again: only what ran to its end is remembered.
	if c.memo != nil && c.Err() == nil {
		e := &c.memo.entries[i]
		e.done, e.priced, e.val, e.cost = true, true, v, cost
	}
	return v
}

// evaluateUntracked is evaluate in a set evaluated without cost tracking:
// the same value and errors, no cost. What it remembers has no cost, so a
// tracked set evaluates the variable again.
func (m *variablesValue) evaluateUntracked(i int, name string, result plugincel.CompilationResult) ref.Val {
	c := m.c
	m.evaluating = append(m.evaluating, i)
	v, err := evalUntracked(c, untrackedOf(result), m.activation)
	m.evaluating = m.evaluating[:len(m.evaluating)-1]
	if err != nil {
		v = types.NewErr("composited variable %q fails to evaluate: %v", name, err)
	}
	if c.memo != nil && c.Err() == nil {
		e := &c.memo.entries[i]
		e.done, e.val = true, v
	}
	return v
}

func (m *variablesValue) Find(key ref.Val) (ref.Val, bool) {
	n, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(n), true
	}
	i, ok := m.lookup(string(n))
	if !ok {
		return nil, false
	}
	return m.resolve(i), true
}

func (m *variablesValue) Get(key ref.Val) ref.Val {
	if v, found := m.Find(key); found {
		return v
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

func (m *variablesValue) Contains(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if v != nil && types.IsUnknownOrError(v) {
		return v
	}
	return types.Bool(found)
}

func (m *variablesValue) Iterator() traits.Iterator { return &variablesIterator{parent: m} }

func (m *variablesValue) Size() ref.Val { return types.Int(m.c.vars.len()) }

func (m *variablesValue) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("disallowed conversion from %q to %q", m.c.vars.typ.TypeName(), typeDesc.Name())
}

func (m *variablesValue) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case m.c.vars.typ:
		return m
	case types.TypeType:
		return m.c.vars.typ
	}
	return types.NewErr("disallowed conversion from %q to %q", m.c.vars.typ.TypeName(), typeVal.TypeName())
}

// Equal is by identity, as upstream's.
func (m *variablesValue) Equal(other ref.Val) ref.Val {
	o, ok := other.(*variablesValue)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(m == o)
}

func (m *variablesValue) Type() ref.Type { return m.c.vars.typ }

func (m *variablesValue) Value() any { return types.NoSuchOverloadErr() }

// variablesIterator is lazy.MapValue's iterator: the names in the order
// they were stored, each value read through Get.
type variablesIterator struct {
	parent *variablesValue
	index  int
}

func (i *variablesIterator) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("disallowed conversion to %q", typeDesc.Name())
}

// ConvertToType's message is upstream's, its typo included.
func (i *variablesIterator) ConvertToType(typeValue ref.Type) ref.Val {
	return types.NewErr("disallowed conversion o %q", typeValue.TypeName())
}

func (i *variablesIterator) Equal(other ref.Val) ref.Val {
	o, ok := other.(*variablesIterator)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(o == i)
}

func (i *variablesIterator) Type() ref.Type { return types.IteratorType }

func (i *variablesIterator) Value() any { return nil }

func (i *variablesIterator) HasNext() ref.Val {
	return types.Bool(i.index < i.parent.c.vars.len())
}

func (i *variablesIterator) Next() ref.Val {
	v := i.parent.Get(types.String(i.parent.c.vars.names[i.index]))
	i.index++
	return v
}
