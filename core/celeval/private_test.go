package celeval

import (
	"reflect"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/interpreter"
)

// celGoUpgradeHint is what a failure here says to do.
const celGoUpgradeHint = `cel-go changed a private name admitfn's fast paths read (the package doc of core/celeval lists them): the path falls back to cel-go's own evaluation (same decisions, slower; logged, counted in admitfn_cel_fast_path_in_use). Read cel-go's new program.go, interpreter/runtimecost.go and interpreter/interpretable.go, carry the change into untracked.go, planned.go and lineartrack.go (or drop the path), and update this table`

// Every unexported name of cel-go the fast paths read, with the type they
// read it as: the program's fields (untracked.go, planned.go,
// lineartrack.go's linearOption), the cost tracker's, and the step types
// the linear tracker classifies with their fields (stepInfo). One test
// holds them all, so an upgrade that renames one fails here by name.
func TestCelGoPrivateNames(t *testing.T) {
	if progType == nil {
		t.Fatalf("cel.ProgramOption is no longer a function of cel-go's program struct: %s", celGoUpgradeHint)
	}
	for _, f := range []struct {
		of   reflect.Type
		name string
		typ  reflect.Type
	}{
		{progType, "evalOpts", reflect.TypeFor[cel.EvalOption]()},
		{progType, "costLimit", reflect.TypeFor[*uint64]()},
		{progType, "dispatcher", reflect.TypeFor[interpreter.Dispatcher]()},
		{progType, "interpreter", reflect.TypeFor[interpreter.Interpreter]()},
		{progType, "interruptCheckFrequency", reflect.TypeFor[uint]()},
		{progType, "plannerOptions", reflect.TypeFor[[]interpreter.PlannerOption]()},
		{progType, "regexOptimizations", reflect.TypeFor[[]*interpreter.RegexOptimization]()},
		{progType, "callCostEstimator", reflect.TypeFor[interpreter.ActualCostEstimator]()},
		{progType, "costOptions", reflect.TypeFor[[]interpreter.CostTrackerOption]()},
		{reflect.TypeFor[interpreter.CostTracker](), "presenceTestHasCost", reflect.TypeFor[bool]()},
		{reflect.TypeFor[interpreter.CostTracker](), "overloadTrackers", reflect.TypeFor[map[string]interpreter.FunctionTracker]()},
	} {
		if sf, ok := f.of.FieldByName(f.name); !ok || sf.Type != f.typ {
			t.Errorf("%s.%s is not a %s: %s", f.of, f.name, f.typ, celGoUpgradeHint)
		}
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
			seen[celType(i)] = true
			if a, ok := i.(interpreter.InterpretableAttribute); ok {
				seen[celType(a.Attr())] = true
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
