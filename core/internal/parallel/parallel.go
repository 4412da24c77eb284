// Package parallel maps a function over a slice on every CPU, for the
// independent steps of loading a bundle (parsing documents, compiling
// policies) that make up most of a cold start.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Map returns f applied to each element of in, in order, with up to
// GOMAXPROCS calls at a time. f must be safe for concurrent use.
func Map[In, Out any](in []In, f func(In) Out) []Out {
	out := make([]Out, len(in))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(in)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(in); i = int(next.Add(1)) - 1 {
				out[i] = f(in[i])
			}
		})
	}
	wg.Wait()
	return out
}
