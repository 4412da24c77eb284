package celgo

import (
	"reflect"
	"testing"

	"github.com/google/cel-go/interpreter"
)

// Each name Names lists of cel-go's program and cost tracker is there,
// with the type it is read as; the step types' names are held by
// core/celeval/internal/cost's TestCelGoPrivateNames, which has cel-go plan them.
func TestNames(t *testing.T) {
	if progType == nil {
		t.Fatal(errNoProgram)
	}
	types := map[string]reflect.Type{"cel.prog": progType, "interpreter.CostTracker": reflect.TypeFor[interpreter.CostTracker]()}
	checked := 0
	for _, n := range Names {
		typ, ok := types[n.Of]
		if !ok {
			continue
		}
		checked++
		if f, ok := typ.FieldByName(n.Field); !ok || f.Type != n.Type {
			t.Errorf("cel-go's %s has no %s of type %s (%s): carry cel-go's change into this package, or drop the fast path that reads it", n.Of, n.Field, n.Type, n.Why)
		}
	}
	if checked != 11 {
		t.Errorf("%d program and tracker names checked, want 11", checked)
	}
}
