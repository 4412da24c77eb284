package main

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/admitfn/admitfn/adapters/awslambda/lambdatest"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/policy/slowpolicy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/hack/build/lambdabuild"
	"github.com/admitfn/admitfn/test/cgrouptest"
	"github.com/admitfn/admitfn/test/soak"
	"github.com/admitfn/admitfn/test/syncbuf"
	"github.com/admitfn/admitfn/test/testbin"
)

// bootstrap is the function built as `make lambda` builds it, for this
// machine's architecture.
var bootstrap string

func TestMain(m *testing.M) {
	bootstrap = testbin.MustGet("bootstrap")
	os.Exit(testbin.Run(m))
}

// --version prints which admitfn the bootstrap is, without a Runtime API:
// the revision of the source it was built from, which make stamps
// (srcrev).
func TestVersionFlag(t *testing.T) {
	out, err := exec.Command(bootstrap, "--version").Output()
	want := regexp.MustCompile(`^admitfn \(devel\) \(revision (unknown|src-[0-9a-f]{16}), Kubernetes v1\.37\.2, ` + regexp.QuoteMeta(runtime.Version()) + `\)\n$`)
	if err != nil || !want.Match(out) {
		t.Errorf("bootstrap --version: %q, %v; want %s", out, err, want)
	}
}

// function is one running bootstrap process: one Lambda instance.
type function struct {
	cmd            *exec.Cmd
	stdout, stderr *syncbuf.Buffer
	exited         chan struct{}
}

// start runs bin as Lambda runs a provided.al2023 bootstrap: in the task
// root, with the Runtime API address and the function's environment.
func start(t testing.TB, bin string, api *lambdatest.RuntimeAPI, env ...string) *function {
	t.Helper()
	return startCmd(t, exec.Command(bin), bin, api, env...)
}

// startCmd is start for a command that runs bin.
func startCmd(t testing.TB, cmd *exec.Cmd, bin string, api *lambdatest.RuntimeAPI, env ...string) *function {
	t.Helper()
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append([]string{
		"AWS_LAMBDA_RUNTIME_API=" + api.Addr,
		"LAMBDA_TASK_ROOT=" + filepath.Dir(bin),
		"AWS_LAMBDA_FUNCTION_NAME=admitfn",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512",
		"AWS_REGION=eu-west-1",
		"TZ=:UTC",
	}, env...)
	f := &function{cmd: cmd, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = f.stdout, f.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(f.exited)
	}()
	t.Cleanup(f.stop)
	return f
}

func (f *function) stop() {
	select {
	case <-f.exited:
	default:
		f.cmd.Process.Kill()
		<-f.exited
	}
}

func examples(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("../../policies/examples")
	if err != nil {
		t.Fatal(err)
	}
	return "ADMITFN_POLICIES=" + dir
}

func event(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../adapters/awslambda/testdata", name+".event.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenResponse is the adapter's golden answer to an event fixture.
func goldenResponse(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../adapters/awslambda/testdata", name+".response.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func readable(t *testing.T, payload []byte) map[string]any {
	t.Helper()
	m, err := lambdatest.Readable(payload)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// patience bounds every wait for an instance to answer, start, stop or log:
// a safety net for a loaded machine, not a measure of speed.
const patience = 2 * time.Minute

func invoke(t *testing.T, api *lambdatest.RuntimeAPI, payload []byte) lambdatest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	res, err := api.Invoke(ctx, payload, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestColdStartThenInvocations(t *testing.T) {
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	fn := start(t, bootstrap, api, examples(t), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512")

	var ids []string
	for _, name := range []string{"function-url-warn", "function-url-deny", "http-api-stage-mutate", "rest-api-allow-v1beta1", "function-url-bad-base64", "function-url-warn"} {
		res := invoke(t, api, event(t, name))
		if res.Err != nil {
			t.Fatalf("%s: function error %v\n%s", name, res.Err, fn.stdout)
		}
		if got, want := readable(t, res.Payload), goldenResponse(t, name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: response differs from the adapter's golden file\n got: %v\nwant: %v", name, got, want)
		}
		ids = append(ids, res.RequestID)
	}

	// An invocation that is no HTTP event is the one function error; the
	// instance goes on serving after it, and after a payload that is no JSON.
	res := invoke(t, api, []byte(`{"Records":[{"eventSource":"aws:sqs","body":"hello"}]}`))
	if res.Err == nil || res.Err.Kind != "EventError" || res.Err.Message != "not an HTTP event: want a Function URL or API Gateway event (payload 2.0 or 1.0)" {
		t.Errorf("non-HTTP event: %+v, %s", res.Err, res.Payload)
	}
	res = invoke(t, api, []byte(`{"version":"2.0",`))
	if res.Err == nil || res.Payload != nil {
		t.Errorf("malformed payload: %+v, %s", res.Err, res.Payload)
	}
	res = invoke(t, api, event(t, "http-api-healthz"))
	if res.Err != nil || readable(t, res.Payload)["statusCode"] != float64(200) {
		t.Errorf("after the errors: %+v %s", res.Err, res.Payload)
	}
	select {
	case <-fn.exited:
		t.Fatalf("the instance exited: %s", fn.stderr)
	default:
	}

	// The switch to one P comes when client-go's schema is parsed, in the
	// background.
	for deadline := time.Now().Add(patience); !strings.Contains(fn.stdout.String(), `"gomaxprocs":1,`); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("invocations never moved to one P:\n%s", fn.stdout)
		}
	}

	// Logs are CloudWatch JSON: timestamp (RFC 3339), level, message; each
	// review line carries the invocation's request id.
	lines := strings.Split(strings.TrimSpace(fn.stdout.String()), "\n")
	reviewed := map[string]bool{}
	ready, emf, paced, oneP := 0, 0, 0, 0
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		ts, _ := m["timestamp"].(string)
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("timestamp %q is not RFC 3339: %s", ts, line)
		}
		if m["level"] == nil || m["message"] == nil {
			t.Errorf("log line without level or message: %s", line)
		}
		switch m["message"] {
		case "ready":
			ready++
			// 512 MB configured: the Go runtime's soft limit at nine tenths.
			if m["bundle"] == nil || m["init_ms"] == nil || m["policies_loaded"] != float64(12) || m["memory_limit_mib"] != float64(460) || m["memory_limit_from"] != "lambda" ||
				m["version"] == nil || m["kubernetes"] != "v1.37.2" {
				t.Errorf("ready line: %s", line)
			}
		case "collector paced to the memory limit":
			// Half of the 460 MiB limit is many times the example
			// bundle's heap: the most headroom.
			paced++
			if m["gc_percent"] != float64(400) || m["memory_limit_mib"] != float64(460) {
				t.Errorf("pacing line: %s", line)
			}
		case "invocations run on one P: the function has less than one vCPU":
			// 512 MB, less than one vCPU: once client-go's schema is
			// parsed, invocations are served on one P.
			oneP++
			if m["gomaxprocs"] != float64(1) {
				t.Errorf("one-P line: %s", line)
			}
		case "review":
			reviewed[m["requestId"].(string)] = true
		case "admitfn metrics":
			// CloudWatch Embedded Metric Format, on the invocation's line.
			aws, _ := m["_aws"].(map[string]any)
			if aws == nil || m["requestId"] == nil || m["admitfn_reviews_total"] != float64(1) || m["admitfn_review_duration_ms"] == nil {
				t.Errorf("metrics line: %s", line)
			}
			emf++
		}
	}
	if ready != 1 {
		t.Errorf("%d ready lines: the engine is built once per cold start", ready)
	}
	if paced != 1 {
		t.Errorf("%d pacing lines, want one for the one load", paced)
	}
	if oneP != 1 {
		t.Errorf("%d one-P lines, want one", oneP)
	}
	if emf != 5 {
		t.Errorf("%d metrics lines, want one per review request (5)", emf)
	}
	for _, id := range ids[:4] {
		if !reviewed[id] {
			t.Errorf("no review line with requestId %s:\n%s", id, fn.stdout)
		}
	}
}

// pushExamples publishes the example bundle to a directory as `admitfn
// push -p policies/examples --to dir` does with a CLI of the bootstrap's
// build: compiled by this toolchain, and packed.
func pushExamples(t testing.TB, dir string) {
	t.Helper()
	if out, err := exec.Command(testbin.Path(t, "admitfn"), "push", "-p", "../../policies/examples", "--to", dir).CombinedOutput(); err != nil {
		t.Fatalf("admitfn push: %v\n%s", err, out)
	}
}

// A bundle that a build of other code says it compiled is compiled whole:
// unstamped builds ("(devel)", no revision) of any code would otherwise
// trust each other. The CLI built with the bootstrap is trusted.
func TestCompiledByAnotherBuild(t *testing.T) {
	sources, err := policy.ReadFS(os.DirFS("../../policies/examples"), ".")
	if err != nil {
		t.Fatal(err)
	}
	unstamped := bundle.ThisToolchain()
	unstamped.Revision, unstamped.Build = "", ""
	dir := t.TempDir()
	d, err := store.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.Publish(context.Background(), d, sources, bundle.PublishOptions{CompiledBy: &unstamped, Pack: true}); err != nil {
		t.Fatal(err)
	}
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	fn := start(t, bootstrap, api, "ADMITFN_POLICIES="+dir)
	if res := invoke(t, api, event(t, "function-url-warn")); res.Err != nil {
		t.Fatalf("function error %v\n%s", res.Err, fn.stdout)
	}
	if out := fn.stdout.String(); !strings.Contains(out, `"message":"policy bundle loaded"`) || strings.Contains(out, "compile_on_use") {
		t.Fatalf("a bundle compiled by an unstamped build was compiled on use:\n%s", out)
	}
}

// A bundle pushed into the deployment package's policies/ directory, as
// docs/aws-lambda.md ships one, is read packed and compiled on use: the
// bootstrap answers as it does from the YAML files, and compiles the rest
// in the background.
func TestPushedBundleInTheTaskRoot(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bootstrap")
	data, err := os.ReadFile(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	pushExamples(t, filepath.Join(root, "policies"))
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	fn := start(t, bin, api)
	for _, name := range []string{"function-url-warn", "function-url-deny", "http-api-stage-mutate", "rest-api-allow-v1beta1"} {
		res := invoke(t, api, event(t, name))
		if res.Err != nil {
			t.Fatalf("%s: function error %v\n%s", name, res.Err, fn.stdout)
		}
		if got, want := readable(t, res.Payload), goldenResponse(t, name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: response differs from the adapter's golden file\n got: %v\nwant: %v", name, got, want)
		}
	}
	// Settled once the background compile and client-go's schema are done.
	for deadline := time.Now().Add(patience); !strings.Contains(fn.stdout.String(), `"gomaxprocs":1,`); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the bootstrap never settled:\n%s", fn.stdout)
		}
	}
	var loaded []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(fn.stdout.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["message"] == "policy bundle loaded" {
			loaded = append(loaded, m)
		}
		if m["level"] == "error" {
			t.Errorf("error logged: %s", line)
		}
	}
	if len(loaded) != 1 || loaded[0]["policies"] != filepath.Join(root, "policies") || loaded[0]["packed"] != true || loaded[0]["compile_on_use"] != float64(12) || loaded[0]["files"] != float64(12) {
		t.Errorf("load lines: %v", loaded)
	}
}

// The smallest function Lambda runs (128 MB), in a memory cgroup of that
// size standing in for Lambda's sandbox: paced to its 115 MiB limit, the bootstrap
// answers thousands of reviews with the golden answers, and the kernel
// never has to end it.
func TestSmallestFunctionPacedToItsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of invocations")
	}
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	cmd := cgrouptest.Command(t, 128<<20, bootstrap)
	fn := startCmd(t, cmd, bootstrap, api, examples(t), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128")
	names := []string{"function-url-warn", "function-url-deny", "http-api-stage-mutate", "rest-api-allow-v1beta1", "http-api-custom-domain-pull-policy", "rest-api-custom-domain-audit"}
	payloads, golden := make([][]byte, len(names)), make([]map[string]any, len(names))
	for i, name := range names {
		payloads[i], golden[i] = event(t, name), goldenResponse(t, name)
	}
	for i := range 3000 {
		res := invoke(t, api, payloads[i%len(names)])
		if res.Err != nil {
			t.Fatalf("invocation %d (%s): function error %v\n%s", i, names[i%len(names)], res.Err, fn.stderr)
		}
		if got := readable(t, res.Payload); !reflect.DeepEqual(got, golden[i%len(names)]) {
			t.Fatalf("invocation %d (%s): %v\nwant %v", i, names[i%len(names)], got, golden[i%len(names)])
		}
	}
	select {
	case <-fn.exited:
		t.Fatalf("the instance exited: %s", fn.stderr)
	default:
	}
	rss, err := soak.RSS(fn.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var pacing string
	for line := range strings.Lines(fn.stdout.String()) {
		if strings.Contains(line, `"message":"collector paced to the memory limit"`) {
			pacing = line
		}
	}
	if !strings.Contains(pacing, `"memory_limit_mib":115`) || !strings.Contains(pacing, `"gc_percent":`) {
		t.Errorf("pacing line %q", pacing)
	}
	t.Logf("resident after 3,000 invocations: %.1f MiB; %s", float64(rss)/(1<<20), strings.TrimSpace(pacing))
}

func TestLambdaDeadlineBoundsASlowReview(t *testing.T) {
	// The function's timeout (3s here) is shorter than the webhook's
	// (?timeout=10s): the review stops 250ms before Lambda's deadline and
	// answers a 504 Status, instead of Lambda killing the invocation. Left
	// alone, the review runs for tens of seconds and is allowed: the 504 is
	// the deadline's doing.
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	fn := start(t, bootstrap, api, "ADMITFN_POLICIES="+slowpolicy.WriteDir(t))
	var ev map[string]any
	if err := json.Unmarshal(event(t, "function-url-deny"), &ev); err != nil {
		t.Fatal(err)
	}
	ev["rawPath"] = slowpolicy.Route
	ev["requestContext"].(map[string]any)["http"].(map[string]any)["path"] = slowpolicy.Route
	ev["body"] = string(slowpolicy.Review("slow-1"))
	payload, _ := json.Marshal(ev)

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	res, err := api.Invoke(ctx, payload, 3*time.Second)
	if err != nil {
		t.Fatalf("no answer: %v\n%s", err, fn.stdout)
	}
	if res.Err != nil {
		t.Fatalf("function error %+v", res.Err)
	}
	got := readable(t, res.Payload)
	want := map[string]any{
		"statusCode":      float64(504),
		"isBase64Encoded": false,
		"headers":         map[string]any{"Content-Type": "application/json", "X-Content-Type-Options": "nosniff"},
		"body":            map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure", "message": "review of request slow-1 did not finish before the deadline", "reason": "Timeout", "code": float64(504)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("response\n got: %v\nwant: %v", got, want)
	}
}

func TestInitErrors(t *testing.T) {
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "policy.yaml"), []byte("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: broken}\nspec:\n  validations:\n  - expression: \"object.spec.replicas >\"\n"), 0o644)
	// A pushed bundle with a file edited by hand since: not served from
	// the packed copy.
	edited := t.TempDir()
	pushExamples(t, edited)
	os.WriteFile(filepath.Join(edited, "01-basic.yaml"), []byte("# edited\n"), 0o644)
	// A pushed bundle with a policy file added by hand since: tested by
	// the CLI, so refused by the function too.
	added := t.TempDir()
	pushExamples(t, added)
	os.WriteFile(filepath.Join(added, "99-added.yaml"), []byte("# added\n"), 0o644)
	const noKey = "configuration error: ADMITFN_BUNDLE_PUBLIC_KEY is set but holds no key: set it to the public keys bundles must be signed with, or unset it to load unsigned bundles"
	for _, tc := range []struct {
		name, env, errorType, message string
	}{
		{"bad bundle", "ADMITFN_POLICIES=" + bad, "Runtime.BundleError", "load " + bad + ": "},
		{"missing bundle", "ADMITFN_POLICIES=/nonexistent/policies", "Runtime.BundleError", "load /nonexistent/policies: "},
		{"pushed bundle edited", "ADMITFN_POLICIES=" + edited, "Runtime.BundleError", "load " + edited + ": 01-basic.yaml: bundle object does not match its manifest: 9 bytes, manifest says "},
		{"bad log level", "ADMITFN_LOG_LEVEL=loud", "Runtime.ConfigError", `invalid log level "loud": want debug, info, warn or error`},
		{"bad refresh interval", "ADMITFN_REFRESH_INTERVAL=soon", "Runtime.ConfigError", `refresh interval "soon": want a duration such as 30s, or 0 to turn refresh off`},
		{"pushed bundle with a file added", "ADMITFN_POLICIES=" + added, "Runtime.BundleError", "load " + added + ": bundle directory holds a policy file its manifest does not name: 99-added.yaml, not named by .admitfn/manifest.json, which the bundle was pushed with: push the bundle again"},
		{"bad public key", "ADMITFN_BUNDLE_PUBLIC_KEY=abc", "Runtime.ConfigError", `configuration error: ADMITFN_BUNDLE_PUBLIC_KEY: public key "abc": want a PEM PUBLIC KEY or 32 bytes in base64`},
		{"empty public key", "ADMITFN_BUNDLE_PUBLIC_KEY=", "Runtime.ConfigError", noKey},
		{"blank public key", "ADMITFN_BUNDLE_PUBLIC_KEY= \n", "Runtime.ConfigError", noKey},
		{"short path token", "ADMITFN_TOKENS=abc", "Runtime.ConfigError", "ADMITFN_TOKENS: path token 1: want at least 22 characters"},
		{"gcs on lambda", "ADMITFN_POLICIES=gs://b/p", "Runtime.ConfigError", "configuration error: gs://b/p: storage backend not built in: this function reads s3:// and directories"},
		{"unknown scheme", "ADMITFN_POLICIES=https://b/p", "Runtime.ConfigError", `configuration error: policy location "https://b/p": unsupported scheme "https"`},
		{"bad cluster name", "ADMITFN_CLUSTERS=prod,Prod", "Runtime.ConfigError", `configuration error: ADMITFN_CLUSTERS: clusters[1]: name "Prod": want a DNS label (a-z, 0-9 and -, at most 63)`},
		{"gke on lambda", `ADMITFN_CLUSTERS={"clusters":[{"name":"gke","server":"https://10.0.0.1","gke":{}}]}`, "Runtime.ConfigError", `configuration error: ADMITFN_CLUSTERS: cluster "gke": gke: this function does not make GKE tokens; use a kubeconfig or tokenFile`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, err := lambdatest.NewRuntimeAPI()
			if err != nil {
				t.Fatal(err)
			}
			defer api.Close()
			fn := start(t, bootstrap, api, tc.env)
			select {
			case fe := <-api.InitErrors():
				if fe.Type != tc.errorType || fe.Kind != tc.errorType || !strings.HasPrefix(fe.Message, tc.message) {
					t.Errorf("init error %+v, want %s %q…", fe, tc.errorType, tc.message)
				}
			case <-time.After(patience):
				t.Fatalf("no init error reported; stdout:\n%s\nstderr:\n%s", fn.stdout, fn.stderr)
			}
			select {
			case <-fn.exited:
				if code := fn.cmd.ProcessState.ExitCode(); code != 1 {
					t.Errorf("exit code %d", code)
				}
			case <-time.After(patience):
				t.Fatal("the bootstrap did not exit after its init error")
			}
		})
	}
}

func TestOutsideLambda(t *testing.T) {
	cmd := exec.Command(bootstrap)
	cmd.Env = []string{"ADMITFN_POLICIES=../../policies/examples"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v", err)
	}
	if !strings.Contains(string(out), "AWS_LAMBDA_RUNTIME_API is not set") {
		t.Errorf("output: %s", out)
	}
}

func TestDeploymentPackage(t *testing.T) {
	// Same source, same bytes: zip the binary TestMain built, build and zip
	// again, and compare.
	var first bytes.Buffer
	if err := lambdabuild.Zip(&first, bootstrap); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(t.TempDir(), "admitfn.zip")
	if _, err := lambdabuild.BuildZip(context.Background(), lambdabuild.Package, runtime.GOARCH, second); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), again) {
		t.Fatalf("two builds of one source differ: %d and %d bytes", first.Len(), len(again))
	}

	zr, err := zip.NewReader(bytes.NewReader(again), int64(len(again)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" || zr.File[0].Mode() != 0o755 {
		t.Fatalf("zip entries: %v", zr.File)
	}
	rc, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}

	// Static: no interpreter, no shared libraries.
	ef, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("bootstrap has a %v program header: not static", p.Type)
		}
	}
	if libs, _ := ef.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("bootstrap links %v", libs)
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"-tags": "lambda.norpc", "CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux", "GOARCH": runtime.GOARCH} {
		if settings[k] != want {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], want)
		}
	}
	for _, d := range info.Deps {
		if d.Path == "cloud.google.com/go/storage" {
			t.Errorf("the bootstrap links %s: it reads S3 and directories only", d.Path)
		}
	}
	if _, ok := settings["vcs.revision"]; ok {
		t.Error("the bootstrap carries a VCS stamp: builds of one source at two commits would differ")
	}
}
