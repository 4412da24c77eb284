package celeval

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/interpreter"
)

// planned drops what cel-go's program keeps only to plan it: a dispatcher
// holding every function overload of its environment (a map of several
// hundred entries, made for each program), and the interpreter that holds
// it. Once planned, evaluation runs the planned steps alone, which hold the
// overloads they call; the two fields are read nowhere after
// (cel/program.go). The maps were the largest part of what a bundle's
// compiled policies keep (docs/performance.md). The fields are found by
// name and type; when cel-go changes them nothing is dropped, and that is
// a fallback (fallback.go; TestPlannedProgramsDropDispatcher fails first).
func planned(p cel.Program) cel.Program {
	offsets, ok := plannerFields()
	if !ok {
		fellBack(PathPlanned, errNoPlannerFields)
		return p
	}
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem() != progType {
		fellBack(PathPlanned, fmt.Errorf("cel-go's program is a %T, not the program type its options take", p))
		return p
	}
	base := v.UnsafePointer()
	*(*interpreter.Dispatcher)(unsafe.Add(base, offsets[0])) = nil
	*(*interpreter.Interpreter)(unsafe.Add(base, offsets[1])) = nil
	return p
}

// plannerFields are the offsets of the program's dispatcher and interpreter.
var plannerFields = sync.OnceValues(func() ([2]uintptr, bool) {
	var offsets [2]uintptr
	if progType == nil {
		return offsets, false
	}
	for i, f := range []struct {
		name string
		typ  reflect.Type
	}{
		{"dispatcher", reflect.TypeFor[interpreter.Dispatcher]()},
		{"interpreter", reflect.TypeFor[interpreter.Interpreter]()},
	} {
		sf, ok := progType.FieldByName(f.name)
		if !ok || sf.Type != f.typ {
			return offsets, false
		}
		offsets[i] = sf.Offset
	}
	return offsets, true
})
