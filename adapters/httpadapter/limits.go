package httpadapter

import (
	"runtime"
	"strconv"
	"sync"
	"time"
)

// Limits bound the reviews a handler works on at once. What does not fit is
// answered at once with 429 and Retry-After (kube-apiserver then applies the
// webhook's failurePolicy): better than taking it on and running the
// process out of memory, or answering every review after its caller gave up.
type Limits struct {
	// Reviews in flight at most; 0 for no bound.
	Reviews int
	// Bytes of request bodies in flight at most; 0 for no bound. A body of
	// unknown length counts as MaxBodyBytes.
	Bytes int64
}

// bodyAmplification is how many bytes of heap a review body costs while it
// is decoded and evaluated, at most (JSON decoding into maps, the CEL object
// values, the answer), as docs/performance.md measures it.
const bodyAmplification = 16

// defaultMemory stands for the memory of a process without a limit.
const defaultMemory = 1 << 30

// retryAfter is what a shed review is told to wait.
const retryAfter = time.Second

// LimitsFor derives limits from the memory the process may use (0: unknown):
// bodies in flight take at most a sixteenth of it, at least one review of
// the largest size, and reviews in flight are 16 per CPU, beyond which they
// only queue for the CPU.
func LimitsFor(memoryBytes int64) Limits {
	if memoryBytes <= 0 {
		memoryBytes = defaultMemory
	}
	return Limits{
		Reviews: 16 * runtime.GOMAXPROCS(0),
		Bytes:   max(memoryBytes/bodyAmplification, MaxBodyBytes),
	}
}

// WithLimits bounds the reviews in flight.
func WithLimits(l Limits) Option {
	return func(h *Handler) { h.limits = l }
}

// inFlight counts what the handler works on.
type inFlight struct {
	mu      sync.Mutex
	reviews int
	bytes   int64
}

// admit takes a place for a review of size bytes, or reports that there is
// none.
func (h *Handler) admit(size int64) bool {
	f := &h.inFlight
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.limits.Reviews > 0 && f.reviews >= h.limits.Reviews || h.limits.Bytes > 0 && f.bytes+size > h.limits.Bytes {
		return false
	}
	f.reviews++
	f.bytes += size
	return true
}

func (h *Handler) release(size int64) {
	f := &h.inFlight
	f.mu.Lock()
	f.reviews--
	f.bytes -= size
	f.mu.Unlock()
}

var retryAfterSeconds = strconv.Itoa(int(retryAfter / time.Second))
