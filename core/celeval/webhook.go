package celeval

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/admitfn/admitfn/core/celeval/internal/cost"
	"github.com/admitfn/admitfn/core/celeval/internal/envs"
)

// Webhook match conditions: what kube-apiserver evaluates itself before it
// calls a webhook (render's push-down).

// webhookConditionOpts are the variables kube-apiserver declares for a
// webhook's matchConditions (k8s.io/kubernetes validation:
// validateMatchConditionsExpression): no params, an authorizer.
var webhookConditionOpts = plugincel.OptionalVariableDeclarations{HasAuthorizer: true}

// webhookCompiler is the compiler kube-apiserver validates a webhook's
// matchConditions with (getStrictStatelessCELCompiler).
var webhookCompiler = plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))

// maxRequestBytes bounds what any value a webhook condition reads may hold:
// kube-apiserver refuses request bodies over 3 MiB, and a review's strings
// and lists cannot be longer than the body that carries them.
const maxRequestBytes = 3 << 20

// CheckWebhookCondition compiles expr as kube-apiserver validates a
// webhook's matchCondition, and bounds what evaluating it can cost there
// on any request kube-apiserver accepts. It fails when kube-apiserver would
// refuse the condition, or when no bound within the per-call limit
// (celconfig.PerCallLimit) holds: such a condition could fail on a large
// request where the policy it came from would not.
func CheckWebhookCondition(expr string) (bound uint64, err error) {
	return webhookBound(expr, maxRequestBytes)
}

// CompileWebhookCondition compiles expr as kube-apiserver validates a
// webhook's matchCondition.
func CompileWebhookCondition(expr string) error {
	result := webhookCompiler.CompileCELExpression(&matchconditions.MatchCondition{Expression: expr}, webhookConditionOpts, environment.NewExpressions)
	if result.Error != nil {
		return result.Error
	}
	return nil
}

// webhookBound compiles expr as CheckWebhookCondition does and bounds its
// cost on requests whose lists and maps hold at most entries entries (and
// whose strings are up to the largest request's).
func webhookBound(expr string, entries uint64) (uint64, error) {
	if err := CompileWebhookCondition(expr); err != nil {
		return 0, err
	}
	celEnv, err := webhookEnv()
	if err != nil {
		return 0, err
	}
	checked, issues := celEnv.Compile(expr)
	if issues != nil && issues.Err() != nil {
		return 0, issues.Err()
	}
	prog, err := celEnv.Program(checked, cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return 0, err
	}
	p := &boundedProgram{Program: planned(prog), env: celEnv, expr: expr, linearFrom: -1}
	b := p.bound(cost.ClassOf(entries, maxRequestBytes), nil, nil)
	if b.Cost > celconfig.PerCallLimit {
		return 0, ErrUnbounded
	}
	return b.Cost, nil
}

// The environments conditions are bounded and parsed in, each extended
// once per process.
var (
	webhookEnv = sync.OnceValues(func() (*cel.Env, error) {
		env, err := envs.New().For(webhookConditionOpts)
		if err != nil {
			return nil, err
		}
		return env.Env(environment.NewExpressions)
	})
	parseEnv = sync.OnceValues(func() (*cel.Env, error) {
		env, err := envs.New().For(plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true})
		if err != nil {
			return nil, err
		}
		return env.Env(environment.StoredExpressions)
	})
)

// ErrUnbounded: no cost bound within kube-apiserver's per-call limit.
var ErrUnbounded = fmt.Errorf("no cost bound within kube-apiserver's per-call limit (%d) on every request", celconfig.PerCallLimit)

// IsUnbounded reports whether err is ErrUnbounded.
func IsUnbounded(err error) bool { return errors.Is(err, ErrUnbounded) }

// Reads is what an expression reads of a review.
type Reads struct {
	// Variables are the top-level names it reads (object, request,
	// params, namespaceObject, variables, authorizer, …), sorted.
	Variables []string
	// RequestResource: it reads request.resource, or request whole. A
	// webhook's conditions see the resource as requested, the function
	// the one its webhook's rules matched: they differ for a request
	// through an equivalent resource (another version or group).
	RequestResource bool
}

// ExpressionReads parses expr and returns what it reads. Comprehension
// variables are locals, not reads.
func ExpressionReads(expr string) (Reads, error) {
	// Parsed with every macro a policy's environment has (cel.bind,
	// two-variable comprehensions): their variables are locals.
	celEnv, err := parseEnv()
	if err != nil {
		return Reads{}, err
	}
	parsed, issues := celEnv.Parse(expr)
	if issues != nil && issues.Err() != nil {
		return Reads{}, issues.Err()
	}
	var r Reads
	root := ast.NavigateAST(parsed.NativeRep())
	for _, e := range ast.MatchDescendants(root, ast.KindMatcher(ast.IdentKind)) {
		name := e.AsIdent()
		if local(e, name) {
			continue
		}
		if !slices.Contains(r.Variables, name) {
			r.Variables = append(r.Variables, name)
		}
		if name != plugincel.RequestVarName {
			continue
		}
		parent, ok := e.Parent()
		if !ok || parent.Kind() != ast.SelectKind || parent.AsSelect().FieldName() == "resource" {
			r.RequestResource = true
		}
	}
	slices.Sort(r.Variables)
	return r, nil
}

// local reports whether the identifier e names a comprehension variable of
// an enclosing comprehension.
func local(e ast.NavigableExpr, name string) bool {
	for p, ok := e.Parent(); ok; p, ok = p.Parent() {
		if p.Kind() != ast.ComprehensionKind {
			continue
		}
		c := p.AsComprehension()
		if c.IterVar() == name || c.IterVar2() == name || c.AccuVar() == name {
			// The range and the accumulator's start are evaluated
			// outside the comprehension's scope.
			if !within(e, c.IterRange()) && !within(e, c.AccuInit()) {
				return true
			}
		}
	}
	return false
}

// within reports whether e is node or below it.
func within(e ast.NavigableExpr, node ast.Expr) bool {
	for n, ok := ast.NavigableExpr(e), true; ok; n, ok = n.Parent() {
		if n.ID() == node.ID() {
			return true
		}
	}
	return false
}
