package memlimit

import (
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"sync"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/functions/internal/memlimit/initpace"
)

// LoadGCPercent is the collector's GOGC from part-way through package
// initialisation (initpace) until the first bundle is loaded: the heap may
// grow to five times what is live, which shortens the start
// (docs/performance.md), and a soft memory limit, once set, still bounds
// it.
const LoadGCPercent = initpace.GCPercent

// Collector keeps the collector's pace: LoadGCPercent during the first
// load, then the GOGC the process had, or under a memory limit the one
// fitted to it after each load.
type Collector struct {
	limit Limit

	mu      sync.Mutex
	steady  int  // GOGC outside the first load
	loading bool // the first load runs at LoadGCPercent
	fitted  bool // steady was fitted to the limit
}

// CollectRarely raises GOGC to LoadGCPercent, unless it is higher already
// or off, until Loaded: compiling a bundle allocates several times what it
// keeps, and little else runs meanwhile (a bundle compiled on use: the
// first reviews).
func (l Limit) CollectRarely() *Collector {
	steady := debug.SetGCPercent(LoadGCPercent)
	if started, ok := initpace.Take(steady); ok {
		steady = started
	}
	c := &Collector{limit: l, steady: steady, loading: true}
	if c.steady < 0 || c.steady > LoadGCPercent {
		debug.SetGCPercent(c.steady)
		c.loading = false
	}
	return c
}

// Loaded ends the first load: GOGC is the steady one from now on.
func (c *Collector) Loaded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loading {
		debug.SetGCPercent(c.steady)
		c.loading = false
	}
}

// Fit paces the collector to the memory limit from the heap live now, right
// after a full collection: a larger bundle collects more often than a small
// one under the same limit. A new pace is logged.
func (c *Collector) Fit(log zerolog.Logger) {
	live := heapLive()
	p, ok := c.limit.GCPercent(live)
	if !ok {
		return
	}
	c.mu.Lock()
	changed := !c.fitted || c.steady != p
	c.steady, c.fitted = p, true
	if !c.loading {
		debug.SetGCPercent(p)
	}
	c.mu.Unlock()
	if !changed {
		return
	}
	log.Info().Int("gc_percent", p).Uint64("heap_live_mib", live>>20).Int64("memory_limit_mib", c.limit.Bytes>>20).
		Msg("collector paced to the memory limit")
}

// heapLive is the heap the last collection marked live.
func heapLive() uint64 {
	s := []runtimemetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	runtimemetrics.Read(s)
	if s[0].Value.Kind() != runtimemetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
