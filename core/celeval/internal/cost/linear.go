package cost

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"

	"github.com/admitfn/admitfn/core/celeval/internal/celgo"
)

// Linear cost tracking. cel-go's runtime cost tracker keeps a stack of the
// values it has observed and, for each step, searches it for the step's
// operands; values a comprehension's steps leave on it are dropped only
// when the comprehension ends, and an operand that was never pushed (a
// bare variable) is searched for through the whole stack. Evaluation time
// grows with the square of a list's length ("Evaluation time and object
// size" in docs/performance.md). The tracker here computes the same costs
// in the same order with the same stack, indexed by expression id, so
// that a search takes constant time: a program planned with LinearOption
// observes every step as cel-go's cost observer does and charges the
// tracker found in its activation (trackedActivation).

// costVarName is the name under which a trackedActivation answers with its
// tracker; no CEL identifier can spell it.
const costVarName = "@admitfn.cost"

// trackedActivation is an activation whose evaluation is charged to t.
type trackedActivation struct {
	interpreter.Activation
	t *linearTracker
}

func (a *trackedActivation) ResolveName(name string) (any, bool) {
	if name == costVarName {
		return a.t, true
	}
	return a.Activation.ResolveName(name)
}

// linearTracker is one evaluation's cost, as cel-go's CostTracker counts it.
type linearTracker struct {
	cost uint64
	// stack is cel-go's refValStack. Each value links to the value below
	// it observed for the same id (prev), and top[id] is the topmost of
	// an id's values, -1 when none: a search is one lookup.
	stack []stackVal
	top   []int32
}

type stackVal struct {
	val  ref.Val
	id   int64
	prev int32
}

var trackers = sync.Pool{New: func() any { return &linearTracker{} }}

func newLinearTracker() *linearTracker { return trackers.Get().(*linearTracker) }

// release empties t (which leaves top all -1) and pools it.
func (t *linearTracker) release() {
	t.truncate(0)
	t.cost = 0
	trackers.Put(t)
}

// indexed: ids below this are indexed (top); an expression's ids count
// its nodes, so others are searched for as cel-go does.
const indexed = 1 << 20

func (t *linearTracker) push(val ref.Val, id int64) {
	prev := int32(-1)
	if id >= 0 && id < indexed {
		for int64(len(t.top)) <= id {
			t.top = append(t.top, -1)
		}
		prev, t.top[id] = t.top[id], int32(len(t.stack))
	}
	t.stack = append(t.stack, stackVal{val, id, prev})
}

// topOf is the position of the topmost value observed for id, -1 if none.
func (t *linearTracker) topOf(id int64) int {
	if id >= 0 && id < indexed {
		if id < int64(len(t.top)) {
			return int(t.top[id])
		}
		return -1
	}
	for i := len(t.stack) - 1; i >= 0; i-- {
		if t.stack[i].id == id {
			return i
		}
	}
	return -1
}

// truncate removes the stack's values from position n up.
func (t *linearTracker) truncate(n int) {
	for i := len(t.stack) - 1; i >= n; i-- {
		if id := t.stack[i].id; id >= 0 && id < indexed {
			t.top[id] = t.stack[i].prev
		}
		t.stack[i] = stackVal{}
	}
	t.stack = t.stack[:n]
}

// take removes the topmost value observed for id and every value above it,
// and returns it.
func (t *linearTracker) take(id int64) (ref.Val, bool) {
	n := t.topOf(id)
	if n < 0 {
		return nil, false
	}
	v := t.stack[n].val
	t.truncate(n)
	return v, true
}

func (t *linearTracker) drop(ids ...int64) {
	for _, id := range ids {
		t.take(id)
	}
}

// dropArgs is cel-go's: the arguments' values, last first, each removed
// with what is above it; false as soon as one was never observed.
func (t *linearTracker) dropArgs(args []interpreter.InterpretableV2) ([]ref.Val, bool) {
	vals := make([]ref.Val, len(args))
	for i := len(args) - 1; i >= 0; i-- {
		v, ok := t.take(args[i].ID())
		if !ok {
			return nil, false
		}
		vals[i] = v
	}
	return vals, true
}

// linearConfig is what cel-go's tracker of one program is configured with.
type linearConfig struct {
	limit               *uint64
	estimator           interpreter.ActualCostEstimator
	overloads           map[string]interpreter.FunctionTracker
	presenceTestHasCost bool
}

// stepKind classifies the steps cel-go's observer handles by their
// unexported types.
type stepKind int

const (
	stepOther stepKind = iota
	stepLogic          // evalOr, evalAnd: their terms are dropped
	stepFold           // evalFold: its range is dropped
)

// observe is cel-go's costTrackerFactory.Observe on t, with drops the
// observing wrapper worked out once.
func (t *linearTracker) observe(cfg *linearConfig, id int64, step any, val ref.Val, w *watchInfo) {
	switch s := step.(type) {
	case interpreter.ConstantQualifier:
		t.cost++
	case interpreter.InterpretableConst:
	case interpreter.InterpretableAttribute:
		if cond := w.conditional(s); cond != nil {
			t.drop(cond[0], cond[1], cond[2])
		} else {
			t.drop(s.Attr().ID())
			t.cost += common.SelectAndIdentCost
		}
		if !cfg.presenceTestHasCost && w.testOnly {
			t.cost -= common.SelectAndIdentCost
		}
	default:
		switch w.kind {
		case stepLogic, stepFold:
			t.drop(w.drops...)
		default:
			switch s := step.(type) {
			case interpreter.Qualifier:
				t.cost++
			case interpreter.InterpretableCall:
				if args, ok := t.dropArgs(s.Args()); ok {
					t.cost += callCostOf(cfg, s, args, val)
				}
			case interpreter.InterpretableConstructor:
				t.dropArgs(s.InitVals())
				switch s.Type() {
				case types.ListType:
					t.cost += common.ListCreateBaseCost
				case types.MapType:
					t.cost += common.MapCreateBaseCost
				default:
					t.cost += common.StructCreateBaseCost
				}
			}
		}
	}
	t.push(val, id)
	if cfg.limit != nil && t.cost > *cfg.limit {
		panic(interpreter.EvalCancelledError{Cause: interpreter.CostLimitExceeded, Message: "operation cancelled: actual cost limit exceeded"})
	}
}

// callCostOf is cel-go's CostTracker.costCall.
func callCostOf(cfg *linearConfig, call interpreter.InterpretableCall, args []ref.Val, result ref.Val) uint64 {
	if track, ok := cfg.overloads[call.OverloadID()]; ok {
		if c := track(args, result); c != nil {
			return *c
		}
	}
	if cfg.estimator != nil {
		if c := cfg.estimator.CallCost(call.Function(), call.OverloadID(), args, result); c != nil {
			return *c
		}
	}
	traversal := func(n uint64) uint64 { return uint64(math.Ceil(float64(n) * common.StringTraversalCostFactor)) }
	switch call.OverloadID() {
	case overloads.StartsWithString, overloads.EndsWithString:
		return traversal(valSize(args[1]))
	case overloads.StringToBytes, overloads.BytesToString, overloads.ExtQuoteString, overloads.ExtFormatString:
		return traversal(valSize(args[0]))
	case overloads.InList:
		return valSize(args[1])
	case overloads.LessString, overloads.GreaterString, overloads.LessEqualsString, overloads.GreaterEqualsString,
		overloads.LessBytes, overloads.GreaterBytes, overloads.LessEqualsBytes, overloads.GreaterEqualsBytes,
		overloads.Equals, overloads.NotEquals:
		return traversal(min(valSize(args[0]), valSize(args[1])))
	case overloads.AddString, overloads.AddBytes:
		return traversal(valSize(args[0]) + valSize(args[1]))
	case overloads.Matches, overloads.MatchesString:
		str := uint64(math.Ceil((1.0 + float64(valSize(args[0]))) * common.StringTraversalCostFactor))
		regex := uint64(math.Ceil(float64(valSize(args[1])) * common.RegexStringLengthCostFactor))
		return str * regex
	case overloads.ContainsString:
		return traversal(valSize(args[0])) * traversal(valSize(args[1]))
	default:
		return 1
	}
}

// valSize is cel-go's actualSize.
func valSize(v ref.Val) uint64 {
	if sz, ok := v.(traits.Sizer); ok {
		return uint64(sz.Size().(types.Int))
	}
	if opt, ok := v.(*types.Optional); ok && opt.HasValue() {
		return valSize(opt.GetValue())
	}
	return 1
}

// trackerOf is the tracker an evaluation's activation carries, or nil.
func trackerOf(vars interpreter.Activation) *linearTracker {
	if v, ok := vars.ResolveName(costVarName); ok {
		t, _ := v.(*linearTracker)
		return t
	}
	return nil
}

// watchInfo is what an observing wrapper knows of its step.
type watchInfo struct {
	kind     stepKind
	drops    []int64
	testOnly bool

	// A conditional attribute's ids are worked out on first use: they
	// change as planning adds qualifiers to the attribute.
	conditionalAttr bool
	condOnce        sync.Once
	cond            [3]int64
}

func (w *watchInfo) conditional(a interpreter.InterpretableAttribute) *[3]int64 {
	if !w.conditionalAttr {
		return nil
	}
	w.condOnce.Do(func() { w.cond = celgo.ConditionalIDs(a.Attr()) })
	return &w.cond
}

// stepInfo classifies a step as cel-go's cost observer does by its
// unexported type (evalOr, evalAnd, evalFold, evalTestOnly, and
// conditionalAttribute under an attribute), checking the fields it reads;
// a step it cannot classify fails the program's planning, which leaves
// the expression tracked by cel-go.
func stepInfo(step any) (*watchInfo, error) {
	w := &watchInfo{}
	switch celgo.StepType(step) {
	case "evalOr", "evalAnd":
		terms, err := celgo.LogicTerms(step)
		if err != nil {
			return nil, err
		}
		w.kind = stepLogic
		for _, term := range terms {
			w.drops = append(w.drops, term.ID())
		}
	case "evalFold":
		r, err := celgo.FoldRange(step)
		if err != nil {
			return nil, err
		}
		w.kind = stepFold
		w.drops = []int64{r.ID()}
	case "evalTestOnly":
		w.testOnly = true
	case "evalExhaustiveOr", "evalExhaustiveAnd", "evalExhaustiveConditional":
		return nil, fmt.Errorf("exhaustive evaluation is not tracked linearly: %w", ErrNotPlanned)
	}
	if a, ok := step.(interpreter.InterpretableAttribute); ok && celgo.StepType(a.Attr()) == "conditionalAttribute" {
		if err := celgo.CheckConditional(a.Attr()); err != nil {
			return nil, err
		}
		w.conditionalAttr = true
	}
	return w, nil
}

// The observing wrappers mirror cel-go's (evalWatch and its kin in
// interpreter/interpretable.go): the same steps observed with the same
// values, in the same order.

type watch struct {
	interpreter.InterpretableV2
	info *watchInfo
	cfg  *linearConfig
}

func (e *watch) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	val := e.InterpretableV2.Exec(frame)
	if t := trackerOf(frame); t != nil {
		t.observe(e.cfg, e.ID(), e.InterpretableV2, val, e.info)
	}
	return val
}

func (e *watch) Eval(vars interpreter.Activation) ref.Val { return e.Exec(interpreter.AsFrame(vars)) }

type watchAttr struct {
	interpreter.InterpretableAttribute
	info *watchInfo
	cfg  *linearConfig
}

func (e *watchAttr) AddQualifier(q interpreter.Qualifier) (interpreter.Attribute, error) {
	w := watching{adapter: e.Adapter(), info: &watchInfo{}, cfg: e.cfg}
	switch qual := q.(type) {
	case interpreter.ConstantQualifier:
		q = &watchConstQual{ConstantQualifier: qual, watching: w}
	case *watchAttr:
		w.info = qual.info
		q = &watchAttrQual{Attribute: qual.InterpretableAttribute, watching: w}
	case interpreter.Attribute:
		info, err := stepInfo(qual)
		if err != nil {
			return nil, err
		}
		w.info = info
		q = &watchAttrQual{Attribute: qual, watching: w}
	default:
		q = &watchQual{Qualifier: qual, watching: w}
	}
	_, err := e.InterpretableAttribute.AddQualifier(q)
	return e, err
}

func (e *watchAttr) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	val := e.InterpretableAttribute.Exec(frame)
	if t := trackerOf(frame); t != nil {
		t.observe(e.cfg, e.ID(), e.InterpretableAttribute, val, e.info)
	}
	return val
}

func (e *watchAttr) Eval(vars interpreter.Activation) ref.Val {
	return e.Exec(interpreter.AsFrame(vars))
}

// qualified is the value a watched Qualify observes.
func qualified(adapter types.Adapter, id int64, out any, err error) ref.Val {
	if err != nil {
		return types.LabelErrNode(id, types.WrapErr(err))
	}
	return adapter.NativeToValue(out)
}

// qualifiedIfPresent is the value a watched QualifyIfPresent observes.
func qualifiedIfPresent(adapter types.Adapter, id int64, out any, err error, present, presenceOnly bool) ref.Val {
	switch {
	case err != nil:
		return types.LabelErrNode(id, types.WrapErr(err))
	case out != nil:
		return adapter.NativeToValue(out)
	case presenceOnly:
		return types.Bool(present)
	}
	return nil
}

// watching is what a watched qualifier observes with; its methods are
// cel-go's evalWatch*Qual Qualify and QualifyIfPresent on q.
type watching struct {
	adapter types.Adapter
	info    *watchInfo
	cfg     *linearConfig
}

func (w watching) observe(vars interpreter.Activation, q interpreter.Qualifier, val ref.Val) {
	if t := trackerOf(vars); t != nil {
		t.observe(w.cfg, q.ID(), q, val, w.info)
	}
}

func (w watching) qualify(q interpreter.Qualifier, vars interpreter.Activation, obj any) (any, error) {
	out, err := q.Qualify(vars, obj)
	w.observe(vars, q, qualified(w.adapter, q.ID(), out, err))
	return out, err
}

func (w watching) qualifyIfPresent(q interpreter.Qualifier, vars interpreter.Activation, obj any, presenceOnly bool) (any, bool, error) {
	out, present, err := q.QualifyIfPresent(vars, obj, presenceOnly)
	if present || presenceOnly {
		w.observe(vars, q, qualifiedIfPresent(w.adapter, q.ID(), out, err, present, presenceOnly))
	}
	return out, present, err
}

// The three watched qualifiers keep the interface of what they watch
// (planning tells constants and attributes apart by it).

type watchConstQual struct {
	interpreter.ConstantQualifier
	watching
}

func (e *watchConstQual) Qualify(vars interpreter.Activation, obj any) (any, error) {
	return e.qualify(e.ConstantQualifier, vars, obj)
}

func (e *watchConstQual) QualifyIfPresent(vars interpreter.Activation, obj any, presenceOnly bool) (any, bool, error) {
	return e.qualifyIfPresent(e.ConstantQualifier, vars, obj, presenceOnly)
}

// QualifierValueEquals is cel-go's, for attribute patterns.
func (e *watchConstQual) QualifierValueEquals(value any) bool {
	qve, ok := e.ConstantQualifier.(interface{ QualifierValueEquals(any) bool })
	return ok && qve.QualifierValueEquals(value)
}

type watchAttrQual struct {
	interpreter.Attribute
	watching
}

func (e *watchAttrQual) Qualify(vars interpreter.Activation, obj any) (any, error) {
	return e.qualify(e.Attribute, vars, obj)
}

func (e *watchAttrQual) QualifyIfPresent(vars interpreter.Activation, obj any, presenceOnly bool) (any, bool, error) {
	return e.qualifyIfPresent(e.Attribute, vars, obj, presenceOnly)
}

type watchQual struct {
	interpreter.Qualifier
	watching
}

func (e *watchQual) Qualify(vars interpreter.Activation, obj any) (any, error) {
	return e.qualify(e.Qualifier, vars, obj)
}

func (e *watchQual) QualifyIfPresent(vars interpreter.Activation, obj any, presenceOnly bool) (any, bool, error) {
	return e.qualifyIfPresent(e.Qualifier, vars, obj, presenceOnly)
}

type watchConst struct {
	interpreter.InterpretableConst
	info *watchInfo
	cfg  *linearConfig
}

func (e *watchConst) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	val := e.Value()
	if t := trackerOf(frame); t != nil {
		t.observe(e.cfg, e.ID(), e.InterpretableConst, val, e.info)
	}
	return val
}

func (e *watchConst) Eval(vars interpreter.Activation) ref.Val {
	return e.Exec(interpreter.AsFrame(vars))
}

type watchConstructor struct {
	constructor interpreter.InterpretableConstructor
	info        *watchInfo
	cfg         *linearConfig
}

func (c *watchConstructor) InitVals() []interpreter.InterpretableV2 { return c.constructor.InitVals() }
func (c *watchConstructor) Type() ref.Type                          { return c.constructor.Type() }
func (c *watchConstructor) ID() int64                               { return c.constructor.ID() }

func (c *watchConstructor) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	val := c.constructor.Exec(frame)
	if t := trackerOf(frame); t != nil {
		t.observe(c.cfg, c.ID(), c.constructor, val, c.info)
	}
	return val
}

func (c *watchConstructor) Eval(vars interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(vars))
}

// observeLinearly is the decorator that wraps every planned step as cel-go's
// decObserveEval does, charging steps as cfg says.
func observeLinearly(cfg *linearConfig) interpreter.InterpretableDecoratorV2 {
	return func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		switch inst := i.(type) {
		case *watch, *watchAttr, *watchConst, *watchConstructor:
			return i, nil
		case interpreter.InterpretableAttribute:
			info, err := stepInfo(inst)
			if err != nil {
				return nil, err
			}
			return &watchAttr{InterpretableAttribute: inst, info: info, cfg: cfg}, nil
		case interpreter.InterpretableConst:
			return &watchConst{InterpretableConst: inst, info: &watchInfo{}, cfg: cfg}, nil
		case interpreter.InterpretableConstructor:
			return &watchConstructor{constructor: inst, info: &watchInfo{}, cfg: cfg}, nil
		default:
			info, err := stepInfo(inst)
			if err != nil {
				return nil, err
			}
			return &watch{InterpretableV2: i, info: info, cfg: cfg}, nil
		}
	}
}

// LinearOption plans a program with linear cost tracking in an environment
// that asks for cel-go's: like UntrackedOption, given last, it clears
// cel-go's observer (prog.evalOpts' OptTrackCost, prog.costLimit), keeping
// the limit, the call cost estimator and the tracker options (overload
// cost trackers, presence tests' cost) for the linear tracker; and it
// moves the decorators cel-go adds after the program's own (interrupt
// checks, constant folding, regular expressions) before the observing
// one, as cel-go orders them with its observer. A program it cannot
// reproduce cel-go's tracking for (exhaustive or partial evaluation) fails
// to plan and stays with cel-go's.
var LinearOption = sync.OnceValues(func() (cel.ProgramOption, error) {
	if err := celgo.CheckTracker(); err != nil {
		return nil, err
	}
	return celgo.ProgramOption(func(p celgo.Program) error {
		opts := p.EvalOptions()
		if *opts&cel.OptTrackCost == 0 {
			return fmt.Errorf("the program tracks no cost: %w", ErrNotPlanned)
		}
		if *opts&(cel.OptExhaustiveEval|cel.OptTrackState|cel.OptPartialEval) != 0 {
			return fmt.Errorf("exhaustive, state-tracking and partial evaluation are not tracked linearly: %w", ErrNotPlanned)
		}
		ct, err := interpreter.NewCostTracker(nil, p.CostOptions()...)
		if err != nil {
			return err
		}
		presence, overloads, err := celgo.Tracker(ct)
		if err != nil {
			return err
		}
		cfg := &linearConfig{estimator: p.CallCostEstimator(), presenceTestHasCost: presence, overloads: overloads}
		limit := p.CostLimit()
		if *limit != nil {
			l := **limit
			cfg.limit = &l
		}
		*limit = nil

		// cel-go's own order (program.go): interrupt checks, constant
		// folding, regular expressions, then the observer.
		planner, regexes := p.PlannerOptions(), p.RegexOptimizations()
		if p.InterruptCheckFrequency() > 0 {
			*planner = append(*planner, interpreter.InterruptableEval())
		}
		rs := slices.Clone(*regexes)
		if *opts&cel.OptOptimize != 0 {
			*planner = append(*planner, interpreter.Optimize())
			rs = append(rs, interpreter.MatchesRegexOptimization)
		}
		if len(rs) > 0 {
			*planner = append(*planner, interpreter.CompileRegexConstants(rs...))
		}
		*planner = append(*planner, interpreter.CustomDecoratorV2(observeLinearly(cfg)))
		*opts &^= cel.OptTrackCost | cel.OptOptimize
		*regexes = nil
		return nil
	})
})

// EvalLinear evaluates prog, planned with LinearOption, on act, and
// returns what the evaluation cost as cel-go's tracker would count it.
func EvalLinear(ctx context.Context, prog cel.Program, act interpreter.Activation) (ref.Val, uint64, error) {
	t := newLinearTracker()
	defer t.release()
	val, _, err := prog.ContextEval(ctx, &trackedActivation{Activation: act, t: t})
	return val, t.cost, err
}
