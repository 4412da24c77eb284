package main

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/admitfn/admitfn/internal/lambdabuild"
	"github.com/admitfn/admitfn/internal/lambdatest"
)

// BenchmarkColdStart measures process exec → first answered invocation for
// the bootstrap serving the example bundle, and for a hello-world Lambda
// function built the same way, alternately in one run; the figure to read
// is their ratio (x-hello), not the absolute times.
func BenchmarkColdStart(b *testing.B) {
	hello := filepath.Join(b.TempDir(), "bootstrap")
	if err := lambdabuild.Build(context.Background(), lambdabuild.Package+"/testdata/hello", runtime.GOARCH, hello); err != nil {
		b.Fatal(err)
	}
	ev := event(b, "function-url-warn")
	env := examples(b)
	var admitfn, baseline time.Duration
	b.ResetTimer()
	for range b.N {
		baseline += coldStart(b, hello, ev)
		admitfn += coldStart(b, bootstrap, ev, env)
	}
	n := float64(b.N)
	b.ReportMetric(float64(admitfn.Microseconds())/1000/n, "admitfn-ms")
	b.ReportMetric(float64(baseline.Microseconds())/1000/n, "hello-ms")
	b.ReportMetric(float64(admitfn)/float64(baseline), "x-hello")
}

// coldStart starts bin against a fresh Runtime API, times its first
// answered invocation of payload, and stops it.
func coldStart(b *testing.B, bin string, payload []byte, env ...string) time.Duration {
	b.Helper()
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		b.Fatal(err)
	}
	defer api.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	fn := start(b, bin, api, env...)
	res, err := api.Invoke(ctx, payload, 10*time.Second)
	took := time.Since(began)
	fn.stop()
	if err != nil || res.Err != nil {
		b.Fatalf("invocation: %v %v\n%s", err, res.Err, fn.stderr)
	}
	return took
}
