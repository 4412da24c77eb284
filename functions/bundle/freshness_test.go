package bundle_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
)

// at is a directory that says it is a bucket location, so that the checks
// meant for buckets run against it.
type at struct {
	store.Bucket
	loc string
}

func (a at) Location() string { return a.loc }

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func publishAt(t *testing.T, b store.Bucket, sources []policy.Source, key ed25519.PrivateKey, now time.Time, expiry time.Duration) *bundle.Manifest {
	t.Helper()
	m, err := bundle.Publish(context.Background(), b, sources, bundle.PublishOptions{SignKey: key, Now: now, Expiry: expiry})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fetchAt(b store.Bucket, key ed25519.PrivateKey, now time.Time) (*bundle.Snapshot, error) {
	f := &bundle.Fetcher{Bucket: b, Now: func() time.Time { return now }}
	if key != nil {
		f.Keys = []ed25519.PublicKey{pub(key)}
	}
	return f.Fetch(context.Background(), "")
}

func TestManifestNamesItsLocationSerialAndExpiry(t *testing.T) {
	key := newKey(t)
	dir := store.NewDir(t.TempDir())
	prod := at{dir, "s3://policies/prod"}

	m := publishAt(t, prod, bundleA, key, t0, 0)
	if m.Location != "s3://policies/prod" || !m.Expires.Equal(t0.Add(bundle.DefaultExpiry)) || m.Serial != t0.Unix() {
		t.Fatalf("first manifest: location %q, expires %v, serial %d", m.Location, m.Expires, m.Serial)
	}
	// The serial follows the present manifest's, even within one second.
	m2 := publishAt(t, prod, bundleA, key, t0, time.Hour)
	if m2.Serial != t0.Unix()+1 || !m2.Expires.Equal(t0.Add(time.Hour)) {
		t.Fatalf("second manifest: serial %d, expires %v", m2.Serial, m2.Expires)
	}
	snap, err := fetchAt(prod, key, t0.Add(time.Hour-time.Second))
	if err != nil || snap.Serial != m2.Serial || !snap.Expires.Equal(m2.Expires) {
		t.Fatalf("before expiry: %+v %v", snap, err)
	}
	_, err = fetchAt(prod, key, t0.Add(time.Hour))
	if !errors.Is(err, bundle.ErrExpired) || err.Error() != ".admitfn/manifest.json: bundle manifest has expired: expired at 2026-11-22T11:00:00Z (re-sign it with admitfn push --resign)" {
		t.Fatalf("at expiry: %v", err)
	}
	// The same manifest read at another location: a copy to another prefix
	// or bucket, signed or not.
	for _, k := range []ed25519.PrivateKey{key, nil} {
		_, err = fetchAt(at{dir, "s3://policies/staging"}, k, t0)
		if !errors.Is(err, bundle.ErrWrongLocation) || err.Error() != ".admitfn/manifest.json: bundle manifest was published for another location: published for s3://policies/prod, read from s3://policies/staging" {
			t.Fatalf("another location: %v", err)
		}
	}

	// A directory is part of a deployment: its manifest names no location
	// and does not expire; serials still increase.
	m3 := publishAt(t, dir, bundleA, key, t0, time.Hour)
	if m3.Location != "" || !m3.Expires.IsZero() || m3.Serial != m2.Serial+1 {
		t.Fatalf("directory manifest: %+v", m3)
	}
	if _, err := fetchAt(dir, key, t0.AddDate(10, 0, 0)); err != nil {
		t.Fatalf("directory manifest ten years on: %v", err)
	}
}

// An older signed manifest that names no location or expiry would bind
// neither: at a bucket, a configured key requires all three fields.
func TestSignedManifestMustCarrySerialLocationAndExpiry(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	dir := store.NewDir(t.TempDir())
	prod := at{dir, "gs://policies/prod"}
	m := publishAt(t, prod, bundleA, key, t0, 0)
	for name, tc := range map[string]struct {
		edit func(m *bundle.Manifest)
		want string
	}{
		"nothing":     {func(m *bundle.Manifest) { m.Serial, m.Location, m.Expires = 0, "", time.Time{} }, "serial, location, expires"},
		"no serial":   {func(m *bundle.Manifest) { m.Serial = 0 }, "serial"},
		"no location": {func(m *bundle.Manifest) { m.Location = "" }, "location"},
		"no expiry":   {func(m *bundle.Manifest) { m.Expires = time.Time{} }, "expires"},
	} {
		t.Run(name, func(t *testing.T) {
			old := *m
			tc.edit(&old)
			data, err := bundle.Encode(&old, key)
			if err != nil {
				t.Fatal(err)
			}
			prod.Put(ctx, bundle.ManifestKey, data, "")
			_, err = fetchAt(prod, key, t0)
			want := ".admitfn/manifest.json: invalid bundle manifest: a signed manifest must carry " + tc.want + " (publish it with this version of admitfn push)"
			if !errors.Is(err, bundle.ErrInvalidManifest) || err.Error() != want {
				t.Fatalf("error %v\nwant %s", err, want)
			}
			// Without a key nothing binds anyway: an unsigned manifest
			// may leave them out (the Terraform modules do).
			if _, err := fetchAt(prod, nil, t0); err != nil {
				t.Fatalf("unsigned: %v", err)
			}
		})
	}
}

func TestNewer(t *testing.T) {
	snap := func(serial int64, id string) *bundle.Snapshot {
		return &bundle.Snapshot{Manifested: true, Serial: serial, BundleID: id}
	}
	for name, tc := range map[string]struct {
		prev, next *bundle.Snapshot
		want       string
	}{
		"first load":          {nil, snap(5, "a"), ""},
		"newer":               {snap(5, "a"), snap(6, "b"), ""},
		"same, re-read":       {snap(5, "a"), snap(5, "a"), ""},
		"older":               {snap(5, "a"), snap(4, "b"), "bundle manifest is not newer than the one serving: serial 4 (bundle b), serving serial 5 (bundle a)"},
		"same serial, other":  {snap(5, "a"), snap(5, "b"), "bundle manifest is not newer than the one serving: serial 5 names bundle b, serving bundle a with the same serial"},
		"no serial after one": {snap(5, "a"), snap(0, "b"), "bundle manifest is not newer than the one serving: serial 0 (bundle b), serving serial 5 (bundle a)"},
		"listed, no manifest": {snap(5, "a"), &bundle.Snapshot{BundleID: "b"}, ""},
		"after a listed one":  {&bundle.Snapshot{BundleID: "a"}, snap(1, "b"), ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := bundle.Newer(tc.prev, tc.next)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, bundle.ErrRollback) || err.Error() != tc.want || !bundle.Refused(err) {
				t.Fatalf("error %v, want %s", err, tc.want)
			}
		})
	}
}

func TestResign(t *testing.T) {
	ctx := context.Background()
	key, other := newKey(t), newKey(t)
	dir := store.NewDir(t.TempDir())
	prod := at{dir, "s3://policies/prod"}
	resign := func(b store.Bucket, k ed25519.PrivateKey, id string, now time.Time) (*bundle.Manifest, error) {
		return bundle.Resign(ctx, b, id, bundle.PublishOptions{SignKey: k, Now: now, Expiry: time.Hour})
	}
	if _, err := resign(prod, key, "", t0); !errors.Is(err, bundle.ErrNothingToResign) {
		t.Fatalf("nothing published: %v", err)
	}
	m := publishAt(t, prod, bundleA, key, t0, time.Hour)
	objects, _ := prod.List(ctx)

	later := t0.Add(2 * time.Hour)
	if _, err := fetchAt(prod, key, later); !errors.Is(err, bundle.ErrExpired) {
		t.Fatalf("before re-signing: %v", err)
	}
	r, err := resign(prod, key, m.Bundle, later)
	if err != nil {
		t.Fatal(err)
	}
	if r.Serial != later.Unix() || !r.Expires.Equal(later.Add(time.Hour)) || !r.Created.Equal(m.Created) || r.Bundle != m.Bundle || len(r.Objects) != len(m.Objects) {
		t.Fatalf("re-signed %+v\nfrom %+v", r, m)
	}
	snap, err := fetchAt(prod, key, later)
	if err != nil || snap.Serial != r.Serial || snap.BundleID != m.Bundle {
		t.Fatalf("after re-signing: %+v %v", snap, err)
	}
	if after, _ := prod.List(ctx); len(after) != len(objects) {
		t.Fatalf("re-signing wrote objects: %d before, %d after", len(objects), len(after))
	}

	for name, tc := range map[string]struct {
		b      store.Bucket
		k      ed25519.PrivateKey
		bundle string
		want   string
	}{
		"another key":      {prod, other, "", "bundle signature does not verify (signed by key " + bundle.KeyID(pub(key)) + "); only a manifest signed by this key is re-signed: push the bundle instead"},
		"another bundle":   {prod, key, "0123456789abcdef", ".admitfn/manifest.json names bundle " + m.Bundle + ", not 0123456789abcdef, the bundle of the given policies: push them instead"},
		"another location": {at{dir, "s3://policies/staging"}, key, "", "bundle manifest was published for another location: published for s3://policies/prod, found at s3://policies/staging"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := resign(tc.b, tc.k, tc.bundle, later); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant one containing %s", err, tc.want)
			}
		})
	}
	publishAt(t, prod, bundleA, nil, t0, 0)
	if _, err := resign(prod, key, "", later); !errors.Is(err, bundle.ErrUnsigned) {
		t.Fatalf("unsigned manifest: %v", err)
	}
}
