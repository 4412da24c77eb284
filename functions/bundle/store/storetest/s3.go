package storetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3 is a running versitygw.
type S3 struct {
	*process
	// Endpoint is the server's URL, for AWS_ENDPOINT_URL_S3.
	Endpoint string
}

// The root credentials of the test server.
const (
	S3AccessKey = "admitfn-test"
	S3SecretKey = "admitfn-test-secret"
	S3Region    = "us-east-1"
)

// StartS3 starts versitygw on a free port, with its data under a test
// directory; the test's cleanup stops it.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	bin := Versitygw(t)
	dir := t.TempDir()
	root, versions := filepath.Join(dir, "root"), filepath.Join(dir, "versions")
	for _, d := range []string{root, versions} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := addr(freePort(t))
	s := &S3{Endpoint: "http://" + a}
	s.process = &process{t: t, name: "versitygw", bin: bin, addr: a, ready: httpUp(s.Endpoint),
		args: []string{"--access", S3AccessKey, "--secret", S3SecretKey, "--region", S3Region, "--port", a, "--quiet",
			"posix", "--versioning-dir", versions, root}}
	s.start()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("versitygw output:\n%s", s.logs())
		}
	})
	return s
}

// Env is what an admitfn process needs to reach the server.
func (s *S3) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + S3AccessKey, "AWS_SECRET_ACCESS_KEY=" + S3SecretKey, "AWS_REGION=" + S3Region,
		"AWS_ENDPOINT_URL_S3=" + s.Endpoint, "ADMITFN_S3_PATH_STYLE=true",
		// Keep the SDK from reading the developer's own AWS configuration.
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetEnv sets Env for the test, so the SDK's default chain finds the server.
func (s *S3) SetEnv(t *testing.T) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Client is an S3 client for the server at endpoint (the server's own, or a
// proxy's in front of it).
func (s *S3) Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       S3Region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(S3AccessKey, S3SecretKey, ""),
		// One attempt: a test decides what a failure means.
		RetryMaxAttempts: 1,
	})
}

// CreateBucket makes a bucket, versioned or not.
func (s *S3) CreateBucket(t testing.TB, name string, versioned bool) {
	t.Helper()
	ctx := context.Background()
	c := s.Client(s.Endpoint)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	if versioned {
		_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(name),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})
		if err != nil {
			t.Fatalf("enable versioning on %s: %v", name, err)
		}
	}
}

// Delete removes an object's current version (a delete marker on a
// versioned bucket).
func (s *S3) Delete(t testing.TB, bucket, key string) {
	t.Helper()
	_, err := s.Client(s.Endpoint).DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var nf *types.NoSuchKey
	if err != nil && !errors.As(err, &nf) {
		t.Fatalf("delete %s/%s: %v", bucket, key, err)
	}
}
