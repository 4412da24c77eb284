package cluster

import (
	"context"
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "clusters.yaml")
	if err := os.WriteFile(file, []byte("clusters:\n- name: prod\n  server: https://10.0.0.1\n  tokenFile: /var/run/token\n  namespaceTTL: 5s\n- name: dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in    string
		names []string
		err   string
	}{
		{in: "", names: nil},
		{in: "prod, dev", names: []string{"prod", "dev"}},
		{in: file, names: []string{"prod", "dev"}},
		{in: `{"clusters":[{"name":"eu","server":"https://x","eks":{"clusterName":"eu-1"}}]}`, names: []string{"eu"}},
		{in: "prod,Prod", err: `clusters[1]: name "Prod": want a DNS label (a-z, 0-9 and -, at most 63)`},
		{in: "prod,prod", err: `cluster "prod": named twice`},
		{in: "a/b", err: `clusters[0]: name "a/b": want a DNS label (a-z, 0-9 and -, at most 63)`},
		{in: `{"clusters":[{"name":"eu","tokenFile":"/t"}]}`, err: `cluster "eu": server is required with tokenFile, eks or gke`},
		{in: `{"clusters":[{"name":"eu","server":"https://x","tokenFile":"/t","gke":{}}]}`, err: `cluster "eu": set one of kubeconfig, tokenFile, eks and gke`},
		{in: `{"clusters":[{"name":"eu","server":"https://x","eks":{}}]}`, err: `cluster "eu": eks.clusterName is required`},
		{in: `{"clusters":[{"name":"eu","namespaceTTL":"-1s"}]}`, err: `cluster "eu": durations cannot be negative`},
		{in: `{"clusters":[{"name":"eu","token":"s3cr3t"}]}`, err: `clusters: error unmarshaling JSON: while decoding JSON: json: unknown field "token"`},
	} {
		c, err := ParseConfig(tc.in, os.ReadFile)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.err || (err == nil && !reflect.DeepEqual(c.Names(), tc.names)) {
			t.Errorf("%q: names %v, err %q\nwant %v, %q", tc.in, c.Names(), got, tc.names, tc.err)
		}
		if strings.Contains(got, "s3cr3t") {
			t.Errorf("%q: the error quotes a value: %s", tc.in, got)
		}
	}
}

func TestEKSTokenIsAPresignedGetCallerIdentity(t *testing.T) {
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")}
	tok, err := eksToken(context.Background(), cfg, "prod-eu")
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := strings.CutPrefix(tok, "k8s-aws-v1.")
	if !ok {
		t.Fatalf("token %q lacks the k8s-aws-v1. prefix", tok)
	}
	decoded, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(string(decoded))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	got := []string{u.Scheme, u.Host, q.Get("Action"), q.Get("X-Amz-Expires"), q.Get("X-Amz-SignedHeaders")}
	want := []string{"https", "sts.eu-west-1.amazonaws.com", "GetCallerIdentity", "60", "host;x-k8s-aws-id"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("presigned %v, want %v", got, want)
	}
	if !strings.HasPrefix(q.Get("X-Amz-Credential"), "AKIDEXAMPLE/") || strings.Contains(string(decoded), "secret") {
		t.Errorf("credential %q: want the access key id, never the secret", q.Get("X-Amz-Credential"))
	}
}
