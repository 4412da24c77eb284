package cost

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/admitfn/admitfn/core/celeval/internal/envs"
)

// upgradeHint is what a failure of the price checks says to do.
const upgradeHint = `a Kubernetes or cel-go upgrade changed the functions of the CEL environments: for each function kube-apiserver prices at run time (k8s.io/apiserver/pkg/cel/library/cost.go, CallCost), copy its formula into callCost (core/celeval/internal/cost/bound.go); for each one it does not, check that cel-go's default price is right for it and add it to core/celeval/internal/cost/testdata/celgo-priced.txt`

// probeArgs are arguments of an overload's declared types, for asking
// kube-apiserver's runtime what it charges for a call.
func probeArgs(o interface{ ArgTypes() []*types.Type }) []ref.Val {
	var args []ref.Val
	for _, t := range o.ArgTypes() {
		switch t.Kind() {
		case types.IntKind:
			args = append(args, types.Int(2))
		case types.UintKind:
			args = append(args, types.Uint(2))
		case types.DoubleKind:
			args = append(args, types.Double(2))
		case types.BoolKind:
			args = append(args, types.True)
		case types.BytesKind:
			args = append(args, types.Bytes("ab"))
		case types.ListKind:
			args = append(args, types.DefaultTypeAdapter.NativeToValue([]string{"a", "b"}))
		case types.MapKind:
			args = append(args, types.DefaultTypeAdapter.NativeToValue(map[string]string{"a": "b"}))
		case types.StructKind:
			if t.TypeName() == apiservercel.FormatType.TypeName() {
				args = append(args, apiservercel.Format{Name: "dns1123Label", MaxRegexSize: 30})
				continue
			}
			args = append(args, types.String("10.0.0.0/8"))
		default:
			args = append(args, types.String("10.0.0.0/8"))
		}
	}
	return args
}

// unpriced walks every function overload of env and returns, sorted, the
// functions kube-apiserver's runtime prices that callCost does not, those
// callCost prices that it does not, and those neither prices.
func priceCoverage(env *cel.Env) (missing, stale, celGo []string) {
	runtime := &library.CostEstimator{}
	runtimePriced, ours := map[string]bool{}, map[string]bool{}
	for name, fn := range env.Functions() {
		for _, o := range fn.OverloadDecls() {
			if runtime.CallCost(name, o.ID(), probeArgs(o), nil) != nil {
				runtimePriced[name] = true
			}
			if _, ok := callCost(name, o.ID(), func(int) extent { return scalar }); ok {
				ours[name] = true
			}
		}
	}
	for name := range env.Functions() {
		switch {
		case runtimePriced[name] && !ours[name]:
			missing = append(missing, name)
		case ours[name] && !runtimePriced[name]:
			stale = append(stale, name)
		case !ours[name]:
			celGo = append(celGo, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	sort.Strings(celGo)
	return missing, stale, celGo
}

// eachEnvironment calls f with every environment admitfn compiles in:
// each set of optional variables (patch types among them), for new and
// for stored expressions.
func eachEnvironment(t *testing.T, f func(which string, env *cel.Env)) {
	t.Helper()
	all := envs.New()
	for _, opts := range envs.All() {
		set, err := all.For(opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []environment.Type{environment.NewExpressions, environment.StoredExpressions} {
			env, err := set.Env(mode)
			if err != nil {
				t.Fatal(err)
			}
			f(fmt.Sprintf("%+v, %v", opts, mode), env)
		}
	}
}

// celGoPriced are the functions neither kube-apiserver's runtime nor
// callCost prices, reviewed: cel-go's default price is right for them.
func celGoPriced(t *testing.T) []string { return reviewedList(t, "testdata/celgo-priced.txt") }

// reviewedList is the names a reviewed list holds, one a line, after its
// # comments.
func reviewedList(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// Every function of every environment admitfn compiles in (each set of
// optional variables, with and without patch types, for new and stored
// expressions) is priced by callCost exactly where kube-apiserver's
// runtime prices it, and the others are the reviewed list cel-go prices.
func TestPricesCoverEveryFunction(t *testing.T) {
	reviewed := celGoPriced(t)
	seen := map[string]bool{}
	envs := 0
	eachEnvironment(t, func(which string, env *cel.Env) {
		envs++
		missing, stale, celGo := priceCoverage(env)
		if len(missing) > 0 || len(stale) > 0 {
			t.Errorf("%s: kube-apiserver prices %v and callCost does not; callCost prices %v and kube-apiserver does not: %s", which, missing, stale, upgradeHint)
		}
		for _, name := range celGo {
			seen[name] = true
			if !slices.Contains(reviewed, name) {
				t.Errorf("%s: %q is priced by cel-go's default and not reviewed: %s", which, name, upgradeHint)
			}
		}
	})
	if envs < 16 {
		t.Errorf("%d environments: the compiler no longer builds what the test walks", envs)
	}
	for _, name := range reviewed {
		if !seen[name] {
			t.Errorf("testdata/celgo-priced.txt names %q, which no environment has: drop it", name)
		}
	}
}

// The check finds a function the environments gain that nobody priced.
func TestPricesCatchANewFunction(t *testing.T) {
	set, err := envs.New().For(plugincel.OptionalVariableDeclarations{})
	if err != nil {
		t.Fatal(err)
	}
	base, err := set.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	env, err := base.Extend(cel.Function("costlyNew", cel.Overload("costly_new_string", []*cel.Type{cel.StringType}, cel.StringType)))
	if err != nil {
		t.Fatal(err)
	}
	_, _, celGo := priceCoverage(env)
	if !slices.Contains(celGo, "costlyNew") || slices.Contains(celGoPriced(t), "costlyNew") {
		t.Errorf("a new function is not reported as priced by cel-go alone: %v", celGo)
	}
}

// callCost bounds what kube-apiserver's runtime charges: for every
// function of the environment it prices, on arguments of its declared
// types and of sizes from empty to a thousand, callCost given their sizes
// is at least the runtime's charge.
func TestCallCostBoundsRuntime(t *testing.T) {
	set, err := envs.New().For(plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true, HasPatchTypes: true})
	if err != nil {
		t.Fatal(err)
	}
	env, err := set.Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	runtime := &library.CostEstimator{}
	checked := 0
	for name, fn := range env.Functions() {
		for _, o := range fn.OverloadDecls() {
			for _, n := range []int{0, 1, 3, 10, 57, 1000} {
				var args []ref.Val
				var extents []extent
				var joined []string
				for _, at := range o.ArgTypes() {
					switch at.Kind() {
					case types.IntKind, types.UintKind, types.DoubleKind, types.BoolKind:
						args, extents = append(args, types.Int(n)), append(extents, scalar)
					case types.ListKind:
						elems := make([]string, n)
						for i := range elems {
							elems[i] = strings.Repeat("a", n)
						}
						joined = elems
						args, extents = append(args, types.DefaultTypeAdapter.NativeToValue(elems)), append(extents, holding(uint64(n), text(uint64(n))))
					case types.StructKind:
						if at.TypeName() == apiservercel.FormatType.TypeName() {
							args, extents = append(args, apiservercel.Format{Name: "dns1123Label", MaxRegexSize: 30}), append(extents, scalar)
							continue
						}
						fallthrough
					default:
						args, extents = append(args, types.String(strings.Repeat("a", n))), append(extents, text(uint64(n)))
					}
				}
				var result ref.Val = types.String("")
				if name == "join" {
					sep := ""
					if len(args) > 1 {
						sep = string(args[1].(types.String))
					}
					result = types.String(strings.Join(joined, sep))
				}
				charged := runtime.CallCost(name, o.ID(), args, result)
				ours, ok := callCost(name, o.ID(), func(i int) extent {
					if i < len(extents) {
						return extents[i]
					}
					return noExtent
				})
				if charged == nil || !ok || ours == Unbounded {
					continue
				}
				checked++
				if ours < *charged {
					t.Errorf("%s (%s) on size %d: callCost %d, below the runtime's %d: %s", name, o.ID(), n, ours, *charged, upgradeHint)
				}
			}
		}
	}
	if checked < 200 {
		t.Errorf("%d calls compared: the walk no longer reaches the priced functions", checked)
	}
}

// unsizedOverloads are the overloads of env that return something other
// than a scalar and that callExtent has no size rule for: an expression
// calling one has no bound, and is always tracked.
func unsizedOverloads(env *cel.Env) []string {
	var out []string
	for _, fn := range env.Functions() {
		for _, o := range fn.OverloadDecls() {
			if isScalar(o.ResultType()) {
				continue
			}
			if _, ok := callExtent(o.ID(), nil, nil); !ok {
				out = append(out, o.ID())
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Every overload that builds a value has a size rule, or is on the
// reviewed list of those left unbounded (testdata/unsized.txt): a new one
// is seen, not priced by accident.
func TestSizeRulesCoverEveryOverload(t *testing.T) {
	reviewed := reviewedList(t, "testdata/unsized.txt")
	seen := map[string]bool{}
	eachEnvironment(t, func(_ string, env *cel.Env) {
		for _, id := range unsizedOverloads(env) {
			seen[id] = true
			if !slices.Contains(reviewed, id) {
				t.Errorf("overload %s builds a value callExtent has no size rule for, and is not reviewed: give it one in bound.go, or add it to testdata/unsized.txt to leave expressions that call it tracked", id)
			}
		}
	})
	for _, id := range reviewed {
		if !seen[id] {
			t.Errorf("testdata/unsized.txt names %s, which no environment has: drop it", id)
		}
	}
}
