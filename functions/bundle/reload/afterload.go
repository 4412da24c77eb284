package reload

import (
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/mutate"
	"github.com/admitfn/admitfn/functions/internal/memlimit"
)

// compileIdle is how long the background compile of a bundle that compiles
// on use waits for a first review before it starts anyway: long enough for
// kube-apiserver's first call to a fresh instance to arrive, short enough
// that later reviews rarely find a policy still to compile.
const compileIdle = time.Second

// AfterLoad is what a process does once a bundle is swapped in (Config's
// OnLoad): give back the memory compiling allocated and pace the collector
// to what serving keeps; for a bundle that compiles on use, compile it in
// the background once the first review is answered (or a second passed
// without one); parse client-go's schema in the background when a
// mutating policy needs it; then call Settled, once. Until the first
// bundle is compiled the collector runs rarely (Pace, from
// memlimit.Limit.CollectRarely); Started restores it if nothing is left to
// compile.
type AfterLoad struct {
	Pace *memlimit.Collector
	Log  zerolog.Logger
	// Settled, when set, is called once the first bundle is compiled and
	// what it left to do in the background is done (or no bundle loaded).
	Settled func()

	compiling atomic.Bool
	settle    sync.Once
}

// Started ends the start: the collector's usual pace comes back unless a
// background compile will restore it when it ends.
func (a *AfterLoad) Started() {
	if !a.compiling.Load() {
		a.Pace.Loaded()
	}
}

// Settle calls Settled, once.
func (a *AfterLoad) Settle() {
	a.settle.Do(func() {
		if a.Settled != nil {
			a.Settled()
		}
	})
}

// OnLoad is Config.OnLoad.
func (a *AfterLoad) OnLoad(e *engine.Engine) {
	// Compiling allocates several times what the engine keeps; give that
	// back now rather than when the scavenger gets to it, so the
	// function's resident memory is what serving needs (it is what a
	// memory-sized Lambda or Cloud Function is judged by). An engine that
	// compiles on use has not compiled yet: that waits for the background
	// compile, off the first review's path.
	onUse := e.Uncompiled() > 0
	if !onUse {
		debug.FreeOSMemory()
		a.Pace.Fit(a.Log)
	}
	schema := !mutate.SchemaParsed() && slices.ContainsFunc(e.Policies().MutatingPolicies, mutate.NeedsSchema)
	if !onUse && !schema {
		a.Settle()
		return
	}
	// What the engine left to do goes on in the background: the policies
	// a pushed bundle compiles on use, once the first review is answered
	// (or a second passed without one), so that review has the CPUs, and
	// the parse of client-go's schema. Its garbage goes back when it is
	// done, and what it keeps is live.
	a.compiling.Store(onUse)
	go func() {
		if onUse {
			select {
			case <-e.Reviewed():
			case <-time.After(compileIdle):
			}
			if err := e.CompileAll(); err != nil {
				a.Log.Error().Err(err).Str("bundle", e.BundleID()).Msg("policies that do not compile fail by their failurePolicy")
			}
			a.Pace.Loaded()
		}
		if schema {
			mutate.Warm()
		}
		debug.FreeOSMemory()
		a.Pace.Fit(a.Log)
		a.Settle()
	}()
}
