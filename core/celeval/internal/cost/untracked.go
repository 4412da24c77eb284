package cost

import (
	"errors"
	"sync"

	"github.com/google/cel-go/cel"

	"github.com/admitfn/admitfn/core/celeval/internal/celgo"
)

// UntrackedOption plans a program without cel-go's cost observer in an
// environment that asks for one. Kubernetes' base environment gives every
// program cel.EvalOptions(cel.OptTrackCost) and cel.CostLimit, and cel-go
// has no option that takes either back; its newProgram applies the
// environment's options, then the program's, to its unexported prog, and
// decides from prog.evalOpts and prog.costLimit whether to observe costs.
// This option, given last, clears those two and nothing else, so the
// program is planned exactly as the tracked one is (optimisations,
// interrupt checks, function bindings) minus the observer. When cel-go
// changes them the option cannot be built, and every evaluation stays
// tracked: a fallback (core/celeval's fallback.go).
var UntrackedOption = sync.OnceValues(func() (cel.ProgramOption, error) {
	return celgo.ProgramOption(func(p celgo.Program) error {
		*p.EvalOptions() &^= cel.OptTrackCost
		*p.CostLimit() = nil
		return nil
	})
})

// ErrNotPlanned marks a program a fast path does not apply to by design
// (exhaustive evaluation, no cost tracking asked): not a fallback.
var ErrNotPlanned = errors.New("not planned by design")
