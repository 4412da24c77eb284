package celeval

import (
	"sync"

	"github.com/google/cel-go/cel"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/admitfn/admitfn/core/celeval/internal/cost"
)

// Evaluation without cost tracking (internal/cost's bound.go): a condition
// set that a bound computed before it runs proves within its per-call
// limits and its budget on a review is evaluated by programs planned
// without cel-go's cost observer; otherwise exactly as upstream. Here: the
// programs that keep what a bound needs, and the bounds of a policy's
// variables and condition sets, kept per class of input.

// boundedProgram is a compiled expression with what its bound needs: its
// text and environment. Its checked AST is compiled again when a bound or
// the program without the observer is first needed (most expressions of a
// bundle never match, and an AST is larger than its program's share of
// memory would suggest); the same text in the same environment checks the
// same.
type boundedProgram struct {
	cel.Program
	env  *cel.Env
	expr string

	once      sync.Once
	untracked cel.Program

	// linearFrom is the longest list from which the program's tracked
	// evaluations are tracked linearly (lineartrack.go); negative: never.
	linearFrom int
	linearOnce sync.Once
	linear     cel.Program
	// noBounds: the program's set is never evaluated untracked
	// (LinearCost).
	noBounds bool
}

func (p *boundedProgram) prepare() {
	p.once.Do(func() { p.untracked = p.planWith(PathUntracked, cost.UntrackedOption) })
}

// planWith plans p's expression again with the option opt gives, given
// last; nil when it cannot (the expression then keeps cel-go's tracking).
func (p *boundedProgram) planWith(path string, opt func() (cel.ProgramOption, error)) (prog cel.Program) {
	defer func() {
		if r := recover(); r != nil {
			fellBack(path, recovered(r))
			prog = nil
		}
	}()
	o, err := opt()
	if err != nil {
		fellBack(path, err)
		return nil
	}
	ast, issues := p.env.Compile(p.expr)
	if issues != nil && issues.Err() != nil {
		return nil // compiled once already: cannot happen, and is no fallback of the path's
	}
	if prog, err = p.env.Program(ast, cel.InterruptCheckFrequency(celconfig.CheckFrequency), o); err != nil {
		fellBack(path, err)
		return nil
	}
	return planned(prog)
}

func (p *boundedProgram) untrackedProgram() cel.Program {
	p.prepare()
	return p.untracked
}

// untrackedOf is the untracked program of a compiled expression, or, if
// it has none, its program (a set is untracked only when all its
// expressions have one; this is a guard, not a path).
func untrackedOf(r plugincel.CompilationResult) cel.Program {
	if p, ok := r.Program.(*boundedProgram); ok && p.untrackedProgram() != nil {
		return p.untrackedProgram()
	}
	return r.Program
}

// bound prices the expression for inputs of class k; vars are the bounds of
// the policy's variables at k, in order (those before the expression's own,
// for a variable). Its checked AST is compiled again: the same text in the
// same environment checks the same.
func (p *boundedProgram) bound(k cost.Class, names *Variables, vars []cost.Bound) cost.Bound {
	if p.untrackedProgram() == nil {
		return cost.None
	}
	checked, issues := p.env.Compile(p.expr)
	if issues != nil && issues.Err() != nil {
		return cost.None
	}
	var index map[string]int
	if names != nil {
		index = names.index
	}
	return cost.Of(p.env, checked, k, index, vars)
}

// varBounds are a policy's variables' bounds at each class.
type varBounds struct {
	mu      sync.Mutex
	byClass map[cost.Class][]cost.Bound
}

// boundsAt bounds each of v's variables at class k, in order: each reads
// only those before it.
func (v *Variables) boundsAt(k cost.Class) []cost.Bound {
	v.bounds.mu.Lock()
	defer v.bounds.mu.Unlock()
	if b, ok := v.bounds.byClass[k]; ok {
		return b
	}
	out := make([]cost.Bound, 0, len(v.results))
	for _, r := range v.results {
		p, ok := r.Program.(*boundedProgram)
		if !ok || r.Error != nil {
			out = append(out, cost.None)
			continue
		}
		out = append(out, p.bound(k, v, out))
	}
	if v.bounds.byClass == nil {
		v.bounds.byClass = map[cost.Class][]cost.Bound{}
	}
	v.bounds.byClass[k] = out
	return out
}

// setBound is what one condition set may cost at each class: its
// expressions and every variable they read (each at most once in a set),
// or unbounded when any of them may exceed its per-call limit.
type setBound struct {
	byClass sync.Map // class → uint64
	// tail is the set upstream's validator gives this one's remaining
	// budget to (validations → messages); untracked, this set returns a
	// remaining budget lower than the true one, which only a set that is
	// itself within its bound may be given.
	tail *condition
}

// costAt is the cost bound of c's expressions at class k.
func (c *condition) costAt(k cost.Class) uint64 {
	if v, ok := c.bound.byClass.Load(k); ok {
		return v.(uint64)
	}
	total := c.computeCost(k)
	c.bound.byClass.Store(k, total)
	return total
}

func (c *condition) computeCost(k cost.Class) uint64 {
	var vars []cost.Bound
	if c.vars.len() > 0 {
		vars = c.vars.boundsAt(k)
	}
	var total uint64
	read := make([]bool, len(vars))
	// add counts an expression, and each variable it reads once.
	var add func(b cost.Bound) bool
	add = func(b cost.Bound) bool {
		if b.Cost > celconfig.PerCallLimit {
			return false
		}
		total = cost.AddSat(total, b.Cost)
		for _, d := range b.Vars {
			if !read[d] {
				read[d] = true
				if !add(vars[d]) {
					return false
				}
			}
		}
		return true
	}
	for _, r := range c.results {
		if r.ExpressionAccessor == nil || r.Error != nil {
			continue
		}
		p, ok := r.Program.(*boundedProgram)
		if !ok || !add(p.bound(k, c.vars, vars)) {
			return cost.Unbounded
		}
	}
	return total
}

// need is what c must be able to spend at class k to go untracked: its own
// bound and its tail's.
func (c *condition) need(k cost.Class) uint64 {
	itself := c.costAt(k)
	if c.bound.tail == nil {
		return itself
	}
	return cost.AddSat(itself, c.bound.tail.costAt(k))
}
