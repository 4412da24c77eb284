package memlimit

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/rs/zerolog"
)

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// The first load collects rarely; whatever GOGC was is back afterwards.
func TestCollectRarelyWhileLoading(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	for _, c := range []struct{ before, during int }{{100, 400}, {50, 400}, {400, 400}, {800, 800}, {-1, -1}} {
		debug.SetGCPercent(c.before)
		gc := Limit{}.CollectRarely()
		if got := gcPercent(); got != c.during {
			t.Errorf("GOGC %d: %d while loading, want %d", c.before, got, c.during)
		}
		gc.Loaded()
		if got := gcPercent(); got != c.before {
			t.Errorf("GOGC %d: %d after loading", c.before, got)
		}
	}
}

// A fit during the first load waits for its end; one after it (a reload)
// applies at once.
func TestFitAfterTheFirstLoad(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	runtime.GC() // a live heap to pace to, far above half the limit: the least headroom
	debug.SetGCPercent(70)
	gc := Limit{Bytes: 1 << 10, From: "cgroup"}.CollectRarely()
	gc.Fit(zerolog.Nop())
	if got := gcPercent(); got != LoadGCPercent {
		t.Errorf("GOGC %d after a fit during the first load, want %d", got, LoadGCPercent)
	}
	gc.Loaded()
	if got := gcPercent(); got != 100 {
		t.Errorf("GOGC %d after the first load, want the fitted 100", got)
	}
	debug.SetGCPercent(70)
	gc.Fit(zerolog.Nop())
	if got := gcPercent(); got != 100 {
		t.Errorf("GOGC %d after a fit on reload, want 100", got)
	}
}
