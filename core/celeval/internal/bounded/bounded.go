// Package bounded is kube-apiserver's base CEL environment with bounds on
// the functions that build values far larger than their arguments
// (replace, format, join, lists.range): what one call may build, and a
// cost for what it builds beyond what upstream prices. celeval compiles
// every expression in Base; its cost bound treats the calls Uncharged
// reports as having no bound.
package bounded

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// Some functions of the environment build values far larger than their
// arguments, and kube-apiserver's cost model prices them by their arguments
// (replace by its receiver, format by its template, lists.range at 1): a
// 248 KB ConfigMap whose replace asks for 3.8 GB costs about 26,000 and
// takes the process down. admitfn keeps upstream's functions and costs, and
// adds two bounds:
//
//   - No call of such a function builds a value of more than MaxResultBytes
//     (a string) or celconfig.PerCallLimit elements (a list): it fails
//     before allocating, as an evaluation error, which the failurePolicy
//     answers like a cost-limit error.
//   - Each byte (or element) a call builds beyond the argument upstream
//     prices it by costs 1 on top of upstream's cost, so the per-expression
//     and per-binding cost limits bound what a policy builds in all: a
//     thousand copies of a 1 MB annotation through 'x'.replace('x', …) run
//     out of budget, not memory. Calls that build no more than that
//     argument (a replace that does not grow its receiver) cost exactly what
//     they cost upstream.
//
// String and list concatenation need neither: upstream charges a tenth per
// byte of the result, so building a large value by doubling it runs out of
// budget first, and lists are concatenated without copying.

// MaxResultBytes bounds the string one call of a function may build: the
// largest review a function accepts. No policy needs a value larger than the
// objects it reviews.
const MaxResultBytes = 7 << 20

// amplifier bounds one overload: size returns the size of its result from
// its arguments, before it is computed, and the size upstream's cost is
// proportional to (replace's receiver, format's template).
type amplifier struct {
	// size: the result's size and the priced size, in bytes (strings) or
	// elements (lists); ok false when the arguments are not what the
	// overload computes on (the original then reports its own error).
	size func(args []ref.Val) (result, given uint64, ok bool)
	// list: size counts elements, bounded by PerCallLimit.
	list bool
	// charged: upstream's cost already grows with the result (join); only
	// the bound applies.
	charged bool
}

var amplifiers = map[string]amplifier{
	"string_replace_string_string":     {size: replaceSize},
	"string_replace_string_string_int": {size: replaceSize},
	"list_join":                        {size: joinSize, charged: true},
	"list_join_string":                 {size: joinSize, charged: true},
	"string_format":                    {size: formatSize},
	"lists_range":                      {size: rangeSize, list: true},
}

func str(v ref.Val) (string, bool) {
	s, ok := v.(types.String)
	return string(s), ok
}

func replaceSize(args []ref.Val) (uint64, uint64, bool) {
	if len(args) < 3 {
		return 0, 0, false
	}
	s, ok1 := str(args[0])
	old, ok2 := str(args[1])
	repl, ok3 := str(args[2])
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, false
	}
	n := strings.Count(s, old) // for "", one more than the runes
	if len(args) == 4 {
		limit, ok := args[3].(types.Int)
		if !ok {
			return 0, 0, false
		}
		if limit >= 0 && int64(limit) < int64(n) {
			n = int(limit)
		}
	}
	given := uint64(len(s))
	result := int64(len(s)) + int64(n)*(int64(len(repl))-int64(len(old)))
	return uint64(max(result, 0)), given, true
}

func joinSize(args []ref.Val) (uint64, uint64, bool) {
	l, ok := args[0].(traits.Lister)
	if !ok {
		return 0, 0, false
	}
	sep := ""
	if len(args) == 2 {
		if sep, ok = str(args[1]); !ok {
			return 0, 0, false
		}
	}
	var total uint64
	n := int64(l.Size().(types.Int))
	for i := int64(0); i < n; i++ {
		s, ok := str(l.Get(types.Int(i)))
		if !ok {
			return 0, 0, false
		}
		total += uint64(len(s))
	}
	given := total + uint64(len(sep))
	if n > 1 {
		total += uint64(n-1) * uint64(len(sep))
	}
	return total, given, true
}

// formatSize bounds what format can print: the template, and each argument
// printed in full (a list or map, every element), with room for what a
// number or a separator takes.
func formatSize(args []ref.Val) (uint64, uint64, bool) {
	tmpl, ok := str(args[0])
	if !ok || len(args) != 2 {
		return 0, 0, false
	}
	l, ok := args[1].(traits.Lister)
	if !ok {
		return 0, 0, false
	}
	printed := uint64(len(tmpl))
	n := int64(l.Size().(types.Int))
	for i := int64(0); i < n; i++ {
		printed += printedSize(l.Get(types.Int(i)), 0)
	}
	return printed, uint64(len(tmpl)), true
}

// printedSize is an upper bound of the bytes format prints for v.
func printedSize(v ref.Val, depth int) uint64 {
	const scalar = 32 // any number, bool, duration or timestamp printed
	if depth > 32 {
		return scalar
	}
	switch v := v.(type) {
	case types.String:
		return uint64(len(v)) + 2
	case types.Bytes:
		return uint64(len(v))*4 + 2
	case traits.Lister:
		size := uint64(2)
		it := v.Iterator()
		for it.HasNext() == types.True {
			size += printedSize(it.Next(), depth+1) + 2
		}
		return size
	case traits.Mapper:
		size := uint64(2)
		it := v.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			size += printedSize(k, depth+1) + printedSize(v.Get(k), depth+1) + 4
		}
		return size
	}
	return scalar
}

func rangeSize(args []ref.Val) (uint64, uint64, bool) {
	n, ok := args[0].(types.Int)
	if !ok || n < 0 {
		return 0, 0, false
	}
	return uint64(n), 0, true
}

func (a amplifier) limit() uint64 {
	if a.list {
		return celconfig.PerCallLimit
	}
	return MaxResultBytes
}

// exceeded is the error of a call whose result would pass the bound.
func exceeded(function string, size, limit uint64, list bool) ref.Val {
	unit := "bytes"
	if list {
		unit = "elements"
	}
	return types.NewErr("operation cancelled: %s would build a value of %d %s, more than the %d a function may build", function, size, unit, limit)
}

// boundedBinding wraps an overload's implementation with its bound.
func boundedBinding(function string, a amplifier, o *functions.Overload) functions.FunctionOp {
	return func(args ...ref.Val) ref.Val {
		if size, _, ok := a.size(args); ok && size > a.limit() {
			return exceeded(function, size, a.limit(), a.list)
		}
		switch {
		case len(args) == 1 && o.Unary != nil:
			return o.Unary(args[0])
		case len(args) == 2 && o.Binary != nil:
			return o.Binary(args[0], args[1])
		case o.Function != nil:
			return o.Function(args...)
		}
		return types.NoSuchOverloadErr()
	}
}

// extraCost is what a call costs on top of upstream's: the size it built
// beyond its arguments. base is upstream's cost of the call.
func extraCost(a amplifier, base func(args []ref.Val, result ref.Val) uint64) interpreter.FunctionTracker {
	return func(args []ref.Val, result ref.Val) *uint64 {
		cost := base(args, result)
		if types.IsError(result) {
			return &cost // refused, or failed: nothing was built
		}
		if built, given, ok := a.size(args); ok && built > given {
			cost = saturatingAdd(cost, built-given)
		}
		return &cost
	}
}

func saturatingAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// upstreamCost is the cost upstream's tracker gives a call of the overload:
// Kubernetes' estimator, else cel-go's default for it.
func upstreamCost(function, overloadID string) func(args []ref.Val, result ref.Val) uint64 {
	est := &library.CostEstimator{}
	return func(args []ref.Val, result ref.Val) uint64 {
		if c := est.CallCost(function, overloadID, args, result); c != nil {
			return *c
		}
		if overloadID == "string_format" && len(args) > 0 {
			// cel-go's default for ExtFormatString: the template, traversed.
			if s, ok := str(args[0]); ok {
				return uint64(math.Ceil(float64(utf8.RuneCountInString(s)) * 0.1))
			}
		}
		return 1
	}
}

// bounded extends base with the bounded implementations of every amplifying
// overload it declares, and their costs.
func bounded(base *environment.EnvSet) (*environment.EnvSet, error) {
	env, err := base.Env(environment.StoredExpressions)
	if err != nil {
		return nil, err
	}
	// The redefinitions apply to both modes: each overload must be in both
	// already, or this would add it to new expressions.
	newEnv, err := base.Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	inNew := map[string]bool{}
	for _, fn := range newEnv.Functions() {
		for _, od := range fn.OverloadDecls() {
			inNew[od.ID()] = true
		}
	}
	var envOpts []cel.EnvOption
	var trackers []interpreter.CostTrackerOption
	for name, fn := range env.Functions() {
		bindings, err := fn.Bindings()
		if err != nil {
			return nil, err
		}
		for _, od := range fn.OverloadDecls() {
			a, ok := amplifiers[od.ID()]
			if !ok {
				continue
			}
			if !inNew[od.ID()] {
				return nil, fmt.Errorf("bounded functions: %s is not declared for new expressions", od.ID())
			}
			var binding *functions.Overload
			for _, b := range bindings {
				if b.Operator == od.ID() {
					binding = b
				}
			}
			if binding == nil {
				return nil, fmt.Errorf("bounded functions: %s has no implementation", od.ID())
			}
			opts := []cel.OverloadOpt{cel.FunctionBinding(boundedBinding(name, a, binding))}
			if od.IsNonStrict() {
				opts = append(opts, cel.OverloadIsNonStrict())
			}
			if od.OperandTrait() != 0 {
				opts = append(opts, cel.OverloadOperandTrait(od.OperandTrait()))
			}
			overload := cel.Overload(od.ID(), od.ArgTypes(), od.ResultType(), opts...)
			if od.IsMemberFunction() {
				overload = cel.MemberOverload(od.ID(), od.ArgTypes(), od.ResultType(), opts...)
			}
			envOpts = append(envOpts, cel.Function(name, overload))
			if !a.charged {
				trackers = append(trackers, interpreter.OverloadCostTracker(od.ID(), extraCost(a, upstreamCost(name, od.ID()))))
			}
		}
	}
	if len(envOpts) != len(amplifiers) {
		return nil, fmt.Errorf("bounded functions: %d of the %d amplifying overloads are in the environment", len(envOpts), len(amplifiers))
	}
	return base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        envOpts,
		ProgramOptions:    []cel.ProgramOption{cel.CostTrackerOptions(trackers...)},
	})
}

// Base is upstream's base environment with the bounds above.
var Base = sync.OnceValue(func() *environment.EnvSet {
	env, err := bounded(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		panic(fmt.Sprintf("bounded CEL environment: %v", err))
	}
	return env
})

// Uncharged reports whether overloadID is an amplifying overload whose
// extra cost admitfn adds (upstream's cost does not grow with its result):
// a static estimate of an expression calling it is no bound.
func Uncharged(overloadID string) bool {
	a, ok := amplifiers[overloadID]
	return ok && !a.charged
}
