package celeval

import (
	"context"
	"github.com/admitfn/admitfn/core/celeval/internal/objectval"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	"github.com/admitfn/admitfn/core/celeval/internal/celgo"
)

// dispatcherOf is the dispatcher a cel-go program holds, nil when it holds
// none.
func dispatcherOf(t *testing.T, p cel.Program) interpreter.Dispatcher {
	t.Helper()
	d, err := celgo.Dispatcher(p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// collected reports whether the dispatcher p holds is freed while p is
// kept, once release has run on p: what a compiled program costs in memory
// after planning.
func collected(t *testing.T, release func(cel.Program) cel.Program) bool {
	t.Helper()
	env := compileBounded(t, "true").env
	ast, iss := env.Compile(`object.spec.replicas == 3 && object.metadata.name.startsWith('web')`)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	p, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	freed := make(chan struct{})
	d := dispatcherOf(t, p)
	if d == nil {
		t.Fatal("a new program holds no dispatcher")
	}
	runtime.AddCleanup((*byte)(reflect.ValueOf(d).UnsafePointer()), func(ch chan struct{}) { close(ch) }, freed)
	d = nil
	p = release(p)
	defer runtime.KeepAlive(p)
	// A cleanup runs after the collection that finds its object
	// unreachable; a few cycles are plenty (a safety net, not a timing).
	for range 20 {
		runtime.GC()
		select {
		case <-freed:
			return true
		case <-time.After(10 * time.Millisecond):
		}
	}
	return false
}

// Planned programs hold no dispatcher: it is freed while the program is
// kept, and the program evaluates as before.
func TestPlannedProgramsDropDispatcher(t *testing.T) {
	if !collected(t, planned) {
		t.Error("the dispatcher of a planned program was not freed")
	}
	if collected(t, func(p cel.Program) cel.Program { return p }) {
		t.Error("the dispatcher of a program kept as cel-go made it was freed: the test proves nothing")
	}

	req := decode(t)
	act := &activation{object: objectval.Of(req.Object.Object), oldObject: objectval.Of(req.OldObject.Object)}
	p := compileBounded(t, `object.spec.replicas == 3 && object.metadata.name.startsWith('web') && [1, 2].exists(x, x > 1)`)
	for name, prog := range map[string]cel.Program{"tracked": p.Program, "untracked": p.untrackedProgram(), "linear": p.linearProgram()} {
		if prog == nil {
			t.Fatalf("%s: no program", name)
		}
		if d := dispatcherOf(t, prog); d != nil {
			t.Errorf("%s: the program still holds its dispatcher", name)
		}
		v, _, err := prog.ContextEval(context.Background(), act)
		if err != nil || v != types.True {
			t.Errorf("%s: %v, %v; want true", name, v, err)
		}
	}
}
