package celeval

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/admitfn/admitfn/core/celeval/internal/celgo"
	"github.com/admitfn/admitfn/core/celeval/internal/cost"
)

// The fast paths: program plans admitfn makes beside cel-go's own by
// reaching into cel-go's unexported program and step types. When a cel-go
// upgrade changes what one reads, it cannot be planned and evaluation
// stays cel-go's own (the same decisions, slower): that is a fallback,
// which the process reports (Fallbacks, OnFallback) instead of running
// slower without a word.
const (
	// PathUntracked evaluates without cel-go's cost observer where a bound
	// proves the limits cannot be reached (internal/cost).
	PathUntracked = "untracked"
	// PathLinear tracks cost linearly on long lists (internal/cost).
	PathLinear = "linear"
	// PathPlanned drops the planner's dispatcher from compiled programs
	// (planned.go).
	PathPlanned = "planned"
)

// Fallback is a fast path that could not be planned, and why.
type Fallback struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	// Programs is how many programs were planned without it (none when
	// CheckFastPaths found it at start and nothing has been planned yet).
	Programs uint64 `json:"programs"`
}

var fallbacks struct {
	mu     sync.Mutex
	byPath map[string]*Fallback
	notify func(Fallback)
}

// fellBack records that path could not be planned for a program because
// of err; the first time for a path, OnFallback's function hears it.
func fellBack(path string, err error) { record(path, err, 1) }

func record(path string, err error, programs uint64) {
	if errors.Is(err, cost.ErrNotPlanned) {
		return
	}
	fallbacks.mu.Lock()
	if fallbacks.byPath == nil {
		fallbacks.byPath = map[string]*Fallback{}
	}
	f, seen := fallbacks.byPath[path]
	if !seen {
		f = &Fallback{Path: path, Reason: err.Error()}
		fallbacks.byPath[path] = f
	}
	f.Programs += programs
	first, notify := *f, fallbacks.notify
	fallbacks.mu.Unlock()
	if !seen && notify != nil {
		notify(first)
	}
}

// recovered is the error of a panic recovered while planning.
func recovered(r any) error { return fmt.Errorf("panic while planning: %v", r) }

// Fallbacks are the fast paths that could not be planned, by path; none
// when every one is in use.
func Fallbacks() []Fallback {
	fallbacks.mu.Lock()
	defer fallbacks.mu.Unlock()
	out := make([]Fallback, 0, len(fallbacks.byPath))
	for _, f := range fallbacks.byPath {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b Fallback) int {
		if a.Path < b.Path {
			return -1
		}
		if a.Path > b.Path {
			return 1
		}
		return 0
	})
	return out
}

// OnFallback sets the function that hears each path's first fallback (the
// process's log), and tells it of those already recorded.
func OnFallback(notify func(Fallback)) {
	fallbacks.mu.Lock()
	fallbacks.notify = notify
	fallbacks.mu.Unlock()
	for _, f := range Fallbacks() {
		notify(f)
	}
}

// CheckFastPaths builds each fast path's program option, which reads
// cel-go's program type, and records those that cannot be built: a
// process calls it at start, so an upgrade that breaks one is reported
// before the first review. The steps a path classifies are checked as
// programs are planned.
func CheckFastPaths() []Fallback {
	if _, err := cost.UntrackedOption(); err != nil {
		record(PathUntracked, err, 0)
	}
	if _, err := cost.LinearOption(); err != nil {
		record(PathLinear, err, 0)
	}
	if err := celgo.CheckProgram(); err != nil {
		record(PathPlanned, err, 0)
	}
	return Fallbacks()
}
