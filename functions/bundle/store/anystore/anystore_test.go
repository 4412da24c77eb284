package anystore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/admitfn/admitfn/functions/bundle/store"
)

func TestOpenDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := Open(ctx, store.Location{Bucket: dir}, Options{}, false)
	if err != nil || b.Location() != dir {
		t.Fatalf("existing directory: %v", err)
	}
	missing := filepath.Join(dir, "a", "b")
	if _, err := Open(ctx, store.Location{Bucket: missing}, Options{}, false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v", err)
	}
	if _, err := Open(ctx, store.Location{Bucket: missing}, Options{}, true); err != nil {
		t.Errorf("missing directory, create: %v", err)
	}
	file := filepath.Join(dir, "f.yaml")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(ctx, store.Location{Bucket: file}, Options{}, false); err == nil || err.Error() != file+" is not a directory" {
		t.Errorf("a file: %v", err)
	}
}

func TestNotBuiltIn(t *testing.T) {
	err := notBuiltIn(store.Location{Scheme: "gs", Bucket: "b", Prefix: "p"}, "admitfn_nogcs")
	if !errors.Is(err, ErrNotBuiltIn) || err.Error() != "gs://b/p: storage backend not built in: this binary was built with -tags admitfn_nogcs" {
		t.Errorf("%v", err)
	}
}
