package bundle_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
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
	// and does not expire; serials still increase, from its own manifests
	// only (the one there was published for the bucket).
	m3 := publishAt(t, dir, bundleA, key, t0, time.Hour)
	m3 = publishAt(t, dir, bundleA, key, t0, time.Hour)
	if m3.Location != "" || !m3.Expires.IsZero() || m3.Serial != t0.Unix()+1 {
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
	if _, err := resign(prod, key, policy.ID(bundleA), t0); !errors.Is(err, bundle.ErrNothingToResign) {
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
		"another key":      {prod, other, m.Bundle, "bundle signature does not verify (signed by key " + bundle.KeyID(pub(key)) + "); only a manifest signed by this key is re-signed: push the bundle instead"},
		"another bundle":   {prod, key, "0123456789abcdef", ".admitfn/manifest.json names bundle " + m.Bundle + " (serial " + fmt.Sprint(r.Serial) + ", created 2026-11-22T10:00:00Z), not 0123456789abcdef, the bundle to re-sign: if you did not publish it, someone put an older manifest back; push the bundle instead"},
		"another location": {at{dir, "s3://policies/staging"}, key, m.Bundle, "bundle manifest was published for another location: published for s3://policies/prod, found at s3://policies/staging"},
		"no bundle named":  {prod, key, "", "re-sign: name the bundle to re-sign (its policies, or its bundle ID)"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := resign(tc.b, tc.k, tc.bundle, later); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant one containing %s", err, tc.want)
			}
		})
	}
	if _, err := bundle.Publish(ctx, prod, bundleA, bundle.PublishOptions{Now: t0, AllowUnsigned: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := resign(prod, key, m.Bundle, later); !errors.Is(err, bundle.ErrUnsigned) {
		t.Fatalf("unsigned manifest: %v", err)
	}
}

// forge writes, at b, a manifest of bundleA's first file with serial and
// signer key (nil: unsigned), as anyone who can write the bucket can.
func forge(t *testing.T, b store.Bucket, loc string, serial int64, key ed25519.PrivateKey) {
	t.Helper()
	m := &bundle.Manifest{APIVersion: bundle.ManifestAPIVersion, Kind: bundle.ManifestKind, Bundle: policy.ID(bundleA[:1]), Serial: serial, Location: loc, Expires: t0.Add(time.Hour),
		Objects: []bundle.ManifestObject{{Key: "a.yaml", Size: 8, SHA256: sha("kind: A\n")}}}
	data, err := bundle.Encode(m, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(context.Background(), bundle.ManifestKey, data, ""); err != nil {
		t.Fatal(err)
	}
}

// A bucket writer without the signing key cannot steer the serial of the
// next signed push: a forged manifest in the way is reported and not
// followed, so its serial can neither wrap the next one negative nor push
// it so far ahead that every later honest push looks like a rollback.
func TestPushDoesNotFollowAnUnverifiedSerial(t *testing.T) {
	ctx := context.Background()
	key, other := newKey(t), newKey(t)
	prod := at{store.NewDir(t.TempDir()), "s3://policies/prod"}
	first := publishAt(t, prod, bundleA, key, t0, time.Hour)
	serving, err := fetchAt(prod, key, t0)
	if err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Minute)
	last := first.Serial
	for name, tc := range map[string]struct {
		serial int64
		signer ed25519.PrivateKey
		loc    string
		want   string
	}{
		"unsigned, the largest serial": {1<<63 - 1, nil, "s3://policies/prod", "the manifest at s3://policies/prod does not verify with a trusted key (bundle is not signed): its serial is not followed"},
		"unsigned, far ahead":          {1e15, nil, "s3://policies/prod", "the manifest at s3://policies/prod does not verify with a trusted key (bundle is not signed): its serial is not followed"},
		"another key":                  {1e15, other, "s3://policies/prod", "the manifest at s3://policies/prod does not verify with a trusted key (bundle signature does not verify (signed by key " + bundle.KeyID(pub(other)) + ")): its serial is not followed"},
		"signed for staging":           {1e15, key, "s3://policies/staging", "the manifest at s3://policies/prod was published for s3://policies/staging: its serial is not followed"},
		"signed, beyond the limit":     {1e15, key, "s3://policies/prod", "the manifest at s3://policies/prod has serial 1000000000000000, which functions refuse: it is not followed (functions still serving it refuse this push as a rollback until they restart)"},
	} {
		t.Run(name, func(t *testing.T) {
			forge(t, prod, tc.loc, tc.serial, tc.signer)
			var warnings []string
			m, err := bundle.Publish(ctx, prod, bundleA, bundle.PublishOptions{SignKey: key, Now: later, Expiry: time.Hour, Warn: func(s string) { warnings = append(warnings, s) }})
			if err != nil {
				t.Fatal(err)
			}
			// It follows the last manifest signed there instead.
			want := []string{tc.want, fmt.Sprintf("following the last signed manifest (.admitfn/signed.json: bundle %s, serial %d) instead", policy.ID(bundleA), last)}
			if wantSerial := max(later.Unix(), last+1); m.Serial != wantSerial || fmt.Sprintf("%q", warnings) != fmt.Sprintf("%q", want) {
				t.Fatalf("serial %d (want %d), warnings %q\nwant %q", m.Serial, wantSerial, warnings, want)
			}
			last = m.Serial
			// A function that served the first push takes this one.
			next, err := fetchAt(prod, key, later)
			if err != nil || bundle.Newer(serving, next) != nil || next.Serial <= first.Serial {
				t.Fatalf("a function serving serial %d: %+v %v %v", first.Serial, next, err, bundle.Newer(serving, next))
			}
		})
	}
}

// Functions refuse a serial out of the range push writes: negative, or more
// than MaxSerialLead ahead of their clock, even under a valid signature.
func TestFunctionsRefuseSerialsOutOfRange(t *testing.T) {
	key := newKey(t)
	prod := at{store.NewDir(t.TempDir()), "s3://policies/prod"}
	publishAt(t, prod, bundleA[:1], key, t0, time.Hour)
	limit := t0.Unix() + bundle.MaxSerialLead
	forge(t, prod, "s3://policies/prod", limit, key)
	if snap, err := fetchAt(prod, key, t0); err != nil || snap.Serial != limit {
		t.Fatalf("serial at the limit: %+v %v", snap, err)
	}
	for serial, want := range map[int64]string{
		limit + 1: fmt.Sprintf(".admitfn/manifest.json: invalid bundle manifest: serial %d is more than 366 days ahead of this function's clock (at most %d now)", limit+1, limit),
		1<<63 - 1: fmt.Sprintf(".admitfn/manifest.json: invalid bundle manifest: serial %d is more than 366 days ahead of this function's clock (at most %d now)", int64(1<<63-1), limit),
		-5:        ".admitfn/manifest.json: invalid bundle manifest: serial -5 is negative",
	} {
		forge(t, prod, "s3://policies/prod", serial, key)
		if _, err := fetchAt(prod, key, t0); !errors.Is(err, bundle.ErrInvalidManifest) || !bundle.Refused(err) || err.Error() != want {
			t.Errorf("serial %d: %v\nwant %s", serial, err, want)
		}
	}
}

// Push never writes a serial functions refuse, nor one that does not exceed
// the verified one: at the limit it fails, and writes nothing.
func TestPushRefusesASerialFunctionsWouldRefuse(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	prod := at{store.NewDir(t.TempDir()), "s3://policies/prod"}
	limit := t0.Unix() + bundle.MaxSerialLead
	forge(t, prod, "s3://policies/prod", limit, key)
	before, _, _ := prod.Get(ctx, bundle.ManifestKey, "")
	_, err := bundle.Publish(ctx, prod, bundleA, bundle.PublishOptions{SignKey: key, Now: t0})
	want := fmt.Sprintf("publish: serial %d would be more than 366 days ahead of the clock, which functions refuse; the manifest it replaces has serial %d", limit+1, limit)
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	if _, err := bundle.Resign(ctx, prod, policy.ID(bundleA[:1]), bundle.PublishOptions{SignKey: key, Now: t0}); err == nil || err.Error() != want {
		t.Fatalf("re-sign: %v\nwant %s", err, want)
	}
	if after, _, _ := prod.Get(ctx, bundle.ManifestKey, ""); string(after) != string(before) {
		t.Fatal("a refused push replaced the manifest")
	}
	// Functions that trust a key refuse an unsigned bundle: so does push,
	// before it uploads anything.
	empty := at{store.NewDir(t.TempDir()), "s3://policies/prod"}
	_, err = bundle.Publish(ctx, empty, bundleA, bundle.PublishOptions{TrustedKeys: []ed25519.PublicKey{pub(key)}, Now: t0})
	if want := "publish: the location's bundles are signed: functions that trust key " + bundle.KeyID(pub(key)) + " refuse an unsigned bundle: sign it"; err == nil || err.Error() != want {
		t.Fatalf("unsigned with a trusted key: %v\nwant %s", err, want)
	}
	if objs, _ := empty.List(ctx); len(objs) != 0 {
		t.Fatalf("a refused push uploaded %d objects", len(objs))
	}
	if _, _, err := empty.Get(ctx, bundle.LockKey, ""); err != nil {
		// A store without deletes: the lock stays, its lease ended.
		t.Fatalf("lock: %v", err)
	}
}

// replacing is a bucket where another push lands right after each manifest
// written through it.
type replacing struct {
	store.Bucket
	after []byte
}

func (r replacing) PutIf(ctx context.Context, key string, data []byte, ct, ifMatch string) (store.Object, error) {
	if key == bundle.ManifestKey {
		data = r.after
	}
	return r.Bucket.PutIf(ctx, key, data, ct, ifMatch)
}

// Push reads back what it wrote as a function would, and fails when that is
// not what it published.
func TestPushReadsBackWhatItWrote(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	dir := store.NewDir(t.TempDir())
	prod := at{dir, "s3://policies/prod"}
	publishAt(t, prod, bundleA, key, t0, time.Hour)
	other, _, _ := prod.Get(ctx, bundle.ManifestKey, "")
	_, err := bundle.Publish(ctx, replacing{prod, other}, bundleA, bundle.PublishOptions{SignKey: key, Now: t0.Add(time.Minute), Expiry: time.Hour})
	want := fmt.Sprintf("read back the published bundle: the location holds bundle %s with serial %d, not bundle %s with serial %d: another push replaced it", policy.ID(bundleA), t0.Unix(), policy.ID(bundleA), t0.Add(time.Minute).Unix())
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	// A store that keeps something else than what was written: functions
	// would refuse it, and so does push.
	_, err = bundle.Publish(ctx, replacing{prod, []byte("{}")}, bundleA, bundle.PublishOptions{SignKey: key, Now: t0.Add(time.Minute)})
	if !errors.Is(err, bundle.ErrInvalidManifest) || err.Error() != "read back the published bundle: .admitfn/manifest.json: invalid bundle manifest: no manifest field" {
		t.Fatalf("manifest not kept: %v", err)
	}
}

// removing is a bucket location that can delete, as S3 and GCS can; with
// err set every delete fails, as without the permission.
type removing struct {
	at
	dir *store.Dir
	err error
}

func (r removing) Remove(ctx context.Context, key string) error {
	if r.err != nil {
		return r.err
	}
	return r.dir.Remove(ctx, key)
}

// A publish over a bucket's prefix removes, once it is read back, what the
// bundle it replaced had and it has not; a failed delete is a warning, and
// the bundle is published all the same.
func TestPublishRemovesWhatItReplaced(t *testing.T) {
	key := newKey(t)
	second := []policy.Source{{Name: "a.yaml", Data: []byte("kind: A2\n")}, {Name: "c.yaml", Data: []byte("kind: C\n")}}
	for _, denied := range []bool{false, true} {
		dir := store.NewDir(t.TempDir())
		b := removing{at: at{dir, "s3://policies/prod"}, dir: dir}
		if denied {
			b.err = errors.New("AccessDenied")
		}
		publishAt(t, b, bundleA, key, t0, 0)
		var removed, warnings []string
		m, err := bundle.Publish(context.Background(), b, second, bundle.PublishOptions{
			SignKey: key, Now: t0.Add(time.Minute),
			Removed: func(k string) { removed = append(removed, k) },
			Warn:    func(w string) { warnings = append(warnings, w) },
		})
		if err != nil {
			t.Fatal(err)
		}
		objs, _ := dir.List(context.Background())
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		snap, err := fetchAt(b, key, t0.Add(time.Minute))
		if err != nil || snap.BundleID != m.Bundle {
			t.Errorf("denied %v: the second bundle does not fetch: %v", denied, err)
		}
		wantKeys := "a.yaml c.yaml" // List leaves .admitfn/ out
		wantWarnings := []string(nil)
		wantRemoved := "nested/b.json"
		if denied {
			wantKeys = "a.yaml c.yaml nested/b.json"
			wantWarnings = []string{"could not remove nested/b.json, which the bundle it replaced had and it has not: AccessDenied"}
			wantRemoved = ""
		}
		if strings.Join(keys, " ") != wantKeys || strings.Join(removed, " ") != wantRemoved || fmt.Sprint(warnings) != fmt.Sprint(wantWarnings) {
			t.Errorf("denied %v: holds %q, removed %q, warnings %q; want %q, %q, %q", denied, keys, removed, warnings, wantKeys, wantRemoved, wantWarnings)
		}
	}
}

// racing is a removing bucket where another push lands its manifest right
// after this one's is read back (when the new bundle's c.yaml is read).
type racing struct {
	removing
	land func()
}

func (r *racing) Get(ctx context.Context, key, ifNoneMatch string) ([]byte, store.Object, error) {
	data, o, err := r.removing.Get(ctx, key, ifNoneMatch)
	r.read(key)
	return data, o, err
}

func (r *racing) GetVersion(ctx context.Context, key, version string) ([]byte, error) {
	data, err := r.removing.GetVersion(ctx, key, version)
	r.read(key)
	return data, err
}

func (r *racing) read(key string) {
	if key == "c.yaml" && r.land != nil {
		land := r.land
		r.land = nil
		land()
	}
}

// A push that another one replaced after its read back removes nothing:
// the files may be the other's.
func TestPublishLeavesFilesToAPushThatLanded(t *testing.T) {
	key := newKey(t)
	dir := store.NewDir(t.TempDir())
	loc := at{dir, "s3://policies/prod"}
	publishAt(t, loc, bundleA, key, t0, 0)
	second := []policy.Source{{Name: "a.yaml", Data: []byte("kind: A2\n")}, {Name: "c.yaml", Data: []byte("kind: C\n")}}
	b := &racing{removing: removing{at: loc, dir: dir}}
	// bundleA again, newer, by a push that took the lock over: this one's
	// lease (by the clock of the other) had passed.
	b.land = func() { publishAt(t, loc, bundleA, key, t0.Add(10*time.Minute), 0) }
	var removed, warnings []string
	_, err := bundle.Publish(context.Background(), b, second, bundle.PublishOptions{
		SignKey: key, Now: t0.Add(time.Minute),
		Removed: func(k string) { removed = append(removed, k) },
		Warn:    func(w string) { warnings = append(warnings, w) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"left the files the bundle it replaced had: another push replaced this one meanwhile"}
	if len(removed) != 0 || fmt.Sprint(warnings) != fmt.Sprint(want) {
		t.Errorf("removed %q, warnings %q; want none removed and %q", removed, warnings, want)
	}
	snap, err := fetchAt(loc, key, t0.Add(10*time.Minute))
	if err != nil || snap.BundleID != policy.ID(bundleA) {
		t.Errorf("the bundle that landed does not fetch: %v", err)
	}
}
