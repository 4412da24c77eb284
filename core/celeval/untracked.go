package celeval

import (
	"errors"
	"reflect"
	"sync"
	"unsafe"

	"github.com/google/cel-go/cel"
)

// optionType is cel.ProgramOption. progType is cel-go's program struct, the
// option's argument, whose unexported fields the options here and planned
// set; nil when cel-go changes the option's shape, and then every program
// stays as cel-go plans it.
var (
	optionType = reflect.TypeFor[cel.ProgramOption]()
	progType   = func() reflect.Type {
		if optionType.NumIn() != 1 || optionType.In(0).Kind() != reflect.Pointer || optionType.In(0).Elem().Kind() != reflect.Struct {
			return nil
		}
		return optionType.In(0).Elem()
	}()
)

// untrackedOption plans a program without cel-go's cost observer in an
// environment that asks for one. Kubernetes' base environment gives every
// program cel.EvalOptions(cel.OptTrackCost) and cel.CostLimit, and cel-go
// has no option that takes either back; its newProgram applies the
// environment's options, then the program's, to its unexported prog, and
// decides from prog.evalOpts and prog.costLimit whether to observe costs.
// This option, given last, clears those two and nothing else, so the
// program is planned exactly as the tracked one is (optimisations,
// interrupt checks, function bindings) minus the observer. The fields are
// found by name and type: when cel-go changes them the option fails, the
// program is not built, and every evaluation stays tracked
// (TestUntrackedProgram fails first).
var untrackedOption = sync.OnceValues(func() (cel.ProgramOption, error) {
	if progType == nil {
		return nil, errors.New("cel.ProgramOption is not a function of a struct pointer")
	}
	prog := progType
	evalOpts, ok := prog.FieldByName("evalOpts")
	if !ok || evalOpts.Type != reflect.TypeFor[cel.EvalOption]() {
		return nil, errors.New("cel-go's program has no evalOpts field of type cel.EvalOption")
	}
	costLimit, ok := prog.FieldByName("costLimit")
	if !ok || costLimit.Type != reflect.TypeFor[*uint64]() {
		return nil, errors.New("cel-go's program has no costLimit field of type *uint64")
	}
	fn := reflect.MakeFunc(optionType, func(args []reflect.Value) []reflect.Value {
		p := args[0]
		base := p.UnsafePointer()
		opts := (*cel.EvalOption)(unsafe.Add(base, evalOpts.Offset))
		*opts &^= cel.OptTrackCost
		*(**uint64)(unsafe.Add(base, costLimit.Offset)) = nil
		return []reflect.Value{p, reflect.Zero(optionType.Out(1))}
	})
	return fn.Interface().(cel.ProgramOption), nil
})
