package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testToken = "0123456789abcdefghijklmnopqrstuvwxyz-_ABCDE"

func review(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../policies/reviews/deployment-production.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func post(t *testing.T, c *http.Client, url, body string, header ...string) (int, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Path tokens, bearer tokens and basic users, as a self-managed cluster's
// admission kubeconfig would send them.
func TestAccess(t *testing.T) {
	dir := t.TempDir()
	tokens, basic := filepath.Join(dir, "tokens"), filepath.Join(dir, "basic")
	os.WriteFile(tokens, []byte("# kube-apiserver\nbearer-one\n\nbearer-two\n"), 0o600)
	os.WriteFile(basic, []byte("apiserver:pa:ss\n"), 0o600)
	addr, logs := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples, "--auth-tokens-file", tokens, "--auth-basic-file", basic},
		map[string]string{"ADMITFN_TOKENS": testToken})
	base := "http://" + addr
	body := review(t)
	for _, tc := range []struct {
		path   string
		header []string
		code   int
	}{
		{"/" + testToken + "/validate", []string{"Authorization", "Bearer bearer-two"}, 200},
		{"/" + testToken + "/validate", []string{"Authorization", "Basic YXBpc2VydmVyOnBhOnNz"}, 200},
		{"/" + testToken + "/validate", nil, 401},
		{"/" + testToken + "/validate", []string{"Authorization", "Bearer nope"}, 401},
		{"/validate", []string{"Authorization", "Bearer bearer-one"}, 404},
		{"/not-the-token-but-long-enough/validate", []string{"Authorization", "Bearer bearer-one"}, 404},
	} {
		code, err := post(t, http.DefaultClient, base+tc.path+"?timeout=10s", body, tc.header...)
		if err != nil || code != tc.code {
			t.Errorf("POST %s %v: %d %v, want %d", tc.path, tc.header, code, err, tc.code)
		}
	}
	if strings.Contains(logs.String(), testToken) || strings.Contains(logs.String(), "bearer-") {
		t.Errorf("a secret reached the logs:\n%s", logs)
	}
	for _, bad := range []map[string]string{{"ADMITFN_TOKENS": "short"}, {"ADMITFN_AUTH_TOKENS_FILE": filepath.Join(dir, "missing")}} {
		if _, err := parseAndAccess(bad); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

func parseAndAccess(env map[string]string) (config, error) {
	cfg, err := parseConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		return cfg, err
	}
	_, _, err = access(cfg)
	return cfg, err
}

// startMTLS starts the server over HTTPS with --client-ca (and args) and
// returns its address, the roots that trust it, and the client CA.
func startMTLS(t *testing.T, args ...string) (addr string, roots *x509.CertPool, clientCA *x509.Certificate, clientCAKey *ecdsa.PrivateKey) {
	t.Helper()
	dir := t.TempDir()
	serverCA, serverCAKey := newCA(t, "server-ca")
	clientCA, clientCAKey = newCA(t, "client-ca")
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o600)
		return p
	}
	certPEM, keyPEM := issue(t, serverCA, serverCAKey, x509.ExtKeyUsageServerAuth)
	addr, _ = start(t, append([]string{"--addr", "127.0.0.1:0", "--policies", examples,
		"--tls-cert", write("tls.crt", certPEM), "--tls-key", write("tls.key", keyPEM), "--client-ca", write("client-ca.pem", pemCert(clientCA))}, args...), nil)
	roots = x509.NewCertPool()
	roots.AddCert(serverCA)
	return addr, roots, clientCA, clientCAKey
}

// With --client-ca, reviews need a client certificate signed by that CA:
// mTLS, the third way kube-apiserver can authenticate to a webhook.
func TestClientCertificates(t *testing.T) {
	addr, roots, clientCA, clientCAKey := startMTLS(t)
	otherCA, otherCAKey := newCA(t, "other-ca")
	client := func(ca *x509.Certificate, key *ecdsa.PrivateKey) *http.Client {
		cfg := &tls.Config{RootCAs: roots}
		if ca != nil {
			c, k := issue(t, ca, key, x509.ExtKeyUsageClientAuth)
			pair, err := tls.X509KeyPair(c, k)
			if err != nil {
				t.Fatal(err)
			}
			// Sent whatever CAs the server names, as a client that
			// has it would (Go's default sends only a matching one).
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: patience}
	}
	url := "https://" + addr + "/validate?timeout=10s"
	if code, err := post(t, client(clientCA, clientCAKey), url, review(t)); err != nil || code != 200 {
		t.Errorf("client certificate from the client CA: %d %v", code, err)
	}
	if code, err := post(t, client(nil, nil), url, review(t)); err != nil || code != 401 {
		t.Errorf("no client certificate: %d %v, want 401", code, err)
	}
	if code, err := post(t, client(otherCA, otherCAKey), url, review(t)); err == nil {
		t.Errorf("client certificate from another CA: the handshake passed (%d)", code)
	}
	// Probes need no certificate; the detailed readiness does.
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 401} {
		resp, err := client(nil, nil).Get("https://" + addr + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s without a certificate: %d %s, want %d", path, resp.StatusCode, body, want)
		}
	}
	if _, err := parseConfig([]string{"--client-ca", "ca.pem"}, func(string) string { return "" }, io.Discard); err == nil ||
		err.Error() != "--client-ca verifies client certificates, which needs HTTPS: set --tls-cert and --tls-key" {
		t.Errorf("--client-ca without TLS: %v", err)
	}
}

func newCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func issue(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: []string{"localhost"}}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = append(tmpl.IPAddresses, []byte{127, 0, 0, 1})
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// Slow clients and oversized headers cost the server little: a connection
// that has not sent its headers in time is dropped, headers over 64 KiB get
// 431, and other clients are served meanwhile.
func TestSlowAndOversizedClients(t *testing.T) {
	addr, _ := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples, "--read-header-timeout", "300ms"}, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /validate HTTP/1.1\r\nHost: admitfn\r\nContent-Type: appl")); err != nil {
		t.Fatal(err)
	}
	if code, err := post(t, http.DefaultClient, "http://"+addr+"/validate?timeout=10s", review(t)); err != nil || code != 200 {
		t.Errorf("another client while one dribbles: %d %v", code, err)
	}
	// The server closes the connection (ReadAll ends without error); the
	// read deadline is only the safety net.
	conn.SetReadDeadline(time.Now().Add(patience))
	rest, err := io.ReadAll(conn)
	if err != nil {
		t.Errorf("slow client: connection not dropped: %v", err)
	}
	if len(rest) > 0 && !strings.HasPrefix(string(rest), "HTTP/1.1 408 ") {
		t.Errorf("slow client got %q", rest)
	}

	code, err := post(t, http.DefaultClient, "http://"+addr+"/validate?timeout=10s", review(t), "X-Padding", strings.Repeat("a", 100<<10))
	if err != nil || code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("100 KiB header: %d %v", code, err)
	}
}

// With a client CA and a tokens file, a review needs both.
func TestClientCertificateAndToken(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("s3cret-token-value\n"), 0o600)
	addr, roots, clientCA, clientCAKey := startMTLS(t, "--auth-tokens-file", tokens)
	c, k := issue(t, clientCA, clientCAKey, x509.ExtKeyUsageClientAuth)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		cert, token bool
		want        int
	}{{"both", true, true, 200}, {"certificate only", true, false, 401}, {"token only", false, true, 401}} {
		cfg := &tls.Config{RootCAs: roots}
		if tc.cert {
			cfg.Certificates = []tls.Certificate{pair}
		}
		req, _ := http.NewRequest("POST", "https://"+addr+"/validate?timeout=10s", strings.NewReader(review(t)))
		req.Header.Set("Content-Type", "application/json")
		if tc.token {
			req.Header.Set("Authorization", "Bearer s3cret-token-value")
		}
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: patience}).Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}
