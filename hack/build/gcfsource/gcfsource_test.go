package gcfsource

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/admitfn/admitfn/test/cgrouptest"
	"github.com/admitfn/admitfn/test/syncbuf"
	"github.com/admitfn/admitfn/test/testbin"
)

// buildpackMain is what Cloud Functions' Go builder generates around a
// declaratively registered function: import the source root, start the
// framework.
const buildpackMain = `package main

import (
	"log"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	_ "github.com/admitfn/admitfn"
)

func main() {
	if err := funcframework.StartHostPort("127.0.0.1", os.Getenv("PORT")); err != nil {
		log.Fatal(err)
	}
}
`

var (
	source  []byte // the zip
	srcDir  string // the zip unpacked in an empty directory
	fnBin   string // the function built from it as Cloud Functions would
	runner  string // the local runner built from it
	repoDir string
)

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	var err error
	if repoDir, err = filepath.Abs("../../.."); err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp("", "admitfn-gcf-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	var buf bytes.Buffer
	if err := Write(context.Background(), repoDir, filepath.Join(repoDir, "policies/examples"), &buf); err != nil {
		return 0, err
	}
	source = buf.Bytes()
	srcDir = filepath.Join(tmp, "src")
	if err := unzip(source, srcDir); err != nil {
		return 0, err
	}
	// The build needs nothing but the zip: vendored modules, no proxy, no
	// workspace. Static and -trimpath as every binary the tests build
	// (testbin.Flags), so the vendored packages reuse what is in the build
	// cache: on a cold cache this alone would compile the dependency tree.
	if err := os.MkdirAll(filepath.Join(srcDir, "zzbuildpack"), 0o755); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(srcDir, "zzbuildpack", "main.go"), []byte(buildpackMain), 0o644); err != nil {
		return 0, err
	}
	fnBin = filepath.Join(tmp, "function")
	runner = filepath.Join(tmp, "runner")
	ctx, cancel := context.WithTimeout(context.Background(), testbin.Timeout)
	defer cancel()
	for _, args := range [][]string{
		{"build", "./..."},
		{"build", "-o", fnBin, "./zzbuildpack"},
		{"build", "-o", runner, "./functions/gcf/runner"},
	} {
		args = append(args[:1], append(slices.Clone(testbin.Flags), args[1:]...)...)
		fmt.Fprintf(os.Stderr, "gcfsource: go %s in the unpacked source, offline\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = srcDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=vendor", "GOPROXY=off", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("offline go %s in the unpacked source (within %v): %v\n%s", strings.Join(args, " "), testbin.Timeout, err, out)
		}
	}
	return m.Run(), nil
}

func unzip(data []byte, dir string) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	for _, f := range zr.File {
		path := filepath.Join(dir, filepath.FromSlash(f.Name))
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			return fmt.Errorf("zip entry %q escapes", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func TestSourceLayout(t *testing.T) {
	zr, err := zip.NewReader(bytes.NewReader(source), int64(len(source)))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
		if strings.HasSuffix(f.Name, "_test.go") && !strings.HasPrefix(f.Name, "vendor/") {
			t.Errorf("test file shipped: %s", f.Name)
		}
	}
	for _, want := range []string{"go.mod", "go.sum", "function.go", "vendor/modules.txt", "functions/gcf/gcf.go", "policies/01-basic.yaml",
		"vendor/github.com/GoogleCloudPlatform/functions-framework-go/funcframework/framework.go"} {
		if !names[want] {
			t.Errorf("the source zip lacks %s", want)
		}
	}
	for name := range names {
		// The function reads GCS and directories: no S3 client, nor the
		// package that opens every store.
		if strings.HasPrefix(name, "e2e/") || strings.HasPrefix(name, "functions/awslambda/") || strings.HasPrefix(name, "cmd/") ||
			strings.HasPrefix(name, "vendor/github.com/aws/") || strings.HasPrefix(name, "functions/bundle/store/s3store/") || strings.HasPrefix(name, "functions/bundle/store/anystore/") {
			t.Errorf("the source zip carries %s, which the function does not use", name)
		}
	}
	// One source, one zip.
	var again bytes.Buffer
	if err := Write(context.Background(), repoDir, filepath.Join(repoDir, "policies/examples"), &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(source, again.Bytes()) {
		t.Error("two source zips of one tree differ")
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// serve starts the built function in the unpacked source directory, as
// Cloud Functions runs it, and waits until it answers.
func serve(t *testing.T, dir string, env ...string) (base string, logs *syncbuf.Buffer) {
	t.Helper()
	return serveWith(t, fnBin, dir, append([]string{"FUNCTION_TARGET=Admitfn"}, env...)...)
}

func serveWith(t *testing.T, bin, dir string, env ...string) (base string, logs *syncbuf.Buffer) {
	t.Helper()
	return serveCmd(t, exec.Command(bin), dir, env...)
}

// serveCmd starts the function's command and waits for it to answer.
func serveCmd(t *testing.T, cmd *exec.Cmd, dir string, env ...string) (base string, logs *syncbuf.Buffer) {
	t.Helper()
	port := freePort(t)
	cmd.Dir = dir
	cmd.Env = append([]string{"PORT=" + port, "K_SERVICE=admitfn", "GOOGLE_CLOUD_PROJECT=demo-project"}, env...)
	logs = &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	base = "http://127.0.0.1:" + port
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base, logs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the function did not start:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestFunctionAnswersReviews(t *testing.T) {
	base, logs := serve(t, srcDir)
	golden := func(name string) any {
		b, err := os.ReadFile(filepath.Join(repoDir, "adapters/httpadapter/testdata", name+".response.json"))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		json.Unmarshal(b, &v)
		return v
	}
	request := func(name string) string {
		b, err := os.ReadFile(filepath.Join(repoDir, "adapters/httpadapter/testdata", name+".request.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, path, contentType, body string
		code                          int
		want                          any // the decoded body
	}{
		{"allow v1beta1", "/validate/dd1dcf98e3?timeout=10s", "application/json", request("basic-allow-v1beta1"), 200, golden("basic-allow-v1beta1")},
		{"deny", "/validate/dd1dcf98e3?timeout=10s", "application/json", request("basic-deny"), 200, golden("basic-deny")},
		{"warn", "/validate?timeout=10s", "application/json", request("warn"), 200, golden("warn")},
		{"mutate", "/mutate/f678019434?timeout=10s", "application/json", request("mutate-sidecar"), 200, golden("mutate-sidecar")},
		{"malformed review", "/validate", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, 400,
			map[string]any{"apiVersion": "v1", "kind": "Status", "metadata": map[string]any{}, "status": "Failure", "reason": "BadRequest", "code": float64(400),
				"message": "malformed AdmissionReview: request is missing"}},
		{"wrong content type", "/validate", "text/plain", request("warn"), 415,
			map[string]any{"apiVersion": "v1", "kind": "Status", "metadata": map[string]any{}, "status": "Failure", "reason": "UnsupportedMediaType", "code": float64(415),
				"message": `content type "text/plain" not supported: send application/json`}},
		{"unknown route", "/admit", "application/json", request("warn"), 404,
			map[string]any{"apiVersion": "v1", "kind": "Status", "metadata": map[string]any{}, "status": "Failure", "reason": "NotFound", "code": float64(404),
				"message": `no route "/admit": reviews are served on /validate[/<group>] and /mutate[/<group>]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", base+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			req.Header.Set("X-Cloud-Trace-Context", "105445aa7843bc8bf206b12000100000/1;o=1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var got any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("HTTP %d body %q: %v", resp.StatusCode, body, err)
			}
			if resp.StatusCode != tc.code || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("HTTP %d %s\nwant %d %v", resp.StatusCode, body, tc.code, tc.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}

	// Cloud Logging lines: severity in upper case, message, time; review
	// lines carry the trace, the span and the execution id.
	reviews := 0
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue // the framework flushes with empty lines on Cloud Functions
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		sev, _ := m["severity"].(string)
		if sev != strings.ToUpper(sev) || sev == "" || m["message"] == nil || m["level"] != nil {
			t.Errorf("log line: %s", line)
		}
		if _, err := time.Parse(time.RFC3339, fmt.Sprint(m["time"])); err != nil {
			t.Errorf("time: %s", line)
		}
		if m["message"] == "review" || m["message"] == "rejected review request" {
			reviews++
			labels, _ := m["logging.googleapis.com/labels"].(map[string]any)
			if m["logging.googleapis.com/trace"] != "projects/demo-project/traces/105445aa7843bc8bf206b12000100000" ||
				m["logging.googleapis.com/spanId"] != "1" || labels["execution_id"] == nil {
				t.Errorf("review line without the trace: %s", line)
			}
		}
		if sev == "WARNING" && m["status"] == nil {
			t.Errorf("warning line: %s", line)
		}
	}
	if reviews != 6 { // the unknown route is answered before a review starts
		t.Errorf("%d review lines:\n%s", reviews, logs)
	}
}

// An instance's soft memory limit is nine tenths of its container's memory
// (here a cgroup of 512 MiB), given in the ready line, which also says
// which admitfn the function is.
func TestMemoryLimitFromTheInstance(t *testing.T) {
	_, logs := serveCmd(t, cgrouptest.Command(t, 512<<20, fnBin), srcDir, "FUNCTION_TARGET=Admitfn")
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"message":"ready"`) {
			if !strings.Contains(line, `"memory_limit_mib":460,"memory_limit_from":"cgroup"`) || !strings.Contains(line, `"kubernetes":"v1.37.2"`) {
				t.Errorf("ready line: %s", line)
			}
			return
		}
	}
	t.Errorf("no ready line:\n%s", logs)
}

func TestLocalRunnerFromTheSource(t *testing.T) {
	// The documented local run: the runner in the unpacked source, on
	// 127.0.0.1, FUNCTION_TARGET defaulting to the entry point.
	base, logs := serveWith(t, runner, srcDir, "LOCAL_ONLY=true")
	if !strings.Contains(logs.String(), "serving Admitfn on 127.0.0.1:") {
		t.Errorf("runner output:\n%s", logs)
	}
	body, err := os.ReadFile(filepath.Join(repoDir, "adapters/httpadapter/testdata/warn.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/validate?timeout=10s", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	golden, _ := os.ReadFile(filepath.Join(repoDir, "adapters/httpadapter/testdata/warn.response.json"))
	var g, w any
	json.Unmarshal(got, &g)
	json.Unmarshal(golden, &w)
	if resp.StatusCode != 200 || !reflect.DeepEqual(g, w) {
		t.Errorf("HTTP %d %s", resp.StatusCode, got)
	}
}

func TestBundleOfTheDeployedSource(t *testing.T) {
	// On Cloud Functions the uploaded source sits in
	// serverless_function_source_code/ of the working directory.
	work := t.TempDir()
	if err := os.Symlink(srcDir, filepath.Join(work, "serverless_function_source_code")); err != nil {
		t.Fatal(err)
	}
	_, logs := serve(t, work)
	if !strings.Contains(logs.String(), `"policies":"serverless_function_source_code/policies","bundle":`) {
		t.Errorf("the function did not load the shipped bundle:\n%s", logs)
	}
}

func TestBadBundleKeepsTheInstanceFromStarting(t *testing.T) {
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "p.yaml"), []byte("kind: ValidatingAdmissionPolicy\napiVersion: admissionregistration.k8s.io/v1\nmetadata: {name: x}\nspec: {validations: [{expression: '1 +'}]}\n"), 0o644)
	cmd := exec.Command(fnBin)
	cmd.Dir = srcDir
	cmd.Env = []string{"PORT=" + freePort(t), "FUNCTION_TARGET=Admitfn", "ADMITFN_POLICIES=" + bad}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v: %s", err, out)
	}
	// The loader's own ERROR line comes first; the last says why the
	// instance stops.
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var m map[string]any
	if json.Unmarshal(lines[len(lines)-1], &m) != nil || m["severity"] != "CRITICAL" || !strings.HasPrefix(fmt.Sprint(m["message"]), "admitfn cannot start: load "+bad) {
		t.Errorf("output: %s", out)
	}
}

// The function reads GCS and directories: an S3 location stops it with a
// reason, not a load that never succeeds.
func TestS3LocationRefused(t *testing.T) {
	cmd := exec.Command(fnBin)
	cmd.Dir = srcDir
	cmd.Env = []string{"PORT=" + freePort(t), "FUNCTION_TARGET=Admitfn", "ADMITFN_POLICIES=s3://b/p"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v: %s", err, out)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var m map[string]any
	want := "admitfn cannot start: configuration error: s3://b/p: storage backend not built in: this function reads gs:// and directories"
	if json.Unmarshal(lines[len(lines)-1], &m) != nil || m["severity"] != "CRITICAL" || m["message"] != want {
		t.Errorf("output: %s\nwant the last line's message %q", out, want)
	}
}
