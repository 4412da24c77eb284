package gcsstore_test

import (
	"context"
	"testing"

	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/gcsstore"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
)

func TestContract(t *testing.T) {
	for _, versioned := range []bool{true, false} {
		name := map[bool]string{true: "versioned", false: "unversioned"}[versioned]
		t.Run(name, func(t *testing.T) {
			start := storetest.StartGCS
			if versioned {
				start = storetest.StartGCSVersioned
			}
			g := start(t)
			g.CreateBucket(t, name, versioned)
			c := g.Client(t, g.Host)
			// Every GCS object has a generation, so reads pin versions
			// whether or not the bucket keeps old ones.
			storetest.Contract(t,
				gcsstore.New(c, store.Location{Scheme: "gs", Bucket: name, Prefix: "team/prod"}),
				gcsstore.New(c, store.Location{Scheme: "gs", Bucket: name, Prefix: "team/prodx"}), versioned)
		})
	}
}

// Open finds the emulator through STORAGE_EMULATOR_HOST, as a function
// configured for it would.
func TestOpenFromEnvironment(t *testing.T) {
	g := storetest.StartGCS(t)
	g.CreateBucket(t, "env", false)
	t.Setenv("STORAGE_EMULATOR_HOST", g.Host)
	b, err := gcsstore.Open(context.Background(), store.Location{Scheme: "gs", Bucket: "env", Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(context.Background(), "x.yaml", []byte("x"), "application/yaml"); err != nil {
		t.Fatal(err)
	}
	if data, _, err := b.Get(context.Background(), "x.yaml", ""); err != nil || string(data) != "x" {
		t.Fatalf("Get: %q %v", data, err)
	}
}
