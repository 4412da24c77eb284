package storetest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

// GCS is a running fake-gcs-server.
type GCS struct {
	*process
	// Host is host:port, for STORAGE_EMULATOR_HOST.
	Host string
}

// StartGCS starts fake-gcs-server over HTTP on a free port, with its
// filesystem backend under a test directory so a restart keeps the data;
// the test's cleanup stops it. That backend keeps no old generations:
// StartGCSVersioned runs one that does.
func StartGCS(t testing.TB) *GCS { return startGCS(t, "filesystem") }

// StartGCSVersioned starts fake-gcs-server with its memory backend, which
// supports buckets with object versioning but loses its data on a restart.
func StartGCSVersioned(t testing.TB) *GCS { return startGCS(t, "memory") }

func startGCS(t testing.TB, backend string) *GCS {
	t.Helper()
	bin := FakeGCSServer(t)
	port := freePort(t)
	g := &GCS{Host: addr(port)}
	g.process = &process{t: t, name: "fake-gcs-server", bin: bin, addr: g.Host, ready: httpUp("http://" + g.Host + "/storage/v1/b"),
		args: []string{"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port), "-backend", backend,
			"-filesystem-root", t.TempDir(), "-public-host", g.Host, "-external-url", "http://" + g.Host, "-log-level", "error"}}
	g.start()
	t.Cleanup(func() {
		g.Stop()
		if t.Failed() {
			t.Logf("fake-gcs-server output:\n%s", g.logs())
		}
	})
	return g
}

// Client is a GCS client for the server at host (the server's own, or a
// proxy's in front of it).
func (g *GCS) Client(t testing.TB, host string) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(context.Background(), option.WithEndpoint("http://"+host+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// CreateBucket makes a bucket, versioned or not.
func (g *GCS) CreateBucket(t testing.TB, name string, versioned bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net
	defer cancel()
	err := g.Client(t, g.Host).Bucket(name).Create(ctx, "test-project", &storage.BucketAttrs{VersioningEnabled: versioned})
	if err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Delete removes an object (its live generation).
func (g *GCS) Delete(t testing.TB, bucket, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net
	defer cancel()
	if err := g.Client(t, g.Host).Bucket(bucket).Object(key).Delete(ctx); err != nil {
		t.Fatalf("delete %s/%s: %v", bucket, key, err)
	}
}
