package memlimit

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/functions/internal/memlimit/initpace"
)

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// The first load collects rarely; whatever GOGC was is back afterwards.
func TestCollectRarelyWhileLoading(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	// These loads are not the process's first: the pace it started with
	// is not theirs to restore (TestPaceFromTheStart).
	initpace.Take(initpace.GCPercent)
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

// A process collects rarely from its start (initpace), through the first
// load, then at the GOGC it was started with; one started with a rarer
// pace, or none, keeps its own throughout. Each case is a fresh process:
// this test binary run again with GOGC set.
func TestPaceFromTheStart(t *testing.T) {
	if os.Getenv("ADMITFN_INITPACE_CHILD") == "1" {
		atStart := gcPercent()
		gc := Limit{}.CollectRarely()
		loading := gcPercent()
		gc.Loaded()
		fmt.Printf("pace %d %d %d\n", atStart, loading, gcPercent())
		return
	}
	for gogc, want := range map[string]string{"": "pace 400 400 100", "150": "pace 400 400 150", "800": "pace 800 800 800"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPaceFromTheStart$", "-test.count=1")
		cmd.Env = append(os.Environ(), "ADMITFN_INITPACE_CHILD=1", "GOGC="+gogc)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), want+"\n") {
			t.Errorf("GOGC=%q: %v\n%s\nwant %q (GOGC at start, while loading, after)", gogc, err, out, want)
		}
	}
}
