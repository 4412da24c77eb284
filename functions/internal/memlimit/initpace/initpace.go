// Package initpace sets the collector's load pace as early as a package
// can: package initialisation allocates mostly what it keeps, so
// collecting during it is work for nothing, as it is during a load.
// Importing only runtime/debug and sync, it runs once those are
// initialised, which the order the Go specification gives package
// initialisation (by import path, among the packages whose imports are
// done) puts part-way through a function's packages. memlimit's Collector
// takes the pace over at the first load.
package initpace

import (
	"runtime/debug"
	"sync"
)

// GCPercent is the load pace: the heap may grow to five times what is live.
const GCPercent = 400

var (
	mu     sync.Mutex
	steady int  // the GOGC the process started with
	raised bool // GOGC was raised to GCPercent here, and not taken yet
)

func init() {
	steady = debug.SetGCPercent(GCPercent)
	raised = true
	if steady < 0 || steady > GCPercent {
		// Off, or rarer already: the process's own.
		debug.SetGCPercent(steady)
		raised = false
	}
}

// Take returns, once, the GOGC the process started with, when current (the
// GOGC found at the first load) is still the pace set here; otherwise GOGC
// was set since, and current is the one to keep. (A program that sets
// GOGC to exactly GCPercent before its first load has it taken for this
// package's.)
func Take(current int) (int, bool) {
	mu.Lock()
	defer mu.Unlock()
	if !raised || current != GCPercent {
		return 0, false
	}
	raised = false
	return steady, true
}
