package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/policy/slowpolicy"
	"github.com/admitfn/admitfn/test/cgrouptest"
	"github.com/admitfn/admitfn/test/syncbuf"
	"github.com/admitfn/admitfn/test/testbin"
)

const examples = "../../policies/examples"

// start runs the server until the test ends and returns its address.
func start(t *testing.T, args []string, env map[string]string) (addr string, logs *syncbuf.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs = &syncbuf.Buffer{}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, func(k string) string { return env[k] }, logs, func(a string) { ready <- a })
	}()
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("server exited: %v\n%s", err, logs)
	case <-time.After(patience):
		t.Fatal("server did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("shutdown: %v", err)
			}
		case <-time.After(patience):
			t.Error("server did not shut down")
		}
	})
	return addr, logs
}

func TestServesTheExampleBundle(t *testing.T) {
	addr, logs := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples}, nil)
	body, err := os.ReadFile("../../adapters/httpadapter/testdata/audit-annotations.request.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr+"/validate?timeout=10s", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		APIVersion string
		Response   struct {
			UID              string
			Allowed          bool
			AuditAnnotations map[string]string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || got.APIVersion != "admission.k8s.io/v1" || !got.Response.Allowed || got.Response.UID != "0a1b2c3d-0004-4000-8000-000000000004" ||
		got.Response.AuditAnnotations["high-replica-count.example.com_high-replica-count"] != "Deployment spec.replicas set to 128" {
		t.Errorf("HTTP %d %+v", resp.StatusCode, got)
	}
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ok: bundle "} {
		r, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || !strings.HasPrefix(string(b), want) {
			t.Errorf("GET %s = %d %q", path, r.StatusCode, b)
		}
	}
	if !strings.Contains(logs.String(), "serving plain HTTP: kube-apiserver only calls webhooks over HTTPS") {
		t.Errorf("no plain-HTTP warning in logs:\n%s", logs)
	}
	if !strings.Contains(logs.String(), `"route":"/validate/b11fbe337a","failure_policy":"Fail","bindings":3`) {
		t.Errorf("groups not logged:\n%s", logs)
	}
	if !strings.Contains(logs.String(), `"route":"/mutate/796c055a56","failure_policy":"Fail","bindings":4,"reinvocation_policy":"Never"`) {
		t.Errorf("mutating group not logged with its bindings:\n%s", logs)
	}
}

// serving is a self-signed certificate and key in files, and a client that
// trusts the certificate, for a server under test.
func serving(t *testing.T) (certFile, keyFile string, client *http.Client) {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certFile, certPEM, 0o600)
	os.WriteFile(keyFile, keyPEM, 0o600)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, &http.Client{Timeout: patience, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
}

func TestServesHTTPS(t *testing.T) {
	certFile, keyFile, client := serving(t)
	// Configured through the environment, as in a container.
	addr, logs := start(t, nil, map[string]string{
		"ADMITFN_ADDR": "127.0.0.1:0", "ADMITFN_POLICIES": examples, "ADMITFN_TLS_CERT": certFile, "ADMITFN_TLS_KEY": keyFile,
	})
	resp, err := client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Errorf("HTTPS /healthz = %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	if strings.Contains(logs.String(), "plain HTTP") {
		t.Error("warned about plain HTTP while serving HTTPS")
	}
}

func TestBadBundleFailsStartWithEveryError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "object.spec +"}, {expression: "nope"}]
`), 0o644)
	err := run(context.Background(), []string{"--addr", "127.0.0.1:0", "--policies", dir}, func(string) string { return "" }, io.Discard, nil)
	if err == nil {
		t.Fatal("started with a broken bundle")
	}
	for _, want := range []string{"load " + dir + ": 2 errors in policy bundle:", "p.yaml: policy p: spec.validations[0].expression: compilation failed:", "p.yaml: policy p: spec.validations[1].expression: compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestConfig(t *testing.T) {
	env := map[string]string{"ADMITFN_ADDR": "0.0.0.0:9000", "ADMITFN_POLICIES": "/from/env"}
	cfg, err := parseConfig([]string{"--policies", "/from/flag"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.addr != "0.0.0.0:9000" || cfg.bundle.Policies != "/from/flag" || cfg.logLevel != "info" {
		t.Errorf("config = %+v", cfg)
	}
	cfg, _ = parseConfig(nil, func(string) string { return "" }, io.Discard)
	if cfg.addr != "127.0.0.1:8080" || cfg.bundle.Policies != "policies/examples" {
		t.Errorf("defaults = %+v", cfg)
	}
	if cfg, err := parseConfig([]string{"-p", "/short"}, func(string) string { return "" }, io.Discard); err != nil || cfg.bundle.Policies != "/short" {
		t.Errorf("-p /short: %q, %v", cfg.bundle.Policies, err)
	}
	for _, args := range [][]string{{"--tls-cert", "c.pem"}, {"extra"}, {"-nope"}, {"--addr", "x", "extra", "--policies", "y"}} {
		if _, err := parseConfig(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseConfig(%v) accepted", args)
		}
	}
	if err := run(context.Background(), []string{"--log-level", "loud"}, func(string) string { return "" }, io.Discard, nil); err == nil || err.Error() != `invalid log level "loud": want debug, info, warn or error` {
		t.Errorf("bad log level: %v", err)
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "admitfn-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// patience bounds every wait for the server to start, stop or log: a
// safety net for a loaded machine, not a measure of speed.
const patience = 2 * time.Minute

// versionLine is what -version prints: the build stamps a module version
// and revision when it runs in a git checkout (Go's -buildvcs default).
var versionLine = regexp.MustCompile(`^admitfn (\(devel\)|v\S+) \(revision (unknown|[0-9a-f]+(-dirty)?|src-[0-9a-f]{16}), Kubernetes v1\.37\.2, ` + regexp.QuoteMeta(runtime.Version()) + `\)\n$`)

// serverBinary is the server as make builds it for the tests.
func serverBinary(t *testing.T) string {
	t.Helper()
	return testbin.Path(t, "server")
}

func TestMain(m *testing.M) { os.Exit(testbin.Run(m)) }

// The built binary: SIGTERM shuts it down cleanly (exit 0); a bad bundle
// makes it exit 1 with the load errors on stderr.
func TestProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := serverBinary(t)

	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--policies", examples)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(patience)
	for !strings.Contains(stderr.String(), `"message":"serving"`) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("not serving after %v:\n%s", patience, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr.String(), `"message":"shutting down"`) {
		t.Errorf("no shutdown log:\n%s", stderr)
	}
	if !regexp.MustCompile(`"version":"[^"]+","revision":"([0-9a-f]*(-dirty)?|src-[0-9a-f]{16})","kubernetes":"v1.37.2"`).MatchString(stderr.String()) {
		t.Errorf("the serving line does not say which admitfn this is:\n%s", stderr)
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || !versionLine.MatchString(string(out)) {
		t.Errorf("server --version: %q, %v", out, err)
	}

	// A wrong command line exits 2 and says what is wrong, as the CLI.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-policies", "x"}, "admitfn server: -policies: long flags take two dashes: --policies\n"},
		{[]string{"--polices", "x"}, "admitfn server: unknown flag: --polices\n"},
		{[]string{"--read-header-timeout", "45"}, "admitfn server: invalid argument \"45\" for \"--read-header-timeout\" flag: time: missing unit in duration \"45\"\n"},
		{[]string{"--tls-cert", "c.pem"}, "admitfn server: --tls-cert and --tls-key go together\n"},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || string(out) != tc.want+"Run 'server --help' for usage.\n" {
			t.Errorf("server %v: %v\n%s", tc.args, err, out)
		}
	}

	out, err := exec.Command(bin, "--policies", t.TempDir()).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("empty bundle dir: err %v", err)
	}
	if !strings.Contains(string(out), "admitfn server: load ") || !strings.Contains(string(out), "no bundle: neither a manifest nor any .yaml, .yml or .json file") {
		t.Errorf("output: %s", out)
	}
}

func TestDeadlineBoundsASlowReview(t *testing.T) {
	// kube-apiserver's ?timeout= is the webhook's timeoutSeconds; the answer
	// leaves before it with a 504 Status, after a tenth of it as margin.
	addr, logs := start(t, []string{"--addr", "127.0.0.1:0", "--policies", slowpolicy.WriteDir(t)}, nil)
	// Left alone, the review runs for tens of seconds and is allowed: the
	// 504 is the deadline's doing. (How much margin it keeps before the
	// caller gives up is the handler's unit test.)
	client := &http.Client{Timeout: patience}
	resp, err := client.Post("http://"+addr+slowpolicy.Route+"?timeout=4s", "application/json", bytes.NewReader(slowpolicy.Review("slow-1")))
	if err != nil {
		t.Fatalf("no answer before the caller gave up: %v\n%s", err, logs)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	const want = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"review of request slow-1 did not finish before the deadline","reason":"Timeout","code":504}`
	if resp.StatusCode != http.StatusGatewayTimeout || strings.TrimSpace(string(body)) != want {
		t.Errorf("HTTP %d %s\nwant 504 %s", resp.StatusCode, body, want)
	}
	if !strings.Contains(logs.String(), `"status":504`) || !strings.Contains(logs.String(), "review timed out") {
		t.Errorf("timeout not logged:\n%s", logs)
	}
}

// Two policies failing under Audit in one review make kube-apiserver's
// dispatcher warn through klog, quoting both failures' messages, which here
// quote a Secret's value. The built server's stderr holds its own review
// line naming the policies, and nothing of the Secret.
func TestLibraryLogsStayQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const secret = "aHVudGVyMi1kby1ub3QtbG9n" // the Secret's data.password
	dir := t.TempDir()
	var bundle strings.Builder
	for _, name := range []string{"audit-one", "audit-two"} {
		bundle.WriteString(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ` + name + `}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}]
  validations:
  - expression: "false"
    messageExpression: "'password is ' + object.data.password"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ` + name + `}
spec: {policyName: ` + name + `, validationActions: [Audit]}
---
`)
	}
	if err := os.WriteFile(filepath.Join(dir, "audit.yaml"), []byte(bundle.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := serverBinary(t)
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--policies", dir)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var addr string
	for deadline := time.Now().Add(patience); addr == ""; time.Sleep(50 * time.Millisecond) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Message, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == "serving" {
				addr = l.Addr
			}
		}
		if time.Now().After(deadline) || strings.Contains(stderr.String(), "admitfn server:") {
			t.Fatalf("not serving:\n%s", stderr)
		}
	}
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",
		"kind":{"group":"","version":"v1","kind":"Secret"},"resource":{"group":"","version":"v1","resource":"secrets"},
		"name":"db","namespace":"shop","operation":"CREATE","userInfo":{"username":"alice"},
		"object":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"shop"},"data":{"password":"` + secret + `"}}}}`
	resp, err := http.Post("http://"+addr+"/validate", "application/json", strings.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"allowed":true`) || !strings.Contains(string(body), secret) {
		// The audit annotation carries the message to the apiserver's
		// audit log, as upstream's does: the answer is where it belongs.
		t.Fatalf("HTTP %d: %s", resp.StatusCode, body)
	}
	deadline := time.Now().Add(patience)
	for !strings.Contains(stderr.String(), `"failed_policies":["audit-one","audit-two"]`) {
		if time.Now().After(deadline) {
			t.Fatalf("no review line naming both policies:\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(stderr.String(), secret) {
		t.Fatalf("the server's stderr holds the Secret's value:\n%s", stderr)
	}
}

// In a container with a memory limit (here a cgroup of 256 MiB), the
// server's soft memory limit is nine tenths of it, and says so; GOMEMLIMIT
// rules over it. Under either the collector is paced to the limit, unless
// GOGC is set.
func TestMemoryLimitFromTheContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := serverBinary(t)
	for _, c := range []struct {
		env   []string
		want  string
		paced string // in the first pacing line; "" for none
	}{
		// Half of 230 MiB is many times the example bundle's heap: the
		// most headroom.
		{nil, `"memory_limit_mib":230,"memory_limit_from":"cgroup"`, `"gc_percent":400,`},
		{[]string{"GOMEMLIMIT=100MiB"}, `"memory_limit_mib":100,"memory_limit_from":"GOMEMLIMIT"`, `"memory_limit_mib":100,`},
		{[]string{"GOGC=100"}, `"memory_limit_mib":230,"memory_limit_from":"cgroup"`, ""},
	} {
		cmd := cgrouptest.Command(t, 256<<20, bin, "--addr", "127.0.0.1:0", "--policies", examples)
		cmd.Env = append(os.Environ(), c.env...)
		stderr := &syncbuf.Buffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var serving string
		for deadline := time.Now().Add(patience); serving == ""; time.Sleep(20 * time.Millisecond) {
			for _, line := range strings.Split(stderr.String(), "\n") {
				if strings.Contains(line, `"message":"serving"`) {
					serving = line
				}
			}
			if time.Now().After(deadline) {
				break
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("%v: exit: %v\n%s", c.env, err, stderr)
		}
		if !strings.Contains(serving, c.want) {
			t.Errorf("%v: serving line %q, want it to hold %s\n%s", c.env, serving, c.want, stderr)
		}
		var pacing []string
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(line, `"message":"collector paced to the memory limit"`) {
				pacing = append(pacing, line)
			}
		}
		if c.paced == "" && len(pacing) != 0 || c.paced != "" && (len(pacing) == 0 || !strings.Contains(pacing[0], c.paced)) {
			t.Errorf("%v: pacing lines %q, want the first to hold %q", c.env, pacing, c.paced)
		}
	}
}

// configMapVolume lays the example bundle out as kubelet mounts a
// ConfigMap: each file a link into ..data, a link to a hidden directory.
func configMapVolume(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ts := "..2026_11_25_10_00_00.1234"
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(examples)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(examples, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ts, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("..data/"+e.Name(), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The server reads a bundle directory through the loader the CLI uses: a
// ConfigMap volume serves the bundle it holds (it used to stop the server
// from starting), and a link out of the directory stops the start, loudly,
// instead of being skipped (which allowed what admitfn test denied).
func TestBundleDirectoryWithLinks(t *testing.T) {
	vol := configMapVolume(t)
	addr, logs := start(t, []string{"--addr", "127.0.0.1:0", "--policies", vol}, nil)
	direct, _ := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples}, nil)
	body, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		t.Fatal(err)
	}
	answer := func(addr string) string {
		resp, err := http.Post("http://"+addr+"/validate?timeout=10s", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, got)
	}
	got, want := answer(addr), answer(direct)
	if got != want || !strings.Contains(got, `"allowed":false`) {
		t.Errorf("from the volume: %s\nfrom the directory: %s\nlogs:\n%s", got, want, logs)
	}
	sources, err := policy.ReadFS(os.DirFS(examples), ".")
	if err != nil {
		t.Fatal(err)
	}
	if id := policy.ID(sources); !strings.Contains(logs.String(), `"bundle":"`+id+`"`) {
		t.Errorf("the volume did not serve the example bundle %s:\n%s", id, logs)
	}

	outside := filepath.Join(t.TempDir(), "extra.yaml")
	os.WriteFile(outside, []byte("kind: x\n"), 0o644)
	if err := os.Symlink(outside, filepath.Join(vol, "extra.yaml")); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"--addr", "127.0.0.1:0", "--policies", vol}, func(string) string { return "" }, io.Discard, nil)
	wantErr := "load " + vol + ": list: " + vol + ": extra.yaml: extra.yaml -> " + outside + ": symbolic link leads outside the bundle directory (absolute targets are not followed)"
	if err == nil || err.Error() != wantErr {
		t.Errorf("start with a link out of the bundle: %v\nwant %s", err, wantErr)
	}
}

// --exact-cost defaults to ADMITFN_EXACT_COST, which must be true or false.
func TestExactCostFlag(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string { return map[string]string{"ADMITFN_EXACT_COST": v}[k] }
	}
	for _, tc := range []struct {
		args []string
		env  string
		want bool
	}{{nil, "", false}, {nil, "true", true}, {[]string{"--exact-cost"}, "", true}, {[]string{"--exact-cost=false"}, "true", false}} {
		c, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err != nil || c.bundle.ExactCost != tc.want {
			t.Errorf("%v with ADMITFN_EXACT_COST=%q: %v %v, want %v", tc.args, tc.env, c.bundle.ExactCost, err, tc.want)
		}
	}
	if _, err := parseConfig(nil, env("yes"), io.Discard); err == nil || err.Error() != `ADMITFN_EXACT_COST="yes": want true or false` {
		t.Errorf("ADMITFN_EXACT_COST=yes: %v", err)
	}
}

// The serving line says whether bundles must be signed; a key setting that
// holds no key stops the start instead of turning verification off.
func TestBundleKeySetting(t *testing.T) {
	_, logs := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples}, nil)
	if !strings.Contains(logs.String(), `"signatures_required":false,`) {
		t.Errorf("the serving line does not say signatures are not required:\n%s", logs)
	}
	const noKey = "configuration error: ADMITFN_BUNDLE_PUBLIC_KEY is set but holds no key: set it to the public keys bundles must be signed with, or unset it to load unsigned bundles"
	err := run(context.Background(), []string{"--addr", "127.0.0.1:0", "--policies", examples, "--bundle-public-key", ""}, func(string) string { return "" }, io.Discard, nil)
	if err == nil || err.Error() != noKey {
		t.Errorf("--bundle-public-key '': %v", err)
	}
	if testing.Short() {
		return
	}
	cmd := exec.Command(serverBinary(t), "--addr", "127.0.0.1:0", "--policies", examples)
	cmd.Env = append(os.Environ(), "ADMITFN_BUNDLE_PUBLIC_KEY=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "admitfn server: "+noKey+"\n") {
		t.Errorf("ADMITFN_BUNDLE_PUBLIC_KEY set empty: %v\n%s", err, out)
	}
}

// SIGHUP checks the policy store at once, with refresh off: a changed
// bundle serves from then on, an unchanged one is logged unchanged, and
// one that does not load leaves the one serving.
func TestHangupChecksTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	policy, err := os.ReadFile(filepath.Join(examples, "01-basic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "policy.yaml")
	write := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(policy)
	review, err := os.ReadFile("../../adapters/httpadapter/testdata/basic-deny.request.json")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(serverBinary(t), "--addr", addr, "--policies", dir, "--refresh-interval", "0")
	logs := &syncbuf.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// waitFor waits for the n-th log line holding s.
	waitFor := func(s string, n int) string {
		t.Helper()
		for deadline := time.Now().Add(patience); ; time.Sleep(20 * time.Millisecond) {
			var found []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, s) {
					found = append(found, line)
				}
			}
			if len(found) >= n {
				return found[n-1]
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %d-th %q in the logs:\n%s", n, s, logs)
			}
		}
	}
	// allowed sends the review to the group the last bundle loaded logged.
	allowed := func() bool {
		t.Helper()
		lines := strings.Split(logs.String(), "\n")
		route := ""
		for _, line := range lines {
			if m := regexp.MustCompile(`"route":"(/validate/[0-9a-f]+)".*"message":"policy group"`).FindStringSubmatch(line); m != nil {
				route = m[1]
			}
		}
		resp, err := http.Post("http://"+addr+route, "application/json", bytes.NewReader(review))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct{ Response struct{ Allowed bool } }
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
			t.Fatalf("HTTP %d, %v", resp.StatusCode, err)
		}
		return got.Response.Allowed
	}
	hangup := func(n int) string {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		return waitFor(`"message":"policy store checked on SIGHUP"`, n)
	}

	waitFor(`"message":"serving"`, 1)
	if allowed() {
		t.Fatal("the first bundle allowed 10 replicas")
	}
	first := waitFor(`"message":"policy bundle loaded"`, 1)

	write([]byte(strings.Replace(string(policy), "object.spec.replicas <= 5", "object.spec.replicas <= 500", 1)))
	if line := hangup(1); !strings.Contains(line, `"level":"info"`) || !strings.Contains(line, `"changed":true`) {
		t.Errorf("a changed bundle: %s", line)
	}
	if second := waitFor(`"message":"policy bundle loaded"`, 2); second == first || !strings.Contains(second, `"previous_bundle"`) {
		t.Errorf("the second load: %s", second)
	}
	if !allowed() {
		t.Error("the changed bundle does not serve: 10 replicas denied")
	}

	if line := hangup(2); !strings.Contains(line, `"changed":false`) {
		t.Errorf("an unchanged bundle: %s", line)
	}

	write([]byte("kind: ValidatingAdmissionPolicy\nspec: [\n"))
	if line := hangup(3); !strings.Contains(line, `"level":"warn"`) || !strings.Contains(line, `"changed":false`) || !strings.Contains(line, `"error":"`) {
		t.Errorf("a bundle that does not load: %s", line)
	}
	if !allowed() {
		t.Error("a bundle that does not load replaced the one serving")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, logs)
	}
}

// Finding: the server died on a SIGHUP in its first 50–100 ms, while the
// packages it imports ran their init functions, before run caught the
// signal. Package hangup catches it before any of Kubernetes' packages
// initializes: the runtime's trace of init functions shows its order.
func TestHangupIsCaughtBeforeTheImportsInitialize(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	cmd := exec.Command(serverBinary(t), "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	hangupAt, firstKube := -1, -1
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "init" {
			continue
		}
		switch {
		case f[1] == "github.com/admitfn/admitfn/functions/internal/hangup":
			hangupAt = i
		case strings.HasPrefix(f[1], "k8s.io/") && firstKube < 0:
			firstKube = i
		}
	}
	if hangupAt < 0 || firstKube < 0 || hangupAt > firstKube {
		t.Fatalf("hangup initializes at line %d, the first k8s.io package at %d: want hangup first\n%s", hangupAt, firstKube, out)
	}
}
