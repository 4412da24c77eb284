// Package e2e runs admitfn behind a real kube-apiserver (with etcd): the only
// real client of an admission webhook. See CONTRIBUTING.md, "End-to-end tests".
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/admitfn/admitfn/adapters/awslambda/lambdatest"
	"github.com/admitfn/admitfn/test/doccheck"
	"github.com/admitfn/admitfn/test/testbin"
)

// KubeVersion is the kube-apiserver the suite runs (hack/tools/kube-apiserver).
const KubeVersion = "v1.37.2"

// cluster is the shared etcd + kube-apiserver of a test run.
type cluster struct {
	dir       string
	config    *rest.Config
	auditLog  string
	caPEM     []byte // signs admitfn's serving certificate
	certFile  string
	keyFile   string
	serverBin string
	cliBin    string
	lambdaBin string // functions/awslambda built as `make lambda` builds it
	gcfBin    string // functions/gcf's functions-framework runner
	procs     []*exec.Cmd
	// kube-apiserver sends authToken to a webhook at authAddr, as the
	// kubeconfig of docs/security.md says.
	authAddr, authToken string
	// apiserverArgs are the flags of a kube-apiserver of the suite
	// (apiserver), for more than the one cluster.
	apiserverBin, adminToken string
	apiserverArgs            func(name, etcdPrefix string, port int, auditLog string) []string
}

var kube *cluster

func TestMain(m *testing.M) {
	code, err := runMain(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		if os.Getenv("ADMITFN_E2E") == "required" {
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "e2e: skipped (run `make e2e` to install etcd and build kube-apiserver)")
		os.Exit(0)
	}
	os.Exit(code)
}

func runMain(m *testing.M) (int, error) {
	etcdBin, err := exec.LookPath(envOr("ADMITFN_ETCD", "etcd"))
	if err != nil {
		return 0, fmt.Errorf("etcd not found: %w", err)
	}
	apiserverBin := os.Getenv("ADMITFN_KUBE_APISERVER")
	if apiserverBin == "" {
		return 0, errors.New("ADMITFN_KUBE_APISERVER is not set")
	}
	if _, err := os.Stat(apiserverBin); err != nil {
		return 0, fmt.Errorf("kube-apiserver: %w", err)
	}
	dir, err := os.MkdirTemp("", "admitfn-e2e-")
	if err != nil {
		return 0, err
	}
	c := &cluster{dir: dir}
	defer func() {
		c.stop()
		if os.Getenv("ADMITFN_E2E_KEEP") == "" {
			os.RemoveAll(dir)
		}
	}()
	if err := c.build(); err != nil {
		return 0, err
	}
	if err := c.start(etcdBin, apiserverBin); err != nil {
		return 0, err
	}
	kube = c
	return m.Run(), nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// build finds the binaries the suite runs: make's, or built now.
func (c *cluster) build() error {
	for _, b := range []struct {
		path *string
		name string
	}{{&c.serverBin, "server"}, {&c.cliBin, "admitfn"}, {&c.gcfBin, "gcf"}, {&c.lambdaBin, "bootstrap"}} {
		p, err := testbin.Get(b.name)
		if err != nil {
			return err
		}
		*b.path = p
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *cluster) spawn(name string, bin string, args ...string) (*exec.Cmd, error) {
	logFile, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group: everything is killed on the way out, even on panic.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	return cmd, nil
}

func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		p.Wait()
	}
	c.procs = nil
}

func (c *cluster) logTail(name string) string {
	data, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

func (c *cluster) start(etcdBin, apiserverBin string) error {
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if _, err := c.spawn("etcd", etcdBin, "--name", "e2e", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "e2e="+peerURL,
		"--quota-backend-bytes", "1073741824", "--log-level", "warn"); err != nil {
		return err
	}
	if err := waitFor(func() error { return httpOK(http.DefaultClient, etcdURL+"/health", "") }); err != nil {
		return fmt.Errorf("etcd not healthy: %w\n%s", err, c.logTail("etcd"))
	}

	// Credentials: a static admin token, a service-account key, an audit
	// policy, and the CA admitfn's serving certificate comes from.
	const token = "admitfn-e2e-admin-token"
	tokens := filepath.Join(c.dir, "tokens.csv")
	os.WriteFile(tokens, []byte(token+`,admin,admin-uid,"system:masters"`+"\n"), 0o600)
	saKey := filepath.Join(c.dir, "sa.key")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}), 0o600)
	auditPolicy := filepath.Join(c.dir, "audit-policy.yaml")
	os.WriteFile(auditPolicy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: [configmaps, namespaces, pods, services]
  - group: apps
    resources: [deployments, deployments/scale, statefulsets]
  - group: scheduling.k8s.io
    resources: [priorityclasses]
  - group: rules.admitfn.io
    resources: [limits]
  - group: authorization.k8s.io
    resources: [subjectaccessreviews]
- level: None
`), 0o600)
	c.auditLog = filepath.Join(c.dir, "audit.log")
	if err := c.makeServingCert(); err != nil {
		return err
	}

	admissionConfig, err := c.writeAdmissionConfig()
	if err != nil {
		return err
	}

	c.apiserverArgs = func(name, etcdPrefix string, port int, auditLog string) []string {
		return []string{"--admission-control-config-file", admissionConfig,
			"--etcd-servers", etcdURL, "--etcd-prefix", etcdPrefix,
			"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(port),
			// Since 1.37 the endpoint reconciler refuses a loopback address; the
			// tests never reach the apiserver through the kubernetes Service.
			"--endpoint-reconciler-type", "none",
			"--cert-dir", filepath.Join(c.dir, name+"-certs"),
			"--token-auth-file", tokens,
			"--authorization-mode", "RBAC",
			"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
			"--service-account-issuer", "https://kubernetes.default.svc",
			"--service-cluster-ip-range", "10.96.0.0/24",
			"--allow-privileged", // as on real clusters: Pod Security decides, not a blanket ban
			"--audit-policy-file", auditPolicy, "--audit-log-path", auditLog, "--audit-log-format", "json",
			"--audit-log-mode", "blocking",
			"--runtime-config", "admissionregistration.k8s.io/v1beta1=true",
			"--v", "1",
		}
	}
	c.apiserverBin, c.adminToken = apiserverBin, token
	c.config, _, err = c.apiserver("kube-apiserver", "/registry", c.auditLog)
	return err
}

// apiserver starts a kube-apiserver on the suite's etcd, its objects under
// etcdPrefix, and returns an admin's configuration once it is ready, and
// how to stop it before the suite ends.
func (c *cluster) apiserver(name, etcdPrefix, auditLog string) (*rest.Config, func(), error) {
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	cmd, err := c.spawn(name, c.apiserverBin, c.apiserverArgs(name, etcdPrefix, port, auditLog)...)
	if err != nil {
		return nil, nil, err
	}
	stop := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	config := &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", port),
		BearerToken:     c.adminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             200, Burst: 400,
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	if err := waitFor(func() error { return httpOK(insecure, config.Host+"/readyz", c.adminToken) }); err != nil {
		return nil, nil, fmt.Errorf("%s not ready: %w\n%s", name, err, c.logTail(name))
	}
	return config, stop, nil
}

// makeServingCert creates a CA and a certificate for 127.0.0.1 signed by it.
// writeAdmissionConfig points the webhook admission plugins at the
// kubeconfig docs/security.md shows, for a webhook at authAddr.
func (c *cluster) writeAdmissionConfig() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	c.authAddr, c.authToken = fmt.Sprintf("127.0.0.1:%d", port), "admitfn-e2e-webhook-token"
	blocks, err := doccheck.Marked("docs/security.md", "TestWebhookAuthenticatesWithABearerToken")
	if err != nil {
		return "", err
	}
	if len(blocks) != 2 {
		return "", fmt.Errorf("docs/security.md: %d blocks of the admission configuration and its kubeconfig, want 2", len(blocks))
	}
	kubeconfig := filepath.Join(c.dir, "admitfn-kubeconfig.yaml")
	admission, err := fill(blocks[0], [][2]string{{"/etc/kubernetes/admitfn-kubeconfig.yaml", kubeconfig}}, 2)
	if err != nil {
		return "", err
	}
	user, err := fill(blocks[1], [][2]string{{"admitfn.internal:8443", c.authAddr}, {"<one line of the --auth-tokens-file>", c.authToken}}, 1)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(kubeconfig, []byte(user), 0o600); err != nil {
		return "", err
	}
	file := filepath.Join(c.dir, "admission.yaml")
	return file, os.WriteFile(file, []byte(admission), 0o600)
}

// fill replaces each placeholder of a documentation block, which
// must occur there n times.
func fill(b doccheck.Block, replacements [][2]string, n int) (string, error) {
	text := b.Text
	for _, r := range replacements {
		if strings.Count(text, r[0]) != n {
			return "", fmt.Errorf("%s: %q is not there %d times", b, r[0], n)
		}
		text = strings.ReplaceAll(text, r[0], r[1])
	}
	return text, nil
}

func (c *cluster) makeServingCert() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "admitfn-e2e-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	c.certFile, c.keyFile = filepath.Join(c.dir, "tls.crt"), filepath.Join(c.dir, "tls.key")
	os.WriteFile(filepath.Join(c.dir, "ca.crt"), c.caPEM, 0o600)
	os.WriteFile(c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	return os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

func httpOK(client *http.Client, url, token string) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, body)
	}
	return nil
}

// patience bounds every wait for the cluster or a server to reach a state
// (started, a configuration or a namespace's labels in kube-apiserver's
// caches, an audit event written). Each wait ends as soon as the state is
// reached: this is a safety net for a loaded machine, not a measure.
const patience = 3 * time.Minute

// waitFor calls f until it returns nil, for at most patience, and returns
// its last error.
func waitFor(f func() error) error {
	deadline := time.Now().Add(patience)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// warnings collects the warnings of the requests made through one client.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// client returns a clientset whose warnings land in the returned collector.
func (c *cluster) client(t *testing.T) (*kubernetes.Clientset, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(c.config)
	cfg.WarningHandler = w
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, w
}

// admitfn is one running admitfn: the server, or Lambda instances behind a
// Function URL front.
type admitfn struct {
	addr  string
	stops []func()
	once  sync.Once

	mu   sync.Mutex // guards logs, written by the stderr reader
	logs bytes.Buffer
}

// Logs returns what the server has logged so far.
func (a *admitfn) Logs() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.logs.String()
}

// serve starts functions/server over HTTPS on bundleDir. It is stopped when
// the test ends (or earlier with stop).
func (c *cluster) serve(t *testing.T, bundleDir string, addr string, extra ...string) *admitfn {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	cmd := exec.Command(c.serverBin, append([]string{"--addr", addr, "--policies", bundleDir, "--tls-cert", c.certFile, "--tls-key", c.keyFile, "--log-level", "info"}, extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &admitfn{stops: []func(){func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}}}
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			a.mu.Lock()
			a.logs.Write(line)
			a.logs.WriteByte('\n')
			a.mu.Unlock()
			var m struct{ Message, Addr string }
			if json.Unmarshal(line, &m) == nil && m.Message == "serving" {
				serving <- m.Addr
			}
		}
	}()
	select {
	case a.addr = <-serving:
	case <-time.After(patience):
		cmd.Process.Kill()
		t.Fatalf("admitfn did not start:\n%s", a.Logs())
	}
	t.Cleanup(a.stop)
	return a
}

func (a *admitfn) stop() {
	a.once.Do(func() {
		for _, stop := range a.stops {
			stop()
		}
	})
}

// Write collects log lines.
func (a *admitfn) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.logs.Write(p)
}

// reviewed reports whether admitfn logged a review with this decision, and,
// behind the Lambda front, that it came as a Function URL invocation with a
// request id, and behind the Cloud Run front, with the request's trace.
func (a *admitfn) reviewed(via front, decision string) bool {
	for _, line := range strings.Split(a.Logs(), "\n") {
		var m struct {
			Message, Decision, Trigger, RequestID string
			Trace                                 string `json:"logging.googleapis.com/trace"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Message != "review" || m.Decision != decision {
			continue
		}
		switch {
		case via == viaLambda && (m.Trigger != "function-url" || m.RequestID == ""):
		case via == viaGCF && !strings.HasPrefix(m.Trace, "projects/e2e/traces/"):
		default:
			return true
		}
	}
	return false
}

// front is how kube-apiserver reaches admitfn in a test.
type front string

const (
	viaServer front = "server" // functions/server over HTTPS
	viaLambda front = "lambda" // the Lambda bootstrap behind a Function URL front
	viaGCF    front = "gcf"    // the Cloud Function in functions-framework-go behind a TLS front
	// viaPushed is functions/server on the bundle as admitfn push
	// publishes it, so that it reads it packed, its YAML parsed at push,
	// and compiles each policy on first use.
	viaPushed front = "pushed"
)

// fronts are the ways a scenario that must hold on every platform runs.
var fronts = []front{viaServer, viaLambda, viaGCF}

// eachFront runs scenario once per front, as subtests named after it.
func eachFront(t *testing.T, scenario func(t *testing.T, via front)) {
	for _, via := range fronts {
		t.Run(string(via), func(t *testing.T) { scenario(t, via) })
	}
}

// serveGCF runs the Cloud Function through functions-framework-go on
// bundleDir, behind an HTTPS reverse proxy standing in for Cloud Run's
// front end (which terminates TLS and adds X-Cloud-Trace-Context). It is
// stopped when the test ends.
func (c *cluster) serveGCF(t *testing.T, bundleDir string) *admitfn {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.gcfBin)
	cmd.Env = []string{"LOCAL_ONLY=true", fmt.Sprintf("PORT=%d", port), "FUNCTION_TARGET=Admitfn", "ADMITFN_POLICIES=" + bundleDir, "GOOGLE_CLOUD_PROJECT=e2e", "K_SERVICE=admitfn"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	a := &admitfn{}
	cmd.Stdout, cmd.Stderr = a, a
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.stops = append(a.stops, func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	t.Cleanup(a.stop)
	backend := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitFor(func() error { return httpOK(http.DefaultClient, backend+"/readyz", "") }); err != nil {
		t.Fatalf("the Cloud Function did not start: %v\n%s", err, a.Logs())
	}

	target, _ := url.Parse(backend)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var traces atomic.Int64
	direct := proxy.Director
	proxy.Director = func(r *http.Request) {
		direct(r)
		r.Header.Set("X-Cloud-Trace-Context", fmt.Sprintf("%032x/%d;o=1", traces.Add(1), traces.Load()))
	}
	c.front(t, a, proxy)
	return a
}

// front serves h over HTTPS with admitfn's serving certificate on
// 127.0.0.1, as a's address; it stops first when a stops.
func (c *cluster) front(t *testing.T, a *admitfn, h http.Handler) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	a.stops = append([]func(){func() { srv.Close() }}, a.stops...)
	a.addr = ln.Addr().String()
}

// lambdaInstances is how many instances of the function poll the Runtime
// API: kube-apiserver calls webhooks concurrently, and Lambda answers
// concurrent calls with more instances.
const lambdaInstances = 2

// serveLambda runs the Lambda bootstrap on bundleDir against a Runtime API,
// behind an HTTPS front that turns each request into a Function URL event
// as AWS documents it. It is stopped when the test ends.
func (c *cluster) serveLambda(t *testing.T, bundleDir string) *admitfn {
	t.Helper()
	api, err := lambdatest.NewRuntimeAPI()
	if err != nil {
		t.Fatal(err)
	}
	a := &admitfn{}
	a.stops = append(a.stops, api.Close)
	t.Cleanup(a.stop)
	ready := make(chan struct{}, lambdaInstances)
	for range lambdaInstances {
		cmd := exec.Command(c.lambdaBin)
		cmd.Dir = filepath.Dir(c.lambdaBin)
		cmd.Env = []string{"AWS_LAMBDA_RUNTIME_API=" + api.Addr, "LAMBDA_TASK_ROOT=" + cmd.Dir, "ADMITFN_POLICIES=" + bundleDir, "AWS_REGION=eu-west-1"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = a
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		a.stops = append([]func(){func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}}, a.stops...)
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Bytes()
				a.Write(append(append([]byte{}, line...), '\n'))
				var m struct{ Message string }
				if json.Unmarshal(line, &m) == nil && m.Message == "ready" {
					ready <- struct{}{}
				}
			}
		}()
	}
	for range lambdaInstances {
		select {
		case <-ready:
		case fe := <-api.InitErrors():
			t.Fatalf("the Lambda function failed to start: %v\n%s", fe, a.Logs())
		case <-time.After(patience):
			t.Fatalf("the Lambda function did not start:\n%s", a.Logs())
		}
	}

	c.front(t, a, &lambdatest.FunctionURL{Function: api, Timeout: 9 * time.Second, URLID: "e2eadmitfnurlid0123456789abcdef", Region: "eu-west-1"})
	return a
}

// rendered is what `admitfn render -o json` prints: the validating
// configuration and, for bundles with MutatingAdmissionPolicies, the mutating
// one.
type rendered struct {
	validating *admissionregistrationv1.ValidatingWebhookConfiguration
	mutating   *admissionregistrationv1.MutatingWebhookConfiguration
}

// render runs `admitfn render` for bundleDir against url and returns the
// configurations, named name.
func (c *cluster) render(t *testing.T, bundleDir, url, name string, extra ...string) rendered {
	t.Helper()
	args := append([]string{"render", "-p", bundleDir, "--url", url, "--ca-bundle", filepath.Join(c.dir, "ca.crt"), "--name", name, "-o", "json"}, extra...)
	out, err := exec.Command(c.cliBin, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("admitfn render: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var list struct {
		Kind  string
		Items []json.RawMessage
	}
	if err := json.Unmarshal(out, &list); err != nil || list.Kind != "List" {
		t.Fatalf("admitfn render printed no List (%v): %s", err, out)
	}
	var r rendered
	for _, item := range list.Items {
		var tm metav1.TypeMeta
		json.Unmarshal(item, &tm)
		switch tm.Kind {
		case "ValidatingWebhookConfiguration":
			r.validating = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			err = json.Unmarshal(item, r.validating)
		case "MutatingWebhookConfiguration":
			r.mutating = &admissionregistrationv1.MutatingWebhookConfiguration{}
			err = json.Unmarshal(item, r.mutating)
		default:
			t.Fatalf("admitfn render printed a %s", tm.Kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// install creates cfg and removes it when the test ends.
func (c *cluster) install(t *testing.T, cfg *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	cs, _ := c.client(t)
	ctx := context.Background()
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create webhook configuration: %v", err)
	}
	t.Cleanup(func() {
		cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
}

// writeBundle writes files into a fresh directory.
func writeBundle(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// auditAnnotations returns the annotations of the audit event of the
// request that wrote name in namespace with verb, waiting for it to land.
func (c *cluster) auditAnnotations(t *testing.T, verb, resource, namespace, name string) map[string]string {
	t.Helper()
	var found map[string]string
	err := waitFor(func() error {
		f, err := os.Open(c.auditLog)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			var ev struct {
				Stage     string
				Verb      string
				ObjectRef struct {
					Resource, Namespace, Name string
				}
				Annotations map[string]string
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			if ev.Stage == "ResponseComplete" && ev.Verb == verb && ev.ObjectRef.Resource == resource && ev.ObjectRef.Namespace == namespace && ev.ObjectRef.Name == name {
				found = ev.Annotations
			}
		}
		if found == nil {
			return fmt.Errorf("no audit event for %s %s %s/%s", verb, resource, namespace, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Only admission annotations matter here.
	out := map[string]string{}
	for k, v := range found {
		if strings.HasPrefix(k, "authorization.k8s.io/") {
			continue
		}
		out[k] = v
	}
	return out
}
