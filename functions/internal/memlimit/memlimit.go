// Package memlimit sets the Go runtime's soft memory limit to nine tenths of
// the memory the platform gives the process: near it the garbage collector
// works harder, instead of the platform ending the process (a burst of large
// reviews, a bundle reload holding two engines for a moment). GOMEMLIMIT,
// when set, rules. Under a limit it also paces the collector (GCPercent,
// Collector): memory the platform has given is paid for whether the heap
// uses it or not, the collector's time is not; and it says how many Ps a
// Lambda function's share of a CPU is worth (LambdaProcs).
package memlimit

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/rs/zerolog"
)

// Limit is the soft memory limit in force and where it came from.
type Limit struct {
	// Bytes is the limit; 0 when none was set.
	Bytes int64
	// From names its source: "GOMEMLIMIT" or a Source's name.
	From string
	// gogc: GOGC is set in the environment, and the collector's pace is
	// the user's.
	gogc bool
}

// Set reports whether a limit is in force.
func (l Limit) Set() bool { return l.From != "" }

// Log adds the limit to a start-up log line: memory_limit_mib and
// memory_limit_from, when one is in force.
func (l Limit) Log(e *zerolog.Event) *zerolog.Event {
	if !l.Set() {
		return e
	}
	return e.Int64("memory_limit_mib", l.Bytes>>20).Str("memory_limit_from", l.From)
}

// A Source reads the memory the platform gives the process, in bytes; ok
// is false when it sets none.
type Source struct {
	Name string
	Read func() (bytes uint64, ok bool, err error)
}

// Lambda is the function's configured memory
// (AWS_LAMBDA_FUNCTION_MEMORY_SIZE, in MiB).
func Lambda(getenv func(string) string) Source {
	return Source{Name: "lambda", Read: func() (uint64, bool, error) {
		v := getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
		if v == "" {
			return 0, false, nil
		}
		mb, err := strconv.ParseUint(v, 10, 64)
		if err != nil || mb == 0 || mb > 1<<20 {
			return 0, false, fmt.Errorf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE %q is not a size in MiB", v)
		}
		return mb << 20, true, nil
	}}
}

// Cgroup is the memory limit of the process's cgroup (v2, v1 or hybrid),
// as a container runtime sets it: Kubernetes, ECS, docker run -m. A sandbox
// may show none (Cloud Run's, gVisor): there GOMEMLIMIT sets it.
func Cgroup() Source {
	return Source{Name: "cgroup", Read: func() (uint64, bool, error) {
		b, err := memlimit.FromCgroup()
		switch {
		case errors.Is(err, memlimit.ErrNoLimit), errors.Is(err, memlimit.ErrNoCgroup), errors.Is(err, memlimit.ErrCgroupsNotSupported):
			// Unlimited, or not on Linux, or no cgroup this process
			// can see: the platform sets no limit.
			return 0, false, nil
		case err != nil:
			return 0, false, fmt.Errorf("read the cgroup memory limit: %w", err)
		}
		return b, true, nil
	}}
}

// maxLimit keeps a cgroup v1 "unlimited" (a page-rounded MaxInt64) or any
// other absurd reading from becoming a limit.
const maxLimit = 1 << 50

// Apply sets the runtime's soft memory limit to nine tenths of what the
// first source that knows reads, unless GOMEMLIMIT is set. A source that
// fails is skipped, and its error returned with whatever limit was set: the
// caller logs it and carries on, as without a limit.
func Apply(getenv func(string) string, sources ...Source) (Limit, error) {
	l, err := apply(getenv, sources)
	l.gogc = getenv("GOGC") != ""
	return l, err
}

func apply(getenv func(string) string, sources []Source) (Limit, error) {
	if getenv("GOMEMLIMIT") != "" {
		return Limit{Bytes: debug.SetMemoryLimit(-1), From: "GOMEMLIMIT"}, nil
	}
	var errs []error
	for _, s := range sources {
		b, ok, err := s.Read()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok || b >= maxLimit {
			continue
		}
		limit := int64(b / 10 * 9)
		debug.SetMemoryLimit(limit)
		return Limit{Bytes: limit, From: s.Name}, errors.Join(errs...)
	}
	return Limit{}, errors.Join(errs...)
}

// The collector's pace under a limit: GOGC between Go's default and
// maxGCPercent, so that the heap's goal is at most half the limit. The
// other half is for what a reload compiles beside the engine in service, a
// burst of large reviews, and what is not heap (stacks, the runtime's own,
// and the binary's pages, which count against a Lambda's memory). Above
// maxGCPercent a warm invocation gains little, and a heap left to grow to
// the limit spends more than it saves faulting in fresh pages
// (docs/performance.md).
const (
	minGCPercent = 100
	maxGCPercent = 400
)

// GCPercent is the GOGC that lets the heap grow from live bytes to half the
// limit, within [minGCPercent, maxGCPercent]. ok is false when no limit is
// in force or GOGC is set in the environment: then the collector keeps the
// pace it has.
func (l Limit) GCPercent(live uint64) (percent int, ok bool) {
	// GOMEMLIMIT=off reads as math.MaxInt64: no limit to pace to.
	if !l.Set() || l.gogc || l.Bytes <= 0 || l.Bytes >= maxLimit {
		return 0, false
	}
	if live == 0 {
		return maxGCPercent, true
	}
	p := uint64(l.Bytes) / 2 * 100 / live
	return int(min(max(p, 100+minGCPercent), 100+maxGCPercent)) - 100, true
}
