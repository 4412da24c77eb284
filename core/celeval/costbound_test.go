package celeval

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/admitfn/admitfn/core/celeval/internal/cost"
	"github.com/admitfn/admitfn/core/celeval/internal/objectval"
)

func compileBounded(t *testing.T, expr string, opts ...Option) *boundedProgram {
	t.Helper()
	r := NewCompiler(opts...).ForPolicy(false).CompileCELExpression(&validating.ValidationCondition{Expression: expr}, plugincel.OptionalVariableDeclarations{}, environment.NewExpressions)
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	p, ok := r.Program.(*boundedProgram)
	if !ok {
		t.Fatalf("program %T, want a bounded one", r.Program)
	}
	return p
}

// The untracked program is the tracked one without the cost observer:
// the same result, no cost.
func TestUntrackedProgram(t *testing.T) {
	if _, err := cost.UntrackedOption(); err != nil {
		t.Fatalf("cel-go's program no longer has the fields the option clears: %v", err)
	}
	req := decode(t)
	act := &activation{object: objectval.Of(req.Object.Object), oldObject: objectval.Of(req.OldObject.Object)}
	for _, expr := range []string{
		`object.spec.replicas == 3 && object.metadata.name.startsWith('web')`,
		`oldObject.spec.replicas < object.spec.replicas`,
		`object.missing == 1`,
	} {
		p := compileBounded(t, expr)
		want, det, wantErr := p.ContextEval(context.Background(), act)
		if det == nil || det.ActualCost() == nil {
			t.Fatalf("%s: the tracked program reports no cost", expr)
		}
		u := p.untrackedProgram()
		if u == nil {
			t.Fatalf("%s: no untracked program", expr)
		}
		got, udet, gotErr := u.ContextEval(context.Background(), act)
		if udet != nil && udet.ActualCost() != nil {
			t.Errorf("%s: the untracked program tracked a cost of %d", expr, *udet.ActualCost())
		}
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() ||
			gotErr == nil && got.Equal(want) != types.True {
			t.Errorf("%s: untracked %v, %v; tracked %v, %v", expr, got, gotErr, want, wantErr)
		}
	}
}

// The functions whose cost admitfn raises (internal/bounded) have no bound: the
// estimator does not know their extra cost.
func TestAmplifiersAreNeverBounded(t *testing.T) {
	k := cost.ClassOf(8, 8)
	for _, expr := range []string{
		`object.metadata.name.replace('a', 'bb') != ''`,
		`'%s'.format([object.metadata.name]) != ''`,
		`lists.range(3).size() == 3`,
	} {
		if b := compileBounded(t, expr).bound(k, nil, nil); b.Cost != cost.Unbounded {
			t.Errorf("%s: bound %d, want none", expr, b.Cost)
		}
	}
	// Comprehensions nested 25 deep would take 3^25 walks of the
	// innermost step: the walk stops, and there is no bound.
	nested := "true"
	for range 25 {
		nested = "object.a.all(x, " + nested + ")"
	}
	if b := compileBounded(t, nested).bound(k, nil, nil); b.Cost != cost.Unbounded {
		t.Errorf("25 nested comprehensions: bound %d, want none", b.Cost)
	}
	if b := compileBounded(t, `object.metadata.name.split('-').size() > 1`).bound(k, nil, nil); b.Cost == cost.Unbounded || b.Cost > 100 {
		t.Errorf("split: bound %d, want a small one", b.Cost)
	}
}

// A condition set is untracked only in a budget chain, from its second
// evaluation, and with its tail within the budget left.
func TestUntrackedOnlyWhereProven(t *testing.T) {
	attrs, va := versioned(decode(t))
	compile := func(exprs ...string) *condition {
		pc := NewCompiler().ForPolicy(false)
		var results []plugincel.CompilationResult
		for _, e := range exprs {
			results = append(results, pc.CompileCELExpression(&validating.ValidationCondition{Expression: e}, plugincel.OptionalVariableDeclarations{}, environment.NewExpressions))
		}
		return newCondition(nil, results)
	}
	left := func(c *condition, budget int64) int64 {
		t.Helper()
		_, remaining, err := c.ForInput(context.Background(), va, nil, plugincel.OptionalVariableBindings{}, nil, budget)
		if err != nil {
			t.Fatal(err)
		}
		return remaining
	}
	// Its bound counts both sides; evaluated, the first decides.
	cheap := `object.spec.replicas == 3 || object.metadata.name.size() > 0`
	loose := compile(cheap)
	if a, b := left(loose, 1000), left(loose, 1000); a != b || a >= 1000 {
		t.Errorf("outside a chain: left %d then %d, want the exact cost twice", a, b)
	}
	chained := compile(cheap)
	BudgetChain(chained)
	exact := left(chained, 1000)
	if again := left(chained, 1000); again >= exact || exact != left(loose, 1000) {
		t.Errorf("chained: left %d (exact %d) then %d, want the exact cost first, then the bound's lower remainder", exact, left(loose, 1000), again)
	}
	// With a tail that cannot be bounded, the head stays exact.
	head, tail := compile(cheap), compile(`object.metadata.name.replace('a', 'b') != ''`)
	BudgetChain(head, tail)
	left(head, 1000)
	if again := left(head, 1000); again != exact {
		t.Errorf("head of an unbounded tail: left %d, want exact %d", again, exact)
	}
	// A budget below the bound: exact.
	size, ok := attrs.inputSize(va, nil, nil)
	if !ok {
		t.Fatal("the review's inputs are not measured")
	}
	tight := int64(chained.need(cost.ClassOf(size.l, size.t))) - 1
	if spent := 1000 - exact; tight < spent {
		t.Fatalf("bound %d not above the exact cost %d", tight+1, spent)
	}
	if got := left(chained, tight); got != tight-(1000-exact) {
		t.Errorf("budget %d below the bound: left %d, want the exact %d", tight, got, tight-(1000-exact))
	}
	// Beyond the largest class (a string over 1 MiB): no bound is
	// computed, the set is tracked.
	big := decode(t)
	big.Object.Object["metadata"].(map[string]any)["annotations"] = map[string]any{"a": strings.Repeat("x", 1<<20+1)}
	_, bigVA := versioned(big)
	for range 2 {
		_, remaining, err := chained.ForInput(context.Background(), bigVA, nil, plugincel.OptionalVariableBindings{}, nil, 1000)
		if err != nil || remaining != exact {
			t.Errorf("a 1 MiB string: left %d, %v; want the exact %d", remaining, err, exact)
		}
	}
}

// A policy with variables is compiled in an environment of its own; the
// bounds computed on it keep nothing of it once its bundle is gone, so a
// process that reloads bundles does not keep every environment it built.
func TestBoundsKeepNoEnvironment(t *testing.T) {
	env := func() weak.Pointer[cel.Env] {
		opts := plugincel.OptionalVariableDeclarations{}
		pc := NewCompiler().ForPolicy(true)
		vars := NewVariables()
		vars.Add("name", pc.CompileAndStoreVariable(&validating.Variable{Name: "name", Expression: "object.metadata.name"}, opts, environment.NewExpressions))
		r := pc.CompileCELExpression(&validating.ValidationCondition{Expression: "variables.name.size() < 64"}, opts, environment.NewExpressions)
		p, ok := r.Program.(*boundedProgram)
		if !ok {
			t.Fatalf("program %T, want a bounded one", r.Program)
		}
		k := cost.ClassOf(8, 8)
		if b := p.bound(k, vars, vars.boundsAt(k)); b.Cost == cost.Unbounded {
			t.Fatal("no bound: the test would keep nothing either way")
		}
		return weak.Make(p.env)
	}()
	for range 3 {
		runtime.GC()
	}
	if env.Value() != nil {
		t.Error("the policy's environment is still reachable after its bound was computed")
	}
}

// An untracked set within one expression's per-call limit runs without the
// review's context: the same results, a cancelable context fewer per
// expression; and past the deadline it still stops before its next
// expression.
func TestUninterruptedSets(t *testing.T) {
	_, va := versioned(decode(t))
	exprs := []string{
		`object.spec.replicas == 3 || object.metadata.name.size() > 0`,
		`object.metadata.name.startsWith('web')`,
		`has(object.spec.template)`,
	}
	pc := NewCompiler().ForPolicy(false)
	var results []plugincel.CompilationResult
	for _, e := range exprs {
		results = append(results, pc.CompileCELExpression(&validating.ValidationCondition{Expression: e}, plugincel.OptionalVariableDeclarations{}, environment.NewExpressions))
	}
	set := newCondition(nil, results)
	BudgetChain(set)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	run := func() []plugincel.EvaluationResult {
		out, _, err := set.ForInput(ctx, va, nil, plugincel.OptionalVariableBindings{}, nil, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run() // the first evaluation is tracked
	describeAll := func(rs []plugincel.EvaluationResult) string {
		var s []string
		for _, r := range rs {
			s = append(s, describe(r.EvalResult, r.Error))
		}
		return strings.Join(s, "; ")
	}
	uninterrupted := describeAll(run())
	allocs := testing.AllocsPerRun(20, func() { run() })
	defer func(was uint64) { uninterruptedBelow = was }(uninterruptedBelow)
	uninterruptedBelow = 0
	interrupted := describeAll(run())
	allocsWith := testing.AllocsPerRun(20, func() { run() })
	if uninterrupted != interrupted {
		t.Errorf("without the context: %s; with it: %s", uninterrupted, interrupted)
	}
	if allocsWith-allocs < float64(len(exprs)) {
		t.Errorf("%v allocations a set without the context, %v with it: want one context fewer per expression", allocs, allocsWith)
	}
	uninterruptedBelow = celconfig.PerCallLimit
	past, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	if _, _, err := set.ForInput(past, va, nil, plugincel.OptionalVariableBindings{}, nil, 1000); err == nil {
		t.Error("past its deadline, the set was evaluated")
	}
}
