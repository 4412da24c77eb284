package gkeauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/admitfn/admitfn/functions/cluster"
)

// The function's service account key (Application Default Credentials)
// is exchanged for an access token at its token URI, which the cluster
// is then sent, and the exchange is not repeated while the token lasts.
func TestTokensOfTheServiceAccount(t *testing.T) {
	var exchanges atomic.Int64
	tokenServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		exchanges.Add(1)
		r.ParseForm()
		if r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "ya29.test-token", "token_type": "Bearer", "expires_in": 3600})
	}))
	defer tokenServer.Close()
	var seen []string
	apiServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
	}))
	defer apiServer.Close()

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	creds, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "admitfn@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenServer.URL,
	})
	file := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(file, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)

	client := &http.Client{Transport: cluster.Bearer(Tokens(cluster.GKE{}))(http.DefaultTransport)}
	for range 2 {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, apiServer.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(seen) != 2 || seen[0] != "Bearer ya29.test-token" || seen[1] != seen[0] || exchanges.Load() != 1 {
		t.Errorf("the cluster saw %q after %d exchanges; want the token twice, one exchange", seen, exchanges.Load())
	}
}

// A token that cannot be had fails the request with a message that names
// no credential.
func TestNoTokenFailsTheRead(t *testing.T) {
	file := filepath.Join(t.TempDir(), "key.json")
	os.WriteFile(file, []byte(`{"type":"service_account","private_key":"not a key","client_email":"x@p.iam.gserviceaccount.com","token_uri":"http://127.0.0.1:1/token"}`), 0o600)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	client := &http.Client{Transport: cluster.Bearer(Tokens(cluster.GKE{}))(http.DefaultTransport)}
	_, err := client.Get("http://127.0.0.1:1/api")
	if err == nil || !strings.Contains(err.Error(), "cannot get a token for the cluster") || strings.Contains(err.Error(), "not a key") {
		t.Errorf("err %v", err)
	}
}
