package initpace

import (
	"os"
	"runtime/debug"
	"testing"
)

// The pace set at start is taken once, by a load that finds it unchanged.
func TestTake(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the process's own pace")
	}
	if p := debug.SetGCPercent(GCPercent); p != GCPercent {
		t.Fatalf("GOGC %d at the start of the test, want %d", p, GCPercent)
	}
	if _, ok := Take(70); ok {
		t.Fatal("Take(70): GOGC changed since the start, nothing to take")
	}
	if p, ok := Take(GCPercent); !ok || p != 100 {
		t.Fatalf("Take(%d) = %d, %v: want 100, true", GCPercent, p, ok)
	}
	if _, ok := Take(GCPercent); ok {
		t.Fatal("taken twice")
	}
	debug.SetGCPercent(100)
}
