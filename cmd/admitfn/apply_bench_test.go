package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/perf"
)

// dumpObjects is the size of the dump A1 reviews: a large cluster's
// kubectl get -A -o yaml.
const dumpObjects = 50_000

// writeDump writes perf.ClusterDump(n) to a file.
func writeDump(tb testing.TB, n int) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "dump.yaml")
	if err := os.WriteFile(path, perf.ClusterDump(n), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkA1Apply: admitfn apply on a 50,000-object dump (read, decoded,
// reviewed on every CPU, reported), per resource, against the same reviews
// made one after another on one goroutine from decoded objects: the
// engine's own rate. make bench reports A1 = engine time ÷ apply time per
// resource, the throughput ratio.
func BenchmarkA1Apply(b *testing.B) {
	dump := writeDump(b, dumpObjects)
	b.Run("apply", func(b *testing.B) {
		for b.Loop() {
			c := &cli{in: bytes.NewReader(nil), out: io.Discard, err: io.Discard, getenv: func(string) string { return "" }, now: time.Now}
			if code := c.run([]string{"apply", "-p", "../../policies/examples", "-f", dump, "--audit"}); code != 0 {
				b.Fatalf("apply: exit %d", code)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dumpObjects), "ns/resource")
	})
	b.Run("engine", func(b *testing.B) {
		c := &cli{getenv: func(string) string { return "" }}
		eng, set, _, err := c.loadBundle("../../policies/examples")
		if err != nil {
			b.Fatal(err)
		}
		declared := map[string]map[string]string{}
		items, err := c.readAllManifests([]string{dump}, declared)
		if err != nil {
			b.Fatal(err)
		}
		o := applyOptions{namespace: "default", user: "admitfn-apply", groups: []string{"system:authenticated"}}
		b.ResetTimer()
		for b.Loop() {
			for _, m := range items {
				reviewManifest(context.Background(), eng, set, m, nil, declared, o)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/resource")
	})
}
