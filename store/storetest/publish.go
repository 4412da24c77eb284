package storetest

import (
	"context"
	"os"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/snapshot"
	"github.com/admitfn/admitfn/store"
)

// PublishDir publishes the bundle in directory dir to b, as `admitfn push`
// does, and returns its manifest.
func PublishDir(t testing.TB, b store.Bucket, dir string) *snapshot.Manifest {
	t.Helper()
	sources, err := policy.ReadFS(os.DirFS(dir), ".")
	if err != nil {
		t.Fatal(err)
	}
	m, err := snapshot.Publish(context.Background(), b, sources, snapshot.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
