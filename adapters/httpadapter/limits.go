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
//
// A review takes its place only once its body has arrived, and the byte
// budget only for bytes received: a caller that opens requests and sends
// their bodies slowly, or not at all, holds no place a complete review
// needs, and a body that stops arriving ends its request (BodyIdle,
// MinBodyRate).
type Limits struct {
	// Reviews evaluated at once at most; 0 for no bound.
	Reviews int
	// Bytes of request bodies received and not yet answered at most; 0 for
	// no bound.
	Bytes int64
	// BodyIdle ends a request whose body brings no byte for this long
	// (DefaultBodyIdle when zero), with 408.
	BodyIdle time.Duration
	// MinBodyRate, in bytes a second, ends with 408 a request whose body,
	// once it has been arriving for BodyIdle, has averaged less
	// (DefaultMinBodyRate when zero).
	MinBodyRate int64
}

// DefaultBodyIdle and DefaultMinBodyRate are what a body must keep up.
// kube-apiserver sends a review's body at once, in a few segments; a body
// of the largest size at the minimum rate would still be arriving at the
// largest deadline, so no review kube-apiserver can send is cut short.
const (
	DefaultBodyIdle    = 5 * time.Second
	DefaultMinBodyRate = 64 << 10
)

func (l Limits) bodyIdle() time.Duration {
	if l.BodyIdle > 0 {
		return l.BodyIdle
	}
	return DefaultBodyIdle
}

func (l Limits) minBodyRate() int64 {
	if l.MinBodyRate > 0 {
		return l.MinBodyRate
	}
	return DefaultMinBodyRate
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

// takeBytes takes n bytes of the body budget for bytes just received, or
// reports that there is no room.
func (h *Handler) takeBytes(n int64) bool {
	f := &h.inFlight
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.limits.Bytes > 0 && f.bytes+n > h.limits.Bytes {
		return false
	}
	f.bytes += n
	return true
}

func (h *Handler) releaseBytes(n int64) {
	f := &h.inFlight
	f.mu.Lock()
	f.bytes -= n
	f.mu.Unlock()
}

// admit takes a place for a review whose body has arrived, or reports that
// there is none.
func (h *Handler) admit() bool {
	f := &h.inFlight
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.limits.Reviews > 0 && f.reviews >= h.limits.Reviews {
		return false
	}
	f.reviews++
	return true
}

func (h *Handler) release() {
	f := &h.inFlight
	f.mu.Lock()
	f.reviews--
	f.mu.Unlock()
}

var retryAfterSeconds = strconv.Itoa(int(retryAfter / time.Second))
