// Package celgo is the one place admitfn reads cel-go's unexported names:
// the program struct a cel.ProgramOption is given, the cost tracker's
// fields, and the step types cel-go's cost observer tells apart. Names
// lists each, with what reads it and why. Every access checks the name and
// its type before it is used and says what it could not find, so a cel-go
// that changed one makes its caller fall back to cel-go's own evaluation
// (core/celeval's fallback.go), never read the wrong memory.
package celgo

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/interpreter"
)

// Name is one unexported name of cel-go read here.
type Name struct {
	Of, Field string       // the type and its field ("" for a step type itself)
	Type      reflect.Type // the field's type as read
	Why       string
}

// Names are the unexported names read, and why. TestNames (here) and
// core/celeval/internal/cost's TestCelGoPrivateNames hold them.
var Names = []Name{
	{"cel.prog", "evalOpts", reflect.TypeFor[cel.EvalOption](), "untracked and linear clear OptTrackCost: cel-go has no option that takes its observer back"},
	{"cel.prog", "costLimit", reflect.TypeFor[*uint64](), "untracked clears it; linear keeps it for its own tracker and clears it"},
	{"cel.prog", "dispatcher", reflect.TypeFor[interpreter.Dispatcher](), "planned drops it: every overload of the environment, kept by every program"},
	{"cel.prog", "interpreter", reflect.TypeFor[interpreter.Interpreter](), "planned drops it: it holds the dispatcher"},
	{"cel.prog", "interruptCheckFrequency", reflect.TypeFor[uint](), "linear plans interrupt checks before its observer, as cel-go does"},
	{"cel.prog", "plannerOptions", reflect.TypeFor[[]interpreter.PlannerOption](), "linear adds its observer after cel-go's decorators"},
	{"cel.prog", "regexOptimizations", reflect.TypeFor[[]*interpreter.RegexOptimization](), "linear compiles regular expressions before its observer"},
	{"cel.prog", "callCostEstimator", reflect.TypeFor[interpreter.ActualCostEstimator](), "linear prices calls with Kubernetes' runtime estimator"},
	{"cel.prog", "costOptions", reflect.TypeFor[[]interpreter.CostTrackerOption](), "linear builds cel-go's tracker to read its overload trackers"},
	{"interpreter.CostTracker", "presenceTestHasCost", reflect.TypeFor[bool](), "linear prices has() as cel-go's tracker does"},
	{"interpreter.CostTracker", "overloadTrackers", reflect.TypeFor[map[string]interpreter.FunctionTracker](), "linear prices the overloads the environment tracks (sets, lists)"},
	{"interpreter.evalOr", "terms", reflect.TypeFor[[]interpreter.InterpretableV2](), "linear drops the costs of terms cel-go's observer drops"},
	{"interpreter.evalAnd", "terms", reflect.TypeFor[[]interpreter.InterpretableV2](), "as evalOr"},
	{"interpreter.evalFold", "iterRange", reflect.TypeFor[interpreter.InterpretableV2](), "linear prices a comprehension's range as cel-go's observer does"},
	{"interpreter.evalTestOnly", "", nil, "linear prices presence tests"},
	{"interpreter.conditionalAttribute", "falsy", reflect.TypeFor[interpreter.Attribute](), "linear drops the branch not taken"},
	{"interpreter.conditionalAttribute", "truthy", reflect.TypeFor[interpreter.Attribute](), "as falsy"},
	{"interpreter.conditionalAttribute", "expr", reflect.TypeFor[interpreter.InterpretableV2](), "as falsy"},
}

// optionType is cel.ProgramOption; progType, cel-go's program struct, its
// argument; nil when cel-go changed the option's shape.
var (
	optionType = reflect.TypeFor[cel.ProgramOption]()
	progType   = func() reflect.Type {
		if optionType.NumIn() != 1 || optionType.In(0).Kind() != reflect.Pointer || optionType.In(0).Elem().Kind() != reflect.Struct {
			return nil
		}
		return optionType.In(0).Elem()
	}()
)

var errNoProgram = errors.New("cel.ProgramOption is not a function of cel-go's program struct")

// progFields are the offsets of the program's fields Names lists.
var progFields = sync.OnceValues(func() (map[string]uintptr, error) {
	if progType == nil {
		return nil, errNoProgram
	}
	offsets := map[string]uintptr{}
	for _, n := range Names {
		if n.Of != "cel.prog" {
			continue
		}
		f, ok := progType.FieldByName(n.Field)
		if !ok || f.Type != n.Type {
			return nil, fmt.Errorf("cel-go's program has no %s field of type %s", n.Field, n.Type)
		}
		offsets[n.Field] = f.Offset
	}
	return offsets, nil
})

// Program is cel-go's program while it is planned, as a program option
// sees it.
type Program struct {
	base    unsafe.Pointer
	offsets map[string]uintptr
}

func (p Program) at(name string) unsafe.Pointer { return unsafe.Add(p.base, p.offsets[name]) }

func (p Program) EvalOptions() *cel.EvalOption { return (*cel.EvalOption)(p.at("evalOpts")) }
func (p Program) CostLimit() **uint64          { return (**uint64)(p.at("costLimit")) }
func (p Program) InterruptCheckFrequency() uint {
	return *(*uint)(p.at("interruptCheckFrequency"))
}
func (p Program) PlannerOptions() *[]interpreter.PlannerOption {
	return (*[]interpreter.PlannerOption)(p.at("plannerOptions"))
}
func (p Program) RegexOptimizations() *[]*interpreter.RegexOptimization {
	return (*[]*interpreter.RegexOptimization)(p.at("regexOptimizations"))
}
func (p Program) CallCostEstimator() interpreter.ActualCostEstimator {
	return *(*interpreter.ActualCostEstimator)(p.at("callCostEstimator"))
}
func (p Program) CostOptions() []interpreter.CostTrackerOption {
	return *(*[]interpreter.CostTrackerOption)(p.at("costOptions"))
}

// ProgramOption is a cel.ProgramOption that runs f on the program being
// planned, an error of f failing the plan. It cannot be built when
// cel-go's program lacks a field Program reads.
func ProgramOption(f func(Program) error) (cel.ProgramOption, error) {
	offsets, err := progFields()
	if err != nil {
		return nil, err
	}
	fn := reflect.MakeFunc(optionType, func(args []reflect.Value) []reflect.Value {
		p := args[0]
		if err := f(Program{base: p.UnsafePointer(), offsets: offsets}); err != nil {
			return []reflect.Value{p, reflect.ValueOf(&err).Elem()}
		}
		return []reflect.Value{p, reflect.Zero(optionType.Out(1))}
	})
	return fn.Interface().(cel.ProgramOption), nil
}

// DropPlanner clears a planned program's dispatcher and interpreter, which
// cel-go reads only while planning (cel/program.go).
func DropPlanner(p cel.Program) error {
	offsets, err := progFields()
	if err != nil {
		return err
	}
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem() != progType {
		return fmt.Errorf("cel-go's program is a %T, not the program type its options take", p)
	}
	base := v.UnsafePointer()
	*(*interpreter.Dispatcher)(unsafe.Add(base, offsets["dispatcher"])) = nil
	*(*interpreter.Interpreter)(unsafe.Add(base, offsets["interpreter"])) = nil
	return nil
}

// Dispatcher is the dispatcher a program holds: what DropPlanner drops.
func Dispatcher(p cel.Program) (interpreter.Dispatcher, error) {
	offsets, err := progFields()
	if err != nil {
		return nil, err
	}
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem() != progType {
		return nil, fmt.Errorf("cel-go's program is a %T, not the program type its options take", p)
	}
	return *(*interpreter.Dispatcher)(unsafe.Add(v.UnsafePointer(), offsets["dispatcher"])), nil
}

// CheckProgram reports whether cel-go's program has every field Program
// and DropPlanner read.
func CheckProgram() error {
	_, err := progFields()
	return err
}

// trackerFields are the cost tracker's: presenceTestHasCost's index, and
// whether overloadTrackers is there.
var trackerFields = sync.OnceValues(func() (int, error) {
	t := reflect.TypeFor[interpreter.CostTracker]()
	presence, ok := t.FieldByName("presenceTestHasCost")
	if !ok || presence.Type.Kind() != reflect.Bool || len(presence.Index) != 1 {
		return 0, errors.New("cel-go's cost tracker has no presenceTestHasCost")
	}
	if !hasField(t, "overloadTrackers", reflect.TypeFor[map[string]interpreter.FunctionTracker]()) {
		return 0, errors.New("cel-go's cost tracker has no overloadTrackers")
	}
	return presence.Index[0], nil
})

// Tracker reads what a cost tracker prices with: whether presence tests
// cost, and the overloads it tracks.
func Tracker(ct *interpreter.CostTracker) (presenceTestHasCost bool, overloads map[string]interpreter.FunctionTracker, err error) {
	presence, err := trackerFields()
	if err != nil {
		return false, nil, err
	}
	v := reflect.ValueOf(ct).Elem()
	return v.Field(presence).Bool(), field[map[string]interpreter.FunctionTracker](v, "overloadTrackers"), nil
}

// CheckTracker reports whether the cost tracker has the fields Tracker
// reads.
func CheckTracker() error {
	_, err := trackerFields()
	return err
}

// StepType is the name of v's type when it is a pointer to one of cel-go's
// interpreter types, else "".
func StepType(v any) string {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().PkgPath() != "github.com/google/cel-go/interpreter" {
		return ""
	}
	return t.Elem().Name()
}

var (
	interpretableType = reflect.TypeFor[interpreter.InterpretableV2]()
	attributeType     = reflect.TypeFor[interpreter.Attribute]()
)

// LogicTerms are the terms of an evalOr or evalAnd step.
func LogicTerms(step any) ([]interpreter.InterpretableV2, error) {
	v := reflect.ValueOf(step)
	if !hasField(v.Type().Elem(), "terms", reflect.SliceOf(interpretableType)) {
		return nil, errors.New("cel-go's logical operators have no terms")
	}
	return field[[]interpreter.InterpretableV2](v.Elem(), "terms"), nil
}

// FoldRange is the range of an evalFold step.
func FoldRange(step any) (interpreter.InterpretableV2, error) {
	v := reflect.ValueOf(step)
	if !hasField(v.Type().Elem(), "iterRange", interpretableType) {
		return nil, errors.New("cel-go's comprehensions have no iterRange")
	}
	return field[interpreter.InterpretableV2](v.Elem(), "iterRange"), nil
}

// CheckConditional reports whether attr, a conditionalAttribute, has the
// fields ConditionalIDs reads.
func CheckConditional(attr any) error {
	t := reflect.TypeOf(attr).Elem()
	if !hasField(t, "falsy", attributeType) || !hasField(t, "truthy", attributeType) || !hasField(t, "expr", interpretableType) {
		return errors.New("cel-go's conditional attributes have no falsy, truthy and expr")
	}
	return nil
}

// ConditionalIDs are the ids of a conditionalAttribute's falsy and truthy
// attributes and its condition (CheckConditional has passed).
func ConditionalIDs(attr any) [3]int64 {
	e := reflect.ValueOf(attr).Elem()
	return [3]int64{
		field[interpreter.Attribute](e, "falsy").ID(),
		field[interpreter.Attribute](e, "truthy").ID(),
		field[interpreter.InterpretableV2](e, "expr").ID(),
	}
}

// field reads struct field name of v, unexported or not (checked to exist
// with that type).
func field[T any](v reflect.Value, name string) T {
	f := v.FieldByName(name)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(T)
}

// hasField reports whether struct type t has field name of type want.
func hasField(t reflect.Type, name string, want reflect.Type) bool {
	f, ok := t.FieldByName(name)
	return ok && f.Type == want
}
