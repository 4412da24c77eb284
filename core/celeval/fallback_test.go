package celeval

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/google/cel-go/cel"

	"github.com/admitfn/admitfn/core/celeval/internal/cost"
)

// TestMain checks, once every test of the package has planned programs
// through every fast path, that none fell back: an upgrade of cel-go that
// breaks one fails here, with the path and the reason.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if f := Fallbacks(); len(f) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: fast paths fell back to cel-go's own evaluation: %+v\n", f)
			code = 1
		}
	}
	os.Exit(code)
}

// withFallbacks runs f with an empty record of fallbacks and gives back
// the package's afterwards.
func withFallbacks(t *testing.T, f func()) {
	fallbacks.mu.Lock()
	saved, savedNotify := fallbacks.byPath, fallbacks.notify
	fallbacks.byPath, fallbacks.notify = nil, nil
	fallbacks.mu.Unlock()
	defer func() {
		fallbacks.mu.Lock()
		fallbacks.byPath, fallbacks.notify = saved, savedNotify
		fallbacks.mu.Unlock()
	}()
	f()
}

// A fast path that cannot be planned is never silent: the program falls
// back to cel-go's evaluation, the first failure of each path is told
// (once), and Fallbacks lists it with a count; a program a path does not
// apply to by design is no fallback.
func TestFallbacksAreReported(t *testing.T) {
	withFallbacks(t, func() {
		var told []Fallback
		OnFallback(func(f Fallback) { told = append(told, f) })
		p := compileBounded(t, "object.spec.replicas > 1")
		broken := func() (cel.ProgramOption, error) {
			return nil, errors.New("cel-go's program has no evalOpts field of type cel.EvalOption")
		}
		if p.planWith(PathLinear, broken) != nil || p.planWith(PathLinear, broken) != nil {
			t.Fatal("a path that cannot be planned gave a program")
		}
		boom := func() (cel.ProgramOption, error) { panic("boom") }
		if p.planWith(PathUntracked, boom) != nil {
			t.Fatal("a planning that panicked gave a program")
		}
		byDesign := func() (cel.ProgramOption, error) {
			return nil, fmt.Errorf("exhaustive evaluation is not tracked linearly: %w", cost.ErrNotPlanned)
		}
		if p.planWith(PathPlanned, byDesign) != nil {
			t.Fatal("a program the path does not apply to gave a program")
		}
		want := []Fallback{
			{Path: PathLinear, Reason: "cel-go's program has no evalOpts field of type cel.EvalOption", Programs: 2},
			{Path: PathUntracked, Reason: "panic while planning: boom", Programs: 1},
		}
		if got := Fallbacks(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Fallbacks() = %+v, want %+v", got, want)
		}
		if len(told) != 2 || told[0].Path != PathLinear || told[0].Programs != 1 || told[1].Path != PathUntracked {
			t.Errorf("told %+v, want each path's first fallback once", told)
		}
		// A function set later hears what was recorded before it.
		var late []string
		OnFallback(func(f Fallback) { late = append(late, f.Path) })
		if fmt.Sprint(late) != "[linear untracked]" {
			t.Errorf("told late %v", late)
		}
	})
}

// On the cel-go admitfn is built with, every fast path can be planned.
func TestFastPathsInUse(t *testing.T) {
	if f := CheckFastPaths(); len(f) > 0 {
		t.Fatalf("fast paths that cannot be planned on this cel-go: %+v", f)
	}
}
