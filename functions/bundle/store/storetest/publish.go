package storetest

import (
	"context"
	"os"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
)

// PublishDir publishes the bundle in directory dir to b, as `admitfn push`
// does, and returns its manifest.
func PublishDir(t testing.TB, b store.Bucket, dir string) *bundle.Manifest {
	t.Helper()
	sources, err := policy.ReadFS(os.DirFS(dir), ".")
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.Publish(context.Background(), b, sources, bundle.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
