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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/admitfn/admitfn/hack/build/srcrev"
	"github.com/admitfn/admitfn/test/perf"
	"github.com/admitfn/admitfn/test/soak"
	"github.com/admitfn/admitfn/test/syncbuf"
)

// The P4–P6 measures of docs/performance.md run the server binary as a
// process, built as `make build` builds it, beside the minimal server
// (./minimal) as the baseline, the minimal server linked with the
// upstream packages admitfn's core reuses (./minimal built with the tag
// admitfn_upstream) as the floor those packages set, and the minimal
// server answering with admitfn's review handler (the tag admitfn_handler)
// as the floor of a server built on that handler.

// bins are the four binaries, built once per test binary.
type bins struct{ server, minimal, upstream, handler, cli string }

var (
	buildOnce sync.Once
	built     bins
	binDir    string
	buildErr  error
)

func binaries(tb testing.TB) bins {
	tb.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "admitfn-perf-"); buildErr != nil {
			return
		}
		built = bins{server: filepath.Join(binDir, "server"), minimal: filepath.Join(binDir, "minimal"), upstream: filepath.Join(binDir, "upstream"), handler: filepath.Join(binDir, "handler"), cli: filepath.Join(binDir, "admitfn")}
		// Stamped with the source's revision, as make builds: the CLI's
		// push is then trusted by the server built with it.
		ldflags := strings.TrimSpace("-s -w " + srcrev.Ldflags(srcrev.Revision(context.Background())))
		for _, b := range []struct{ bin, pkg, tags string }{
			{built.server, "../../functions/server", ""},
			{built.minimal, "./minimal", ""},
			{built.upstream, "./minimal", "admitfn_upstream"},
			{built.handler, "./minimal", "admitfn_handler"},
			{built.cli, "../../cmd/admitfn", ""},
		} {
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags="+ldflags, "-tags="+b.tags, "-o", b.bin, b.pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return built
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
func coldStart(tb testing.TB, bin, policies string, body []byte, args ...string) time.Duration {
	return coldStartLogged(tb, bin, policies, body, nil, args...)
}

// coldStartLogged is coldStart with the process's output written to log.
func coldStartLogged(tb testing.TB, bin, policies string, body []byte, log io.Writer, args ...string) time.Duration {
	tb.Helper()
	addr := freePort(tb)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	cmd := exec.Command(bin, append([]string{"--addr", addr, "--policies", policies, "--refresh-interval", "0"}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
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
// loading the 100-policy bundle from a directory it was published to with
// admitfn push, ÷ the minimal server, run alternately; read x-minimal.
// Published so, the bundle compiles each policy on first use; the same
// files copied into a directory compile whole before serving
// (whole-x-minimal). The upstream floor runs with them: the minimal server
// linked with the upstream packages admitfn's core reuses, answering at
// once (upstream-x-minimal), and the handler floor: the minimal server
// answering with admitfn's review handler, and nothing the server adds
// around it, over one policy the Pod does not match (handler-x-minimal),
// which no server answering with admitfn's reviews over any bundle can
// beat. So does the server with the 20 policies of Bundle20 alone, the 17
// the Pod matches among them, compiled whole (first-review-x-minimal).
// The same bundle pushed signed, read by a server that requires the
// signature, also parses no YAML (signed-x-minimal): only a signature binds
// the packed documents to the files.
func BenchmarkP4ColdStart(b *testing.B) {
	bin := binaries(b)
	dir := bundle100(b)
	pushed := filepath.Join(b.TempDir(), "pushed")
	if out, err := exec.Command(bin.cli, "push", "-p", dir, "--to", pushed).CombinedOutput(); err != nil {
		b.Fatalf("admitfn push: %v\n%s", err, out)
	}
	keyFile := filepath.Join(b.TempDir(), "bundle.key")
	if out, err := exec.Command(bin.cli, "keygen", "--out", keyFile).CombinedOutput(); err != nil {
		b.Fatalf("admitfn keygen: %v\n%s", err, out)
	}
	signed := filepath.Join(b.TempDir(), "signed")
	if out, err := exec.Command(bin.cli, "push", "-p", dir, "--to", signed, "--sign-key", keyFile).CombinedOutput(); err != nil {
		b.Fatalf("admitfn push --sign-key: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(keyFile + ".pub")
	if err != nil {
		b.Fatal(err)
	}
	withKey := []string{"--bundle-public-key", string(pub)}
	one := b.TempDir()
	if err := perf.WriteDir(perf.Generated(1, 0), one); err != nil {
		b.Fatal(err)
	}
	first := b.TempDir()
	b20, err := perf.Bundle20(perf.RepoRoot())
	if err != nil {
		b.Fatal(err)
	}
	if err := perf.WriteDir(b20, first); err != nil {
		b.Fatal(err)
	}
	body := perf.PodReview()
	// The server built with the CLI reads the pushed bundle packed and
	// compiles it on use.
	var log syncbuf.Buffer
	coldStartLogged(b, bin.server, pushed, body, &log)
	if !strings.Contains(log.String(), `"packed":true,"compile_on_use":100`) {
		b.Fatalf("the pushed bundle was not read packed and compiled on use:\n%s", log.String())
	}
	var signedLog syncbuf.Buffer
	coldStartLogged(b, bin.server, signed, body, &signedLog, withKey...)
	if !strings.Contains(signedLog.String(), `"packed":true,"compile_on_use":100`) || !strings.Contains(signedLog.String(), `"signatures_required":true`) {
		b.Fatalf("the signed bundle was not read packed, verified and compiled on use:\n%s", signedLog.String())
	}
	var admitfn, whole, baseline, upstream, handler, firstOnly, signedStart time.Duration
	for b.Loop() {
		baseline += coldStart(b, bin.minimal, dir, body)
		upstream += coldStart(b, bin.upstream, dir, body)
		handler += coldStart(b, bin.handler, one, body)
		admitfn += coldStart(b, bin.server, pushed, body)
		signedStart += coldStart(b, bin.server, signed, body, withKey...)
		whole += coldStart(b, bin.server, dir, body)
		firstOnly += coldStart(b, bin.server, first, body)
	}
	n := float64(b.N)
	b.ReportMetric(float64(admitfn.Microseconds())/1000/n, "admitfn-ms")
	b.ReportMetric(float64(whole.Microseconds())/1000/n, "whole-ms")
	b.ReportMetric(float64(baseline.Microseconds())/1000/n, "minimal-ms")
	b.ReportMetric(float64(upstream.Microseconds())/1000/n, "upstream-ms")
	b.ReportMetric(float64(handler.Microseconds())/1000/n, "handler-ms")
	b.ReportMetric(float64(firstOnly.Microseconds())/1000/n, "first-review-ms")
	b.ReportMetric(float64(admitfn)/float64(baseline), "x-minimal")
	b.ReportMetric(float64(whole)/float64(baseline), "whole-x-minimal")
	b.ReportMetric(float64(upstream)/float64(baseline), "upstream-x-minimal")
	b.ReportMetric(float64(handler)/float64(baseline), "handler-x-minimal")
	b.ReportMetric(float64(firstOnly)/float64(baseline), "first-review-x-minimal")
	b.ReportMetric(float64(signedStart)/float64(baseline), "signed-x-minimal")
}

// BenchmarkP5Throughput: reviews per second of the server on loopback, 8
// keep-alive clients sending the golden reviews of the example bundle (the
// soak's load), ÷ the minimal server answering the same requests; read
// x-minimal. The handler floor runs with them (handler-x-minimal): the
// minimal server answering with admitfn's review handler and nothing the
// server adds around it, which no server answering with admitfn's reviews
// can beat. Each reports the CPU its process spent per request
// (*-cpu-µs/req); the clients share the machine's CPUs.
func BenchmarkP5Throughput(b *testing.B) {
	bin := binaries(b)
	root := perf.RepoRoot()
	examples := filepath.Join(root, "policies", "examples")
	cases, err := soak.ExampleCases(filepath.Join(root, "adapters", "httpadapter", "testdata"), examples)
	if err != nil {
		b.Fatal(err)
	}
	type total struct {
		rate float64
		cpu  time.Duration
		reqs int
	}
	run := func(bin string, t *total) {
		rep, err := soak.Run(context.Background(), soak.Config{Server: bin, Policies: examples, Cases: cases, Clients: 8, Duration: 3 * time.Second, Window: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Errors != 0 {
			b.Fatalf("%s: %d errors: %v", filepath.Base(bin), rep.Errors, rep.FirstErrors)
		}
		t.rate += float64(rep.Requests) / rep.Elapsed.Seconds()
		t.cpu += rep.CPU
		t.reqs += rep.Requests
	}
	var admitfn, baseline, handler total
	for b.Loop() {
		run(bin.minimal, &baseline)
		run(bin.handler, &handler)
		run(bin.server, &admitfn)
	}
	n := float64(b.N)
	for _, r := range []struct {
		name string
		t    total
	}{{"admitfn", admitfn}, {"minimal", baseline}, {"handler", handler}} {
		b.ReportMetric(r.t.rate/n, r.name+"-req/s")
		b.ReportMetric(float64(r.t.cpu.Microseconds())/float64(max(r.t.reqs, 1)), r.name+"-cpu-µs/req")
	}
	b.ReportMetric(admitfn.rate/baseline.rate, "x-minimal")
	b.ReportMetric(handler.rate/baseline.rate, "handler-x-minimal")
}

// BenchmarkP6Memory: the server's resident memory with the 100-policy
// bundle loaded, after 10,000 reviews of the Pod from 4 keep-alive clients;
// read rss-MiB. The upstream floor serves the same requests
// (upstream-rss-MiB): the resident memory of a process linked with the
// upstream packages admitfn's core reuses, before any policy. So does the
// handler floor (handler-rss-MiB): admitfn's review handler with the same
// policies and nothing of the server, whose difference from rss-MiB is
// what the server links and keeps around it (the object stores' clients,
// metrics).
func BenchmarkP6Memory(b *testing.B) {
	bin := binaries(b)
	dir := bundle100(b)
	cases := []soak.Case{{Name: "pod", Route: "/validate", Body: perf.PodReview()}}
	run := func(server string) int64 {
		rep, err := soak.Run(context.Background(), soak.Config{Server: server, Policies: dir, Cases: cases, Clients: 4, Requests: 10000, Duration: 10 * time.Minute, Window: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Errors != 0 || rep.Requests != 10000 {
			b.Fatalf("%s: %d reviews, %d errors: %v", filepath.Base(server), rep.Requests, rep.Errors, rep.FirstErrors)
		}
		return rep.EndRSS
	}
	var rss, upstream, handler int64
	for b.Loop() {
		upstream += run(bin.upstream)
		handler += run(bin.handler)
		rss += run(bin.server)
	}
	b.ReportMetric(float64(rss)/float64(b.N)/(1<<20), "rss-MiB")
	b.ReportMetric(float64(upstream)/float64(b.N)/(1<<20), "upstream-rss-MiB")
	b.ReportMetric(float64(handler)/float64(b.N)/(1<<20), "handler-rss-MiB")
}
