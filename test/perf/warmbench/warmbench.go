// Package warmbench compares, in a Go benchmark, the CPU two running
// processes spend per request when requests reach them one at a time, as
// they reach a warm serverless instance: what such an instance is billed
// for. Requests go to the processes alternately, so that whatever else the
// machine does weighs on both alike.
package warmbench

import (
	"fmt"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/soak"
)

// Process is one process under measurement.
type Process struct {
	Name string
	Pid  int
	// Send sends request i and waits for its answer, failing the benchmark
	// on a wrong one.
	Send func(i int)
}

// Alternate sends requests 0 to n-1 to each process in turn.
func Alternate(n int, ps ...Process) {
	for i := range n {
		for _, p := range ps {
			p.Send(i)
		}
	}
}

// Compare sends perLoop requests to p and base alternately per b.Loop
// iteration, and reports for each its CPU (user and system, every thread)
// and wall time per request, <name>-cpu-µs/op and <name>-wall-µs/op, its
// resident memory at the end, <name>-rss-MiB, and x-<base>, p's CPU as a
// share of base's.
func Compare(b *testing.B, perLoop int, p, base Process) {
	b.Helper()
	ps := []Process{p, base}
	cpu, wall := make([]time.Duration, 2), make([]time.Duration, 2)
	timed := make([]Process, 2)
	for k := range ps {
		timed[k] = ps[k]
		timed[k].Send = func(i int) {
			began := time.Now()
			ps[k].Send(i)
			wall[k] += time.Since(began)
		}
	}
	n := 0
	b.ResetTimer()
	for b.Loop() {
		var before [2]time.Duration
		for k := range ps {
			before[k] = cpuTime(b, ps[k])
		}
		Alternate(perLoop, timed...)
		for k := range ps {
			cpu[k] += cpuTime(b, ps[k]) - before[k]
		}
		n += perLoop
	}
	b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "x-"+base.Name)
	for k, p := range ps {
		rss, err := soak.RSS(p.Pid)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(cpu[k].Microseconds())/float64(n), p.Name+"-cpu-µs/op")
		b.ReportMetric(float64(wall[k].Microseconds())/float64(n), p.Name+"-wall-µs/op")
		b.ReportMetric(float64(rss)/(1<<20), p.Name+"-rss-MiB")
	}
}

func cpuTime(b *testing.B, p Process) time.Duration {
	b.Helper()
	d, err := soak.CPUTime(p.Pid)
	if err != nil {
		b.Fatal(fmt.Errorf("%s: %w", p.Name, err))
	}
	return d
}
