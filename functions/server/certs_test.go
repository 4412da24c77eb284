package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A certificate rotated in place (as cert-manager renews a Secret and the
// kubelet swaps its mounted files) is served from the next handshake after
// the change, without a restart; a pair that does not load leaves the one
// in service, and says so.
func TestTLSCertificateRotation(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCA(t, "server-ca")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	// write replaces a file as the kubelet does: a new file renamed over it.
	write := func(path string, data []byte) {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	certA, keyA := issue(t, ca, caKey, x509.ExtKeyUsageServerAuth)
	write(certFile, certA)
	write(keyFile, keyA)
	addr, logs := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples, "--tls-cert", certFile, "--tls-key", keyFile}, nil)
	served := func() []byte { return servedCertificate(t, addr, ca) }
	if !bytes.Equal(served(), der(certA)) {
		t.Fatal("the first certificate is not the one served")
	}

	certB, keyB := issue(t, ca, caKey, x509.ExtKeyUsageServerAuth)
	write(keyFile, keyB)
	write(certFile, certB)
	for deadline := time.Now().Add(patience); !bytes.Equal(served(), der(certB)); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate is never served")
		}
	}
	if !strings.Contains(logs.String(), `"message":"TLS certificate reloaded"`) {
		t.Errorf("no reload logged:\n%s", logs)
	}

	// Half a rotation (a certificate without its key): B stays.
	certC, _ := issue(t, ca, caKey, x509.ExtKeyUsageServerAuth)
	write(certFile, certC)
	for deadline := time.Now().Add(patience); !strings.Contains(logs.String(), "TLS certificate changed but does not load: still serving the previous one"); time.Sleep(100 * time.Millisecond) {
		served()
		if time.Now().After(deadline) {
			t.Fatalf("the bad pair is never noticed:\n%s", logs)
		}
	}
	if !bytes.Equal(served(), der(certB)) {
		t.Error("a pair that does not load replaced the one in service")
	}
}

// A Secret mounted by the kubelet (deploy/kubernetes): tls.crt and tls.key
// are links through ..data to a timestamped directory, and a renewal
// writes a new directory and swaps ..data to it at once. The next
// handshake after the swap gets the new certificate.
func TestTLSCertificateKubeletSwap(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCA(t, "server-ca")
	generation := 0
	swap := func(certPEM, keyPEM []byte) {
		generation++
		ts := fmt.Sprintf("..2026_11_27_10_00_0%d.000000000", generation)
		os.Mkdir(filepath.Join(dir, ts), 0o755)
		os.WriteFile(filepath.Join(dir, ts, "tls.crt"), certPEM, 0o644)
		os.WriteFile(filepath.Join(dir, ts, "tls.key"), keyPEM, 0o600)
		if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	certA, keyA := issue(t, ca, caKey, x509.ExtKeyUsageServerAuth)
	swap(certA, keyA)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	addr, _ := start(t, []string{"--addr", "127.0.0.1:0", "--policies", examples, "--tls-cert", filepath.Join(dir, "tls.crt"), "--tls-key", filepath.Join(dir, "tls.key")}, nil)
	served := func() []byte { return servedCertificate(t, addr, ca) }
	if !bytes.Equal(served(), der(certA)) {
		t.Fatal("the first certificate is not the one served")
	}
	certB, keyB := issue(t, ca, caKey, x509.ExtKeyUsageServerAuth)
	swap(certB, keyB)
	for deadline := time.Now().Add(patience); !bytes.Equal(served(), der(certB)); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the swapped certificate is never served")
		}
	}
}

// servedCertificate is the DER of the certificate the server at addr
// presents, which ca must have signed.
func servedCertificate(t *testing.T, addr string, ca *x509.Certificate) []byte {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw
}

// der is the DER of a PEM certificate.
func der(certPEM []byte) []byte {
	b, _ := pem.Decode(certPEM)
	return b.Bytes
}
