package celeval

import (
	"errors"
	"reflect"
	"sync"
	"unsafe"

	"github.com/google/cel-go/cel"
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
	optType := reflect.TypeFor[cel.ProgramOption]()
	if optType.NumIn() != 1 || optType.In(0).Kind() != reflect.Pointer || optType.In(0).Elem().Kind() != reflect.Struct {
		return nil, errors.New("cel.ProgramOption is not a function of a struct pointer")
	}
	prog := optType.In(0).Elem()
	evalOpts, ok := prog.FieldByName("evalOpts")
	if !ok || evalOpts.Type != reflect.TypeFor[cel.EvalOption]() {
		return nil, errors.New("cel-go's program has no evalOpts field of type cel.EvalOption")
	}
	costLimit, ok := prog.FieldByName("costLimit")
	if !ok || costLimit.Type != reflect.TypeFor[*uint64]() {
		return nil, errors.New("cel-go's program has no costLimit field of type *uint64")
	}
	fn := reflect.MakeFunc(optType, func(args []reflect.Value) []reflect.Value {
		p := args[0]
		base := p.UnsafePointer()
		opts := (*cel.EvalOption)(unsafe.Add(base, evalOpts.Offset))
		*opts &^= cel.OptTrackCost
		*(**uint64)(unsafe.Add(base, costLimit.Offset)) = nil
		return []reflect.Value{p, reflect.Zero(optType.Out(1))}
	})
	return fn.Interface().(cel.ProgramOption), nil
})
