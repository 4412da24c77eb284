package celeval

import (
	"context"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/admitfn/admitfn/core/celeval/internal/cost"
)

// Linear cost tracking (internal/cost's linear.go): cel-go's runtime cost
// tracker takes time that grows with the square of a list's length
// ("Evaluation time and object size" in docs/performance.md); internal/cost
// charges the same costs in the same order in time that grows with the
// list. A tracked evaluation on a review whose longest list reaches a
// program's threshold is tracked that way.

// DefaultLinearTrackingFrom is the longest list in a review's inputs from
// which its tracked evaluations are tracked linearly (linearTrackingFrom).
const DefaultLinearTrackingFrom = 1024

// linearProgram is p planned with linear cost tracking, planned on first
// use; nil when it cannot be.
func (p *boundedProgram) linearProgram() cel.Program {
	p.linearOnce.Do(func() { p.linear = p.planWith(PathLinear, cost.LinearOption) })
	return p.linear
}

// evalTracked evaluates prog on act with its cost tracked: linearly when
// the review's longest list reaches the program's threshold and it has a
// linear plan, else by cel-go. ok is false when cel-go gave no details;
// charged is nil when they hold none.
func evalTracked(ctx context.Context, longest int64, act any, prog cel.Program) (val ref.Val, charged *uint64, ok bool, err error) {
	if bp, isBounded := prog.(*boundedProgram); isBounded && bp.linearFrom >= 0 && longest >= int64(bp.linearFrom) {
		if a, isAct := act.(interpreter.Activation); isAct {
			if lp := bp.linearProgram(); lp != nil {
				val, c, err := cost.EvalLinear(ctx, lp, a)
				return val, &c, true, err
			}
		}
	}
	val, details, err := prog.ContextEval(ctx, act)
	if details == nil {
		return val, nil, false, err
	}
	return val, details.ActualCost(), true, err
}
