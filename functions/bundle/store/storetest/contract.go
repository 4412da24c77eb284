package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/admitfn/admitfn/functions/bundle/store"
)

// Contract checks that b behaves as store.Bucket promises. outside is a
// bucket over a sibling prefix of the same store, whose objects b must not
// list; versioned says the store keeps old versions readable.
func Contract(t *testing.T, b, outside store.Bucket, versioned bool) {
	ctx := context.Background()
	if _, _, err := b.Get(ctx, "missing.yaml", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if _, err := b.GetVersion(ctx, "missing.yaml", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetVersion of a missing key: %v, want ErrNotFound", err)
	}

	first, err := b.Put(ctx, "a.yaml", []byte("one"), "application/yaml")
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if first.Key != "a.yaml" || first.Size != 3 {
		t.Errorf("Put returned %+v", first)
	}
	if versioned && first.Version == "" {
		t.Errorf("Put on a versioned store returned no version: %+v", first)
	}
	data, obj, err := b.Get(ctx, "a.yaml", "")
	if err != nil || string(data) != "one" || obj.ETag == "" || obj.Size != 3 {
		t.Fatalf("Get: %q %+v %v", data, obj, err)
	}
	if _, _, err := b.Get(ctx, "a.yaml", obj.ETag); !errors.Is(err, store.ErrNotModified) {
		t.Fatalf("Get with the current ETag: %v, want ErrNotModified", err)
	}

	if _, err := b.Put(ctx, "a.yaml", []byte("two!"), "application/yaml"); err != nil {
		t.Fatal(err)
	}
	data, obj2, err := b.Get(ctx, "a.yaml", obj.ETag)
	if err != nil || string(data) != "two!" || obj2.ETag == obj.ETag || obj2.Size != 4 {
		t.Fatalf("Get with a stale ETag: %q %+v %v", data, obj2, err)
	}
	if data, err := b.GetVersion(ctx, "a.yaml", ""); err != nil || string(data) != "two!" {
		t.Fatalf("GetVersion current: %q %v", data, err)
	}
	if versioned {
		if data, err := b.GetVersion(ctx, "a.yaml", first.Version); err != nil || string(data) != "one" {
			t.Fatalf("GetVersion %s: %q %v", first.Version, data, err)
		}
	}

	if _, err := b.Put(ctx, "dir/b.json", []byte("{}"), "application/json"); err != nil {
		t.Fatal(err)
	}
	if _, err := outside.Put(ctx, "c.yaml", []byte("other"), "application/yaml"); err != nil {
		t.Fatal(err)
	}
	objs, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
		if o.Key == "a.yaml" && (o.Size != 4 || o.ETag != obj2.ETag) {
			t.Errorf("listed %+v, want size 4 and ETag %s", o, obj2.ETag)
		}
	}
	if want := []string{"a.yaml", "dir/b.json"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("List: %v, want %v", keys, want)
	}

	// Conditional writes: of two writers that read the same ETag, the
	// second loses and writes nothing; a create loses to any object.
	if _, err := b.PutIf(ctx, "a.yaml", []byte("three"), "application/yaml", ""); !errors.Is(err, store.ErrConflict) {
		t.Errorf("PutIf create over an object: %v, want ErrConflict", err)
	}
	if _, err := b.PutIf(ctx, "a.yaml", []byte("three"), "application/yaml", obj.ETag); !errors.Is(err, store.ErrConflict) {
		t.Errorf("PutIf with a stale ETag: %v, want ErrConflict", err)
	}
	if data, err := b.GetVersion(ctx, "a.yaml", ""); err != nil || string(data) != "two!" {
		t.Errorf("after lost conditional writes: %q %v, want two!", data, err)
	}
	won, err := b.PutIf(ctx, "a.yaml", []byte("three"), "application/yaml", obj2.ETag)
	if err != nil {
		t.Fatalf("PutIf with the current ETag: %v", err)
	}
	data, obj3, err := b.Get(ctx, "a.yaml", "")
	if err != nil || string(data) != "three" || obj3.ETag != won.ETag || obj3.ETag == obj2.ETag {
		t.Errorf("after PutIf: %q %+v %v, want three with ETag %s", data, obj3, err, won.ETag)
	}
	if _, err := b.PutIf(ctx, "a.yaml", []byte("four"), "application/yaml", obj2.ETag); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second PutIf with the ETag both read: %v, want ErrConflict", err)
	}
	if _, err := b.PutIf(ctx, "new.yaml", []byte("n"), "application/yaml", ""); err != nil {
		t.Errorf("PutIf create: %v", err)
	}
	if data, err := b.GetVersion(ctx, "new.yaml", ""); err != nil || string(data) != "n" {
		t.Errorf("created: %q %v", data, err)
	}
}
