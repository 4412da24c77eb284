package eksauth

import (
	"context"
	"encoding/base64"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

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
