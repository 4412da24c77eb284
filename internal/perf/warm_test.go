package perf_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/admitfn/admitfn/internal/soak"
)

// BenchmarkGCFWarmRequests measures the CPU a warm Cloud Function instance
// spends per request (the collector's and the scheduler's included) on the
// example bundle's golden reviews, one request at a time as an instance
// with less than one vCPU receives them, through functions-framework-go as
// Cloud Functions serves it. Two instances run alternately in one run, both
// with the GOMEMLIMIT the Terraform module sets for 512M: admitfn as the
// module deploys it (GOMAXPROCS=1 below 2G of memory, less than one vCPU;
// the collector paced to the limit), and defaults with Go's runtime
// defaults (GOGC=100, GOMAXPROCS=every CPU); x-defaults is their CPU ratio,
// wall-µs the time a request takes as the caller sees it.
func BenchmarkGCFWarmRequests(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "gcf")
	if out, err := exec.Command("go", "build", "-o", bin, "../../functions/gcp/cmd").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	cases, err := soak.ExampleCases("../../adapters/http/testdata", "../../policies/examples")
	if err != nil {
		b.Fatal(err)
	}
	policies, err := filepath.Abs("../../policies/examples")
	if err != nil {
		b.Fatal(err)
	}
	admitfn := launchGCF(b, bin, policies, "GOMAXPROCS=1")
	defaults := launchGCF(b, bin, policies, "GOGC=100", fmt.Sprintf("GOMAXPROCS=%d", runtime.NumCPU()))
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(in *gcfInstance, i int) {
		c := cases[i%len(cases)]
		began := time.Now()
		resp, err := client.Post(in.url+c.Route, "application/json", bytes.NewReader(c.Body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		in.wall += time.Since(began)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: HTTP %d", c.Name, resp.StatusCode)
		}
	}
	for _, in := range []*gcfInstance{admitfn, defaults} {
		in.waitUp(b, client)
	}
	// Warm: the first requests fault in code and fill the caches.
	for i := range 500 {
		send(admitfn, i)
		send(defaults, i)
	}
	const perLoop = 5000
	n := 0
	admitfn.wall, defaults.wall = 0, 0
	b.ResetTimer()
	for b.Loop() {
		before := [2]time.Duration{admitfn.cpuTime(b), defaults.cpuTime(b)}
		for i := range perLoop {
			send(admitfn, i)
			send(defaults, i)
		}
		admitfn.cpu += admitfn.cpuTime(b) - before[0]
		defaults.cpu += defaults.cpuTime(b) - before[1]
		n += perLoop
	}
	b.ReportMetric(float64(admitfn.cpu)/float64(defaults.cpu), "x-defaults")
	for name, in := range map[string]*gcfInstance{"admitfn": admitfn, "defaults": defaults} {
		rss, err := soak.RSS(in.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(in.cpu.Microseconds())/float64(n), name+"-cpu-µs/op")
		b.ReportMetric(float64(in.wall.Microseconds())/float64(n), name+"-wall-µs/op")
		b.ReportMetric(float64(rss)/(1<<20), name+"-rss-MiB")
	}
}

type gcfInstance struct {
	cmd       *exec.Cmd
	url       string
	cpu, wall time.Duration
}

// launchGCF starts the function on a free loopback port, with the memory limit
// the Terraform module gives 512M, and env.
func launchGCF(b *testing.B, bin, policies string, env ...string) *gcfInstance {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append([]string{"PORT=" + port, "LOCAL_ONLY=true", "ADMITFN_POLICIES=" + policies, "GOMEMLIMIT=439MiB"}, env...)...)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &gcfInstance{cmd: cmd, url: "http://127.0.0.1:" + port}
}

func (in *gcfInstance) waitUp(b *testing.B, client *http.Client) {
	b.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := client.Get(in.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no answer after 30s: %v", err)
		}
	}
}

func (in *gcfInstance) cpuTime(b *testing.B) time.Duration {
	b.Helper()
	d, err := soak.CPUTime(in.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
