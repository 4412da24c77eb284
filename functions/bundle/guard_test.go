package bundle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/gcsstore"
	"github.com/admitfn/admitfn/functions/bundle/store/s3store"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
)

// everyStore runs f against a fresh prefix of each store push writes to:
// S3 (versitygw, versioned and not), GCS (fake-gcs-server) and a
// directory.
func everyStore(t *testing.T, f func(t *testing.T, b store.Bucket)) {
	s := storetest.StartS3(t)
	g := storetest.StartGCS(t)
	g.CreateBucket(t, "policies", false)
	gcs := g.Client(t, g.Host)
	for _, versioned := range []bool{true, false} {
		name := fmt.Sprintf("s3-versioned-%v", versioned)
		s.CreateBucket(t, strings.ReplaceAll(name, "-", ""), versioned)
		t.Run(name, func(t *testing.T) {
			f(t, s3store.New(s.Client(s.Endpoint), store.Location{Scheme: "s3", Bucket: strings.ReplaceAll(name, "-", ""), Prefix: "prod"}))
		})
	}
	t.Run("gcs", func(t *testing.T) {
		f(t, gcsstore.New(gcs, store.Location{Scheme: "gs", Bucket: "policies", Prefix: "prod"}))
	})
	t.Run("directory", func(t *testing.T) { f(t, store.NewDir(t.TempDir())) })
}

var bundleB = []policy.Source{{Name: "a.yaml", Data: []byte("kind: A2\n")}, {Name: "c.yaml", Data: []byte("kind: C\n")}}

// Finding: two overlapping pushes both reported success, and the lower
// serial could land last. Now the second finds the first's lock and writes
// nothing; the first lands whole.
func TestOverlappingPushesOneFailsAndWritesNothing(t *testing.T) {
	everyStore(t, func(t *testing.T, b store.Bucket) {
		ctx := context.Background()
		key := newKey(t)
		publishAt(t, b, bundleA, key, time.Now(), 0)
		var second error
		opts := bundle.PublishOptions{SignKey: key}
		bundle.BeforeCommit(&opts, func() {
			// The first push has uploaded everything; the second starts.
			_, second = bundle.Publish(ctx, b, bundleB, bundle.PublishOptions{SignKey: key})
		})
		m, err := bundle.Publish(ctx, b, bundleA[:1], opts)
		if err != nil {
			t.Fatalf("the first push: %v", err)
		}
		if !errors.Is(second, bundle.ErrLocked) || !strings.Contains(second.Error(), "holds "+b.Location()+"/.admitfn/lock.json since ") {
			t.Fatalf("the overlapping push: %v, want ErrLocked", second)
		}
		snap, err := fetchAt(b, key, time.Now())
		if err != nil || snap.BundleID != m.Bundle || snap.Serial != m.Serial {
			t.Fatalf("fetched %+v %v, want the first push's bundle %s", snap, err, m.Bundle)
		}
		if raw, _, err := b.Get(ctx, bundle.LockKey, ""); err != nil || !strings.Contains(string(raw), `"expires":"0001-01-01T00:00:00Z"`) {
			t.Errorf("lock after the push: %s %v, want its lease ended", raw, err)
		}
		// The lock ended, the next push goes through.
		if _, err := bundle.Publish(ctx, b, bundleB, bundle.PublishOptions{SignKey: key}); err != nil {
			t.Fatalf("a push after: %v", err)
		}
	})
}

// Finding: a push that read the manifest before another landed wrote its
// own over it. Even when its lock was taken over (its lease had passed by
// the other's clock), the manifest write is the store's compare-and-swap:
// the late push fails, and the one that landed stays whole.
func TestALatePushLosesTheManifestRace(t *testing.T) {
	everyStore(t, func(t *testing.T, b store.Bucket) {
		ctx := context.Background()
		key := newKey(t)
		publishAt(t, b, bundleA, key, time.Now(), 0)
		var landed *bundle.Manifest
		var warnings []string
		opts := bundle.PublishOptions{SignKey: key}
		bundle.BeforeCommit(&opts, func() {
			var err error
			landed, err = bundle.Publish(ctx, b, bundleB, bundle.PublishOptions{SignKey: key, Now: time.Now().Add(time.Hour), Warn: func(w string) { warnings = append(warnings, w) }})
			if err != nil {
				t.Errorf("the push that takes the lock over: %v", err)
			}
		})
		before, _, _ := b.Get(ctx, bundle.ManifestKey, "")
		_, err := bundle.Publish(ctx, b, bundleA[:1], opts)
		if !errors.Is(err, bundle.ErrLostRace) || err.Error() != fmt.Sprintf("publish: another push replaced the manifest meanwhile: %s now holds bundle %s with serial %d: this push wrote no manifest, and functions keep reading that one; check what it publishes (admitfn diff) and push again", b.Location(), landed.Bundle, landed.Serial) {
			t.Fatalf("the late push: %v", err)
		}
		// (Where the store keeps no versions, it also says that the late
		// push's uploads left the bundle it replaced unreadable.)
		if len(warnings) == 0 || !strings.HasPrefix(warnings[0], "took over the publish lock of a push from ") {
			t.Errorf("warnings of the push that landed: %q", warnings)
		}
		after, _, _ := b.Get(ctx, bundle.ManifestKey, "")
		if bytes.Equal(after, before) {
			t.Fatal("the push that landed wrote no manifest")
		}
		snap, err := fetchAt(b, key, time.Now().Add(time.Hour))
		if err != nil || snap.BundleID != landed.Bundle || snap.Serial != landed.Serial {
			t.Fatalf("fetched %+v %v, want the bundle that landed, %s", snap, err, landed.Bundle)
		}
	})
}

// Finding: the scheduled re-sign laundered a rollback. A bucket writer
// without the key puts back an older manifest the key signed (expired
// here); a re-sign that names the bundle it keeps loading refuses it, and
// one that names none is refused before it reads anything.
func TestResignNeverLaundersARollback(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	prod := at{store.NewDir(t.TempDir()), "s3://policies/prod"}
	publishAt(t, prod, bundleA, key, t0, time.Hour)
	old, _, _ := prod.Get(ctx, bundle.ManifestKey, "")
	newer := publishAt(t, prod, bundleB, key, t0.Add(time.Minute), time.Hour)

	if _, err := prod.Put(ctx, bundle.ManifestKey, old, "application/json"); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(2 * time.Hour)
	_, err := bundle.Resign(ctx, prod, newer.Bundle, bundle.PublishOptions{SignKey: key, Now: later})
	want := fmt.Sprintf(".admitfn/manifest.json names bundle %s (serial %d, created 2026-11-22T10:00:00Z), not %s, the bundle to re-sign: if you did not publish it, someone put an older manifest back; push the bundle instead", policy.ID(bundleA), t0.Unix(), newer.Bundle)
	if err == nil || err.Error() != want {
		t.Fatalf("re-sign over a rolled-back manifest: %v\nwant %s", err, want)
	}
	if _, err := bundle.Resign(ctx, prod, "", bundle.PublishOptions{SignKey: key, Now: later}); err == nil || !strings.HasPrefix(err.Error(), "re-sign: name the bundle to re-sign") {
		t.Fatalf("re-sign naming no bundle: %v", err)
	}
	if now, _, _ := prod.Get(ctx, bundle.ManifestKey, ""); !bytes.Equal(now, old) {
		t.Fatal("a refused re-sign replaced the manifest")
	}
	// No function loads the old manifest: it expired, and the re-sign did
	// not give it a new expiry.
	if _, err := fetchAt(prod, key, later); !errors.Is(err, bundle.ErrExpired) {
		t.Fatalf("the rolled-back manifest: %v, want ErrExpired", err)
	}
}

// Finding: an unsigned push over a signed location succeeded, and the next
// signed push found "no bundle" there and dropped the retired routes. Now
// the unsigned push is refused before it uploads anything; pushed on
// purpose (AllowUnsigned), the next signed push follows the last signed
// manifest: its serial, its retired routes, the bundle it replaces.
func TestASignedLocationStaysSigned(t *testing.T) {
	everyStore(t, func(t *testing.T, b store.Bucket) {
		ctx := context.Background()
		key := newKey(t)
		publishAt(t, b, routed(""), key, time.Now(), 0)
		first := publishAt(t, b, routed("prod"), key, time.Now(), 0) // retires routed("")'s route
		if len(first.Retired) != 1 {
			t.Fatalf("retired %+v", first.Retired)
		}
		objs, _ := b.List(ctx)
		_, err := bundle.Publish(ctx, b, routed("staging"), bundle.PublishOptions{})
		if !errors.Is(err, bundle.ErrSignedLocation) || err.Error() != "publish: the location's bundles are signed: the manifest at "+b.Location()+" is signed by key "+bundle.KeyID(pub(key))+", so its functions verify signatures: they would refuse an unsigned bundle, and every instance that starts after it would serve none. Sign it with --sign-key (push --allow-unsigned only to stop signing this location on purpose, after removing ADMITFN_BUNDLE_PUBLIC_KEY from every function)" {
			t.Fatalf("unsigned push: %v", err)
		}
		if after, _ := b.List(ctx); len(after) != len(objs) {
			t.Fatalf("the refused push wrote objects: %d before, %d after", len(objs), len(after))
		}
		// Signed by another key, which functions do not hold: refused too.
		_, err = bundle.Publish(ctx, b, routed("staging"), bundle.PublishOptions{SignKey: newKey(t)})
		if !errors.Is(err, bundle.ErrSignedLocation) || !strings.Contains(err.Error(), "is signed by key "+bundle.KeyID(pub(key))+", not by key ") {
			t.Fatalf("push signed by another key: %v", err)
		}

		// The bad publish lands anyway.
		if _, err := bundle.Publish(ctx, b, routed("staging"), bundle.PublishOptions{AllowUnsigned: true}); err != nil {
			t.Fatal(err)
		}
		var warnings []string
		next, err := bundle.Publish(ctx, b, routed("prod"), bundle.PublishOptions{SignKey: key, Warn: func(w string) { warnings = append(warnings, w) }})
		if err != nil {
			t.Fatal(err)
		}
		if next.Serial <= first.Serial || len(next.Retired) != 1 || next.Retired[0].Bundle != first.Retired[0].Bundle || !next.Retired[0].Until.Equal(first.Retired[0].Until) {
			t.Fatalf("the signed push after: serial %d (first %d), retired %+v, want the first's %+v", next.Serial, first.Serial, next.Retired, first.Retired)
		}
		want := []string{
			"the manifest at " + b.Location() + " does not verify with a trusted key (bundle is not signed): its serial is not followed",
			fmt.Sprintf("following the last signed manifest (.admitfn/signed.json: bundle %s, serial %d) instead", first.Bundle, first.Serial),
		}
		// Where the store keeps no versions, the unsigned push overwrote the
		// files the last signed manifest names, which it says too.
		if len(warnings) < len(want) || fmt.Sprintf("%q", warnings[:len(want)]) != fmt.Sprintf("%q", want) {
			t.Errorf("warnings %q\nwant %q", warnings, want)
		}
		snap, err := fetchAt(b, key, time.Now())
		if err != nil || len(snap.Retired) != 1 || snap.Retired[0].Err != nil || len(snap.Retired[0].Sources) == 0 {
			t.Fatalf("a function reading it: %+v %v", snap, err)
		}
	})
}

// A push writes nothing once its lease has ended, when another push may
// have taken its lock over: its reads and writes run within the lease.
func TestAPushWritesNothingPastItsLease(t *testing.T) {
	everyStore(t, func(t *testing.T, b store.Bucket) {
		if _, ok := b.(*store.Dir); ok {
			t.Skip("a directory's writes are local: bundles.md promises this of buckets")
		}
		ctx := context.Background()
		key := newKey(t)
		first := publishAt(t, b, bundleA, key, time.Now(), 0)
		before, _, _ := b.Get(ctx, bundle.ManifestKey, "")
		_, err := bundle.Publish(ctx, b, bundleB, bundle.PublishOptions{SignKey: key, Lease: time.Nanosecond})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a publish whose lease ended: %v, want the lease's deadline", err)
		}
		if after, _, _ := b.Get(ctx, bundle.ManifestKey, ""); !bytes.Equal(after, before) {
			t.Fatal("a publish past its lease replaced the manifest")
		}
		if snap, err := fetchAt(b, key, time.Now()); err != nil || snap.BundleID != first.Bundle {
			t.Fatalf("fetched %+v %v, want the first bundle whole", snap, err)
		}
	})
}
