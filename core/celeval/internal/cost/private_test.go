package cost

import (
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/interpreter"

	"github.com/admitfn/admitfn/core/celeval/internal/celgo"
)

// celGoUpgradeHint is what a failure here says to do.
const celGoUpgradeHint = `cel-go changed a private name admitfn's fast paths read (internal/celgo's Names lists them): the path falls back to cel-go's own evaluation (same decisions, slower; logged, counted in admitfn_cel_fast_path_in_use). Read cel-go's new program.go, interpreter/runtimecost.go and interpreter/interpretable.go, carry the change into core/celeval/planned.go and internal/cost's untracked.go and linear.go (or drop the path), and update this table`

// Every unexported name of cel-go the fast paths read (internal/celgo's
// Names: the program's fields, the cost tracker's, the step types the
// linear tracker classifies with their fields) is there with the type it
// is read as, and cel-go still plans each step kind. An upgrade that
// renames one fails here by name.
func TestCelGoPrivateNames(t *testing.T) {
	if err := celgo.CheckProgram(); err != nil {
		t.Errorf("%v: %s", err, celGoUpgradeHint)
	}
	if err := celgo.CheckTracker(); err != nil {
		t.Errorf("%v: %s", err, celGoUpgradeHint)
	}
	if len(celgo.Names) < 18 {
		t.Errorf("celgo.Names lists %d names: the table lost some", len(celgo.Names))
	}

	// The steps cel-go plans for these expressions, as the linear tracker
	// sees them: each kind it classifies must still be planned, and
	// classify.
	env, err := cel.NewEnv(cel.Variable("o", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, expr := range []string{
		`o.a || o.b && o.c`,
		`[1, 2].all(x, x > 0)`,
		`has(o.a)`,
		`(o.a ? o.b : o.c).d`,
	} {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		_, err := env.Program(ast, cel.CustomDecoratorV2(func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
			seen[celgo.StepType(i)] = true
			if a, ok := i.(interpreter.InterpretableAttribute); ok {
				seen[celgo.StepType(a.Attr())] = true
			}
			if _, err := stepInfo(i); err != nil {
				t.Errorf("%s: step %T: %v: %s", expr, i, err, celGoUpgradeHint)
			}
			return i, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []string{"evalOr", "evalAnd", "evalFold", "evalTestOnly", "conditionalAttribute"} {
		if !seen[step] {
			t.Errorf("cel-go no longer plans a %s step, which the linear tracker classifies by name: %s", step, celGoUpgradeHint)
		}
	}
}
