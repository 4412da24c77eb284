// Package celeval is admitfn's CEL runtime for admission policies, shared by
// the validating and the mutating path: kube-apiserver's compilers
// (k8s.io/apiserver/pkg/admission/plugin/cel) on its environments, with the
// values a review's expressions read (request, objects, namespace, params,
// variables) built once per review and shared by every policy. Its parts,
// by job:
//
//   - here: compiling (compiler.go, policycompiler.go), activation and
//     evaluation (attributes.go, params.go, variables.go, condition.go), and
//     the glue of the cost fast paths: the programs they plan
//     (costbound.go, lineartrack.go, planned.go), the bounds kept per policy
//     and per class of input, and fallbacks (fallback.go);
//   - internal/envs: the environments, one per combination of optional
//     variables;
//   - internal/objectval: the object's and params' values: remembered
//     reads, and a built-in kind read as kube-apiserver reads its Go type;
//   - internal/cost: what an expression may cost before it runs, and the
//     linear cost tracker; internal/bounded: the base environment's bounds
//     on functions that build large values; internal/celgo: every read of
//     cel-go's private names.
//
// # cel-go's private names
//
// Three fast paths plan programs beside cel-go's own by reading cel-go's
// unexported names, all of them through internal/celgo, whose Names lists
// each with why: untracked (internal/cost's untracked.go: the program's
// evalOpts and costLimit, cleared where a bound proves the limits safe),
// planned (planned.go: its dispatcher and interpreter, dropped once
// planned: most of the memory a compiled bundle keeps) and linear
// (internal/cost's linear.go: five more program fields, two of the cost tracker's, and the step types
// cel-go's cost observer tells apart). What each buys is measured in
// docs/performance.md (P6, P8, L1). internal/cost's TestCelGoPrivateNames and celgo's
// TestNames hold every one and say what to do when an upgrade changes one;
// a path that cannot be planned falls back to cel-go's evaluation, with
// the same decisions, and says so (fallback.go). make upgrade-rehearsal
// tries the next cel-go and Kubernetes in a copy. Its last run (moving
// from cel-go v0.29.2 and Kubernetes v0.37.2): cel-go v0.31.0 builds and
// passes celeval, validate, mutate and engine with every fast path in use;
// v0.32.0 is published as cel.dev/cel-go, a move of every import; the
// k8s.io modules at v0.38.0-beta.0 need Go 1.27 (fetched) and modules the
// module proxy here does not serve (sigs.k8s.io/structured-merge-diff/v7
// v7.0.1, k8s.io/ktesting), so that upgrade was not tried further.
package celeval

import (
	"sync"

	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/admitfn/admitfn/core/celeval/internal/bounded"
	"github.com/admitfn/admitfn/core/celeval/internal/envs"
)

// Compiler compiles policies against the base CEL environment of the
// Kubernetes version admitfn tracks, at the compatibility version a
// kube-apiserver of that version uses.
type Compiler struct {
	// envs are the environments upstream's compiler declares for each
	// combination of optional variables.
	envs *envs.Set
	// shared compile the policies that declare no variables: such a policy
	// stores nothing in its compiler, so one per combination serves all.
	shared map[plugincel.OptionalVariableDeclarations]func() (*plugincel.CompositedCompiler, error)
	// exactCost: every expression is evaluated with cost tracking, as
	// upstream does (ExactCost).
	exactCost bool
	// linearFrom: see linearTrackingFrom; noBounds: LinearCost.
	linearFrom int
	noBounds   bool
}

// Option configures a Compiler.
type Option func(*Compiler)

// ExactCost evaluates every expression with cel-go's cost tracking, as
// kube-apiserver does. Without it, a condition set that a bound proves
// within its per-call limits and budget on a review is evaluated without
// (costbound.go), and tracked evaluations on reviews with long lists are
// tracked linearly (linearTrackingFrom): the same decisions, errors and
// budget outcomes, in less time.
func ExactCost() Option { return func(c *Compiler) { c.exactCost = true } }

// linearTrackingFrom sets the longest list in a review's inputs (objects,
// request, params, namespace) from which an expression evaluated with cost
// tracking is tracked by admitfn's linear tracker (internal/cost): the same
// costs in the same order as cel-go's tracker, in time that grows with the
// object where cel-go's grows with its square. Below it, cel-go's tracker
// serves (planning the linear program costs a compile, paid once per
// expression). Negative: never. Without ExactCost only; the default is
// DefaultLinearTrackingFrom.
func linearTrackingFrom(n int) Option { return func(c *Compiler) { c.linearFrom = n } }

// LinearCost evaluates every expression with cost tracking, by the linear
// tracker wherever it can plan it, and never without: a measure of the
// tracker against cel-go's (ExactCost), for tests and benchmarks.
func LinearCost() Option { return func(c *Compiler) { c.linearFrom, c.noBounds = 0, true } }

// TracksEveryCost reports whether c was built with ExactCost.
func (c *Compiler) TracksEveryCost() bool { return c.exactCost }

// NewCompiler returns a compiler on the base environment kube-apiserver's
// ValidatingAdmissionPolicy plugin uses (built once per process upstream).
func NewCompiler(opts ...Option) *Compiler {
	c := &Compiler{
		envs:       envs.New(),
		linearFrom: DefaultLinearTrackingFrom,
		shared:     map[plugincel.OptionalVariableDeclarations]func() (*plugincel.CompositedCompiler, error){},
	}
	for _, o := range opts {
		o(c)
	}
	for _, opts := range envs.All() {
		c.shared[opts] = sync.OnceValues(func() (*plugincel.CompositedCompiler, error) {
			return composited(c.envs, opts, c.programs())
		})
	}
	return c
}

// programs is how c's environments keep their programs.
func (c *Compiler) programs() programKind {
	return programKind{bounded: !c.exactCost, linearFrom: c.linearFrom, noBounds: c.noBounds}
}

// Env is the base environment the compiler's environments extend.
func (c *Compiler) Env() *environment.EnvSet { return bounded.Base() }

// ExpressionError is a CEL expression that does not compile. Its text is the
// field path followed by the compiler's own message, caret line included.
type ExpressionError struct {
	Field string
	Err   error
}

func (e *ExpressionError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *ExpressionError) Unwrap() error { return e.Err }

// MaxResultBytes bounds the string one call of a function may build
// (internal/bounded).
const MaxResultBytes = bounded.MaxResultBytes
