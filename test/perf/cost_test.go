package perf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/admitfn/admitfn/adapters/awslambda/lambdatest"
	"github.com/admitfn/admitfn/test/cgrouptest"
	"github.com/admitfn/admitfn/test/perf"
	"github.com/admitfn/admitfn/test/soak"
	"github.com/admitfn/admitfn/test/syncbuf"
	"github.com/admitfn/admitfn/test/testbin"
)

// BenchmarkCost measures what a warm review takes, and so costs, on AWS
// Lambda and Cloud Functions at each memory size: the bootstrap or the
// Cloud Function, built as released, in a cgroup with that memory and the
// share of a CPU the platform gives it (Lambda: memory ÷ 1,769 MB of one
// vCPU; Cloud Functions: its tier's vCPU), reviewing the example bundle's
// golden reviews one at a time, as the platforms send them to one
// instance. Each review's time is what the caller waits (the Runtime API
// stand-in's invoke, the HTTP request); billed-ms is what the platform
// bills for it on average (Lambda: rounded up to the millisecond; Cloud
// Functions: to 100 ms), usd-per-million that at perf's list prices.
// docs/cost.md is the last run.
func BenchmarkCost(b *testing.B) {
	cases, err := soak.ExampleCases("../../adapters/httpadapter/testdata", "../../policies/examples")
	if err != nil {
		b.Fatal(err)
	}
	policies, err := filepath.Abs("../../policies/examples")
	if err != nil {
		b.Fatal(err)
	}
	for _, mb := range perf.LambdaSizes {
		b.Run(fmt.Sprintf("lambda-%dMB", mb), func(b *testing.B) {
			send := startLambda(b, cases, policies, mb)
			measureCost(b, send, func(d time.Duration) float64 { return perf.LambdaBilledMS(d) },
				func(billedMS float64) float64 { return perf.LambdaUSDPerMillion(mb, billedMS) })
		})
	}
	for _, tier := range perf.GCFTiers {
		b.Run("gcf-"+tier.Memory, func(b *testing.B) {
			send := startGCF(b, cases, policies, tier)
			measureCost(b, send, func(d time.Duration) float64 { return perf.GCFBilledMS(d) },
				func(billedMS float64) float64 { return perf.GCFUSDPerMillion(tier, billedMS) })
		})
	}
}

// measureCost warms the instance, then times b.N reviews and reports
// their p50 and p99, the mean billed time and its price.
func measureCost(b *testing.B, send func(i int), billed func(time.Duration) float64, usd func(billedMS float64) float64) {
	for i := range 200 { // fault in code, fill the caches
		send(i)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		send(i)
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	total := 0.0
	for _, d := range took {
		total += billed(d)
	}
	meanBilled := total / float64(len(took))
	slices.Sort(took)
	ms := func(q float64) float64 {
		return float64(took[int(math.Ceil(q*float64(len(took))))-1]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(meanBilled, "billed-ms")
	b.ReportMetric(usd(meanBilled), "usd-per-million")
}

// startLambda runs the bootstrap as Lambda runs it with mb of memory and
// returns a function that invokes it with case i's Function URL event.
func startLambda(b *testing.B, cases []soak.Case, policies string, mb int) func(int) {
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(api.Close)
	url := &lambdatest.FunctionURL{URLID: "cost", Region: "eu-west-1"}
	payloads := make([][]byte, len(cases))
	for i, c := range cases {
		r := httptest.NewRequest(http.MethodPost, c.Route, bytes.NewReader(c.Body))
		r.Header.Set("Content-Type", "application/json")
		if payloads[i], err = json.Marshal(url.Event(r, c.Body, time.Now())); err != nil {
			b.Fatal(err)
		}
	}
	bin := testbin.Path(b, "bootstrap")
	cmd := cgrouptest.LimitedCommand(b, int64(mb)<<20, float64(mb)/perf.LambdaFullCPUMB, bin)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = []string{
		"AWS_LAMBDA_RUNTIME_API=" + api.Addr,
		"LAMBDA_TASK_ROOT=" + filepath.Dir(bin),
		"AWS_LAMBDA_FUNCTION_NAME=admitfn",
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", mb),
		"AWS_REGION=eu-west-1",
		"ADMITFN_POLICIES=" + policies,
		"TZ=:UTC",
	}
	logs := startKilled(b, cmd)
	ctx := context.Background()
	return func(i int) {
		res, err := api.Invoke(ctx, payloads[i%len(payloads)], 10*time.Second)
		if err != nil || res.Err != nil || !bytes.HasPrefix(res.Payload, []byte(`{"statusCode":200,`)) {
			b.Fatalf("%s: %v %v %.100s\n%s", cases[i%len(cases)].Name, err, res.Err, res.Payload, logs.String())
		}
	}
}

// startGCF runs the Cloud Function as an instance of tier runs it, with
// the environment the Terraform module gives it, and returns a function
// that sends it case i.
func startGCF(b *testing.B, cases []soak.Case, policies string, tier perf.GCFTier) func(int) {
	addr := freePort(b)
	_, port, _ := net.SplitHostPort(addr)
	cmd := cgrouptest.LimitedCommand(b, tier.Bytes, tier.VCPU, testbin.Path(b, "gcf"))
	cmd.Env = append(os.Environ(), "PORT="+port, "LOCAL_ONLY=true", "ADMITFN_POLICIES="+policies,
		fmt.Sprintf("GOMEMLIMIT=%d", tier.Bytes*9/10))
	if tier.VCPU < 1 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
	}
	logs := startKilled(b, cmd)
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := client.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no answer after 60s: %v\n%s", err, logs.String())
		}
	}
	return func(i int) { postCase(b, client, url, cases[i%len(cases)]) }
}

// startKilled starts cmd, its output in the returned buffer, and kills it
// when the benchmark ends (or its parent dies).
func startKilled(b *testing.B, cmd *exec.Cmd) *syncbuf.Buffer {
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return logs
}

// postCase sends c to the Cloud Function at url and wants it answered.
func postCase(b *testing.B, client *http.Client, url string, c soak.Case) {
	resp, err := client.Post(url+c.Route, "application/json", bytes.NewReader(c.Body))
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: HTTP %d", c.Name, resp.StatusCode)
	}
}
