package perf_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/admitfn/admitfn/internal/perf"
	"github.com/admitfn/admitfn/internal/soak"
)

// The P4–P6 measures of docs/performance.md run the server binary as a
// process, built as `make build` builds it, beside the minimal server
// (./minimal) as the baseline.

var (
	buildOnce                     sync.Once
	serverBin, minimalBin, binDir string
	buildErr                      error
)

func binaries(tb testing.TB) (server, minimal string) {
	tb.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "admitfn-perf-"); buildErr != nil {
			return
		}
		serverBin, minimalBin = filepath.Join(binDir, "server"), filepath.Join(binDir, "minimal")
		for bin, pkg := range map[string]string{serverBin: "../../functions/server", minimalBin: "./minimal"} {
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return serverBin, minimalBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// bundle100 writes the 100-policy bundle of P4 and P6: the 20 policies of
// Bundle20 and 80 generated ones that never match the Pod.
func bundle100(tb testing.TB) string {
	tb.Helper()
	b20, err := perf.Bundle20(perf.RepoRoot())
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	if err := perf.WriteDir(perf.Merge(b20, perf.Generated(80, 0)), dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}

func freePort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// coldStart execs bin serving policies and times it until its first answer
// to the Pod review, then stops it.
func coldStart(tb testing.TB, bin, policies string, body []byte) time.Duration {
	tb.Helper()
	addr := freePort(tb)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	cmd := exec.Command(bin, "-addr", addr, "-policies", policies, "-refresh-interval", "0")
	began := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	for {
		resp, err := client.Post("http://"+addr+"/validate", "application/json", bytes.NewReader(body))
		if err != nil {
			if time.Since(began) > 30*time.Second {
				tb.Fatalf("%s: no answer after 30s: %v", filepath.Base(bin), err)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(began)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"allowed":true`)) {
			tb.Fatalf("%s: HTTP %d: %s", filepath.Base(bin), resp.StatusCode, out)
		}
		return took
	}
}

// BenchmarkP4ColdStart: process exec → first answered review, the server
// loading the 100-policy bundle from a directory ÷ the minimal server, run
// alternately; read x-minimal.
func BenchmarkP4ColdStart(b *testing.B) {
	server, minimal := binaries(b)
	dir := bundle100(b)
	body := perf.PodReview()
	var admitfn, baseline time.Duration
	for b.Loop() {
		baseline += coldStart(b, minimal, dir, body)
		admitfn += coldStart(b, server, dir, body)
	}
	n := float64(b.N)
	b.ReportMetric(float64(admitfn.Microseconds())/1000/n, "admitfn-ms")
	b.ReportMetric(float64(baseline.Microseconds())/1000/n, "minimal-ms")
	b.ReportMetric(float64(admitfn)/float64(baseline), "x-minimal")
}

// BenchmarkP5Throughput: reviews per second of the server on loopback, 8
// keep-alive clients sending the golden reviews of the example bundle (the
// soak's load), ÷ the minimal server answering the same requests; read
// x-minimal.
func BenchmarkP5Throughput(b *testing.B) {
	server, minimal := binaries(b)
	root := perf.RepoRoot()
	examples := filepath.Join(root, "policies", "examples")
	cases, err := soak.ExampleCases(filepath.Join(root, "adapters", "http", "testdata"), examples)
	if err != nil {
		b.Fatal(err)
	}
	run := func(bin string) float64 {
		rep, err := soak.Run(context.Background(), soak.Config{Server: bin, Policies: examples, Cases: cases, Clients: 8, Duration: 3 * time.Second, Window: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Errors != 0 {
			b.Fatalf("%s: %d errors: %v", filepath.Base(bin), rep.Errors, rep.FirstErrors)
		}
		return float64(rep.Requests) / rep.Elapsed.Seconds()
	}
	var admitfn, baseline float64
	for b.Loop() {
		baseline += run(minimal)
		admitfn += run(server)
	}
	n := float64(b.N)
	b.ReportMetric(admitfn/n, "admitfn-req/s")
	b.ReportMetric(baseline/n, "minimal-req/s")
	b.ReportMetric(admitfn/baseline, "x-minimal")
}

// BenchmarkP6Memory: the server's resident memory with the 100-policy
// bundle loaded, after 10,000 reviews of the Pod from 4 keep-alive clients;
// read rss-MiB.
func BenchmarkP6Memory(b *testing.B) {
	server, _ := binaries(b)
	dir := bundle100(b)
	cases := []soak.Case{{Name: "pod", Route: "/validate", Body: perf.PodReview()}}
	var rss int64
	for b.Loop() {
		rep, err := soak.Run(context.Background(), soak.Config{Server: server, Policies: dir, Cases: cases, Clients: 4, Requests: 10000, Duration: 10 * time.Minute, Window: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Errors != 0 || rep.Requests != 10000 {
			b.Fatalf("%d reviews, %d errors: %v", rep.Requests, rep.Errors, rep.FirstErrors)
		}
		rss += rep.EndRSS
	}
	b.ReportMetric(float64(rss)/float64(b.N)/(1<<20), "rss-MiB")
}
