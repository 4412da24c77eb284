package celeval

import (
	"github.com/google/cel-go/cel"

	"github.com/admitfn/admitfn/core/celeval/internal/celgo"
)

// planned drops what cel-go's program keeps only to plan it: a dispatcher
// holding every function overload of its environment (a map of several
// hundred entries, made for each program), and the interpreter that holds
// it. Once planned, evaluation runs the planned steps alone, which hold the
// overloads they call; the two fields are read nowhere after
// (cel/program.go). The maps were the largest part of what a bundle's
// compiled policies keep (docs/performance.md). When cel-go changes them
// nothing is dropped, and that is a fallback (fallback.go).
func planned(p cel.Program) cel.Program {
	if err := celgo.DropPlanner(p); err != nil {
		fellBack(PathPlanned, err)
	}
	return p
}
