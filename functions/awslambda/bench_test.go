package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/adapters/awslambda/lambdatest"
	"github.com/admitfn/admitfn/hack/build/lambdabuild"
	"github.com/admitfn/admitfn/test/cgrouptest"
	"github.com/admitfn/admitfn/test/perf/warmbench"
	"github.com/admitfn/admitfn/test/soak"
	"github.com/admitfn/admitfn/test/testbin"
)

// BenchmarkP7ColdStart measures process exec → first answered Function URL
// event for the bootstrap serving the example bundle, and for a hello-world
// aws-lambda-go function built the same way, alternately in one run, each
// in a 128 MB memory cgroup as the smallest Lambda runs it; the figure to
// read is their ratio (x-hello), not the absolute times. The bundle is
// pushed to a directory, as docs/aws-lambda.md ships one in the deployment
// package: read packed, each policy compiled on first use. The same files
// as YAML compile whole before the first event (whole-x-hello).
//
// The bundle pushed signed, to a function that requires the signature,
// also reads its documents from the packed form (signed-x-hello): only a
// signature binds them to the files, so unsigned the files are parsed.
//
// The upstream floor runs with them: the hello-world function linked with
// the Kubernetes and cel-go packages admitfn's core reuses
// (test/perf/upstream), answering at once (upstream-x-hello), which no
// function built on those packages can beat.
func BenchmarkP7ColdStart(b *testing.B) {
	dir := b.TempDir()
	hello, upstream := filepath.Join(dir, "hello"), filepath.Join(dir, "upstream")
	pkg := lambdabuild.Package + "/testdata/hello"
	if err := lambdabuild.Build(context.Background(), pkg, runtime.GOARCH, hello); err != nil {
		b.Fatal(err)
	}
	if err := lambdabuild.BuildWith(context.Background(), pkg, runtime.GOARCH, upstream, "", "admitfn_upstream"); err != nil {
		b.Fatal(err)
	}
	ev := event(b, "function-url-warn")
	const memory = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128"
	files := examples(b)
	pushed := filepath.Join(dir, "pushed")
	pushExamples(b, pushed)
	policies := "ADMITFN_POLICIES=" + pushed
	if _, out := coldStartOut(b, bootstrap, ev, memory, policies); !strings.Contains(out, `"packed":true,"compile_on_use":12`) {
		b.Fatalf("the pushed bundle was not read packed and compiled on use:\n%s", out)
	}
	// Pushed signed, to a function that requires the signature: the one
	// case whose packed documents replace parsing the files.
	keyFile := filepath.Join(dir, "bundle.key")
	cli := testbin.Path(b, "admitfn")
	if out, err := exec.Command(cli, "keygen", "--out", keyFile).CombinedOutput(); err != nil {
		b.Fatalf("admitfn keygen: %v\n%s", err, out)
	}
	signed := filepath.Join(dir, "signed")
	if out, err := exec.Command(cli, "push", "-p", "../../policies/examples", "--to", signed, "--sign-key", keyFile).CombinedOutput(); err != nil {
		b.Fatalf("admitfn push --sign-key: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(keyFile + ".pub")
	if err != nil {
		b.Fatal(err)
	}
	signedEnv := []string{memory, "ADMITFN_POLICIES=" + signed, "ADMITFN_BUNDLE_PUBLIC_KEY=" + string(pub)}
	if _, out := coldStartOut(b, bootstrap, ev, signedEnv...); !strings.Contains(out, `"packed":true,"compile_on_use":12`) || !strings.Contains(out, `"signatures_required":true`) {
		b.Fatalf("the signed bundle was not read packed, verified and compiled on use:\n%s", out)
	}
	var admitfn, whole, baseline, floor, signedStart time.Duration
	b.ResetTimer()
	for range b.N {
		baseline += coldStart(b, hello, ev, memory)
		floor += coldStart(b, upstream, ev, memory)
		admitfn += coldStart(b, bootstrap, ev, memory, policies)
		signedStart += coldStart(b, bootstrap, ev, signedEnv...)
		whole += coldStart(b, bootstrap, ev, memory, files)
	}
	n := float64(b.N)
	b.ReportMetric(float64(admitfn.Microseconds())/1000/n, "admitfn-ms")
	b.ReportMetric(float64(whole.Microseconds())/1000/n, "whole-ms")
	b.ReportMetric(float64(baseline.Microseconds())/1000/n, "hello-ms")
	b.ReportMetric(float64(floor.Microseconds())/1000/n, "upstream-ms")
	b.ReportMetric(float64(admitfn)/float64(baseline), "x-hello")
	b.ReportMetric(float64(whole)/float64(baseline), "whole-x-hello")
	b.ReportMetric(float64(floor)/float64(baseline), "upstream-x-hello")
	b.ReportMetric(float64(signedStart)/float64(baseline), "signed-x-hello")
}

// coldStart starts bin in a 128 MB memory cgroup against a fresh Runtime
// API, times exec to its first answered invocation of payload, and stops
// it. The clock starts once the process is in its cgroup: moving there
// takes cgroup v1 milliseconds, which Lambda's own sandbox does not charge
// to the function.
func coldStart(b *testing.B, bin string, payload []byte, env ...string) time.Duration {
	b.Helper()
	took, _ := coldStartOut(b, bin, payload, env...)
	return took
}

// coldStartOut is coldStart, also returning what the process logged.
func coldStartOut(b *testing.B, bin string, payload []byte, env ...string) (time.Duration, string) {
	b.Helper()
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		b.Fatal(err)
	}
	defer api.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, gate := cgrouptest.GatedCommand(b, 128<<20, bin)
	fn := startCmd(b, cmd, bin, api, env...)
	if err := gate.Wait(); err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	if err := gate.Open(); err != nil {
		b.Fatal(err)
	}
	res, err := api.Invoke(ctx, payload, 10*time.Second)
	took := time.Since(began)
	fn.stop()
	if err != nil || res.Err != nil {
		b.Fatalf("invocation: %v %v\n%s", err, res.Err, fn.stderr)
	}
	return took, fn.stdout.String()
}

// BenchmarkWarmInvocations measures the CPU a warm bootstrap spends per
// invocation (the collector's and the scheduler's included) on the example
// bundle's golden reviews in Function URL events, one invocation at a time
// as Lambda sends them, with the 512 MB the Terraform module gives it.
// Lambda bills an invocation's duration, and under its share of a CPU that
// is the CPU the process spends. Two bootstraps run alternately in one run:
// admitfn as it starts (the collector paced to the memory limit, one P for
// invocations), and defaults with Go's runtime defaults in its environment
// (GOGC=100, GOMAXPROCS=every CPU); x-defaults is their CPU ratio. Each
// one's time per invocation as the Runtime API sees it (wall-µs) says what
// the caller waits, and its resident memory at the end what the pace
// costs.
func BenchmarkWarmInvocations(b *testing.B) {
	cases, err := soak.ExampleCases("../../adapters/httpadapter/testdata", "../../policies/examples")
	if err != nil {
		b.Fatal(err)
	}
	url := &lambdatest.FunctionURL{URLID: "bench", Region: "eu-west-1"}
	payloads := make([][]byte, len(cases))
	for i, c := range cases {
		r := httptest.NewRequest(http.MethodPost, c.Route, bytes.NewReader(c.Body))
		r.Header.Set("Content-Type", "application/json")
		if payloads[i], err = json.Marshal(url.Event(r, c.Body, time.Now())); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	process := func(name string, env ...string) (warmbench.Process, *function) {
		api, err := lambdatest.NewRuntimeAPI()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(api.Close)
		fn := start(b, bootstrap, api, env...)
		return warmbench.Process{Name: name, Pid: fn.cmd.Process.Pid, Send: func(i int) {
			res, err := api.Invoke(ctx, payloads[i%len(payloads)], 10*time.Second)
			if err != nil || res.Err != nil || !bytes.HasPrefix(res.Payload, []byte(`{"statusCode":200,`)) {
				b.Fatalf("%s: %v %v %.100s\n%s", cases[i%len(cases)].Name, err, res.Err, res.Payload, fn.stderr)
			}
		}}, fn
	}
	admitfn, afn := process("admitfn", examples(b))
	defaults, dfn := process("defaults", examples(b), "GOGC=100", fmt.Sprintf("GOMAXPROCS=%d", runtime.NumCPU()))
	// Warm: the first invocations fault in code and fill the caches, and
	// client-go's schema is parsed.
	warmbench.Alternate(500, admitfn, defaults)
	const pacing, oneP = `"message":"collector paced to the memory limit"`, `"gomaxprocs":1,`
	if a, d := afn.stdout.String(), dfn.stdout.String(); !strings.Contains(a, pacing) || !strings.Contains(a, oneP) || strings.Contains(d, pacing) || strings.Contains(d, oneP) {
		b.Fatalf("want the first bootstrap paced and on one P, the second on Go's defaults:\n%s\n%s", afn.stdout, dfn.stdout)
	}
	warmbench.Compare(b, 5000, admitfn, defaults)
}
