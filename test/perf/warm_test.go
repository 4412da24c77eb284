package perf_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/perf/warmbench"
	"github.com/admitfn/admitfn/test/soak"
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
	if out, err := exec.Command("go", "build", "-o", bin, "../../functions/gcf/runner").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	cases, err := soak.ExampleCases("../../adapters/httpadapter/testdata", "../../policies/examples")
	if err != nil {
		b.Fatal(err)
	}
	policies, err := filepath.Abs("../../policies/examples")
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	process := func(name string, env ...string) warmbench.Process {
		cmd, url := launchGCF(b, client, bin, policies, env...)
		return warmbench.Process{Name: name, Pid: cmd.Process.Pid, Send: func(i int) { postCase(b, client, url, cases[i%len(cases)]) }}
	}
	admitfn := process("admitfn", "GOMAXPROCS=1")
	defaults := process("defaults", "GOGC=100", fmt.Sprintf("GOMAXPROCS=%d", runtime.NumCPU()))
	// Warm: the first requests fault in code and fill the caches.
	warmbench.Alternate(500, admitfn, defaults)
	warmbench.Compare(b, 5000, admitfn, defaults)
}

// launchGCF starts the function on a free loopback port, with the memory
// limit the Terraform module gives 512M, and env, and waits for it to
// answer.
func launchGCF(b *testing.B, client *http.Client, bin, policies string, env ...string) (*exec.Cmd, string) {
	b.Helper()
	addr := freePort(b)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append([]string{"PORT=" + port, "LOCAL_ONLY=true", "ADMITFN_POLICIES=" + policies, "GOMEMLIMIT=439MiB"}, env...)...)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	url := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := client.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			return cmd, url
		}
		if time.Now().After(deadline) {
			b.Fatalf("no answer after 30s: %v", err)
		}
	}
}
