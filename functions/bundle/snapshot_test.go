package bundle_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
)

var bundleA = []policy.Source{
	{Name: "a.yaml", Data: []byte("kind: A\n")},
	{Name: "nested/b.json", Data: []byte(`{"kind":"B"}`)},
}

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func publish(t *testing.T, b store.Bucket, sources []policy.Source, key ed25519.PrivateKey) *bundle.Manifest {
	t.Helper()
	m, err := bundle.Publish(context.Background(), b, sources, bundle.PublishOptions{SignKey: key, Now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPublishThenFetch(t *testing.T) {
	dir := t.TempDir()
	b := store.NewDir(dir)
	m := publish(t, b, bundleA, nil)
	want := []bundle.ManifestObject{{Key: "a.yaml", Size: 8, SHA256: sha("kind: A\n")}, {Key: "nested/b.json", Size: 12, SHA256: sha(`{"kind":"B"}`)}}
	if m.Bundle != policy.ID(bundleA) || !reflect.DeepEqual(m.Objects, want) || m.APIVersion != bundle.ManifestAPIVersion || m.Kind != bundle.ManifestKind {
		t.Fatalf("manifest %+v", m)
	}
	f := &bundle.Fetcher{Bucket: b}
	snap, err := f.Fetch(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.Sources, bundleA) || snap.BundleID != m.Bundle || !snap.Manifested || !snap.Created.Equal(m.Created) || snap.Token == "" {
		t.Fatalf("snapshot %+v", snap)
	}
	if _, err := f.Fetch(context.Background(), snap.Token); !errors.Is(err, bundle.ErrNotModified) {
		t.Fatalf("fetch with the current token: %v, want ErrNotModified", err)
	}

	// Objects changed without a new manifest: the manifest still holds,
	// and the objects no longer match it.
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("kind: C\n"), 0o644)
	if _, err := f.Fetch(context.Background(), snap.Token); !errors.Is(err, bundle.ErrNotModified) {
		t.Fatalf("objects changed, manifest not: %v, want ErrNotModified", err)
	}
	_, err = f.Fetch(context.Background(), "")
	if !errors.Is(err, bundle.ErrIntegrity) || err.Error() != "a.yaml: bundle object does not match its manifest: sha256 "+sha("kind: C\n")+", manifest says "+sha("kind: A\n") {
		t.Fatalf("changed object: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("kind: AA\n"), 0o644)
	if _, err := f.Fetch(context.Background(), ""); !errors.Is(err, bundle.ErrIntegrity) || !strings.Contains(err.Error(), "9 bytes, manifest says 8") {
		t.Fatalf("resized object: %v", err)
	}
	os.Remove(filepath.Join(dir, "a.yaml"))
	if _, err := f.Fetch(context.Background(), ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted object: %v", err)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestSignatures(t *testing.T) {
	signer, other := newKey(t), newKey(t)
	b := store.NewDir(t.TempDir())
	ctx := context.Background()

	publish(t, b, bundleA, signer)
	for _, keys := range [][]ed25519.PublicKey{{pub(signer)}, {pub(other), pub(signer)}} {
		if _, err := (&bundle.Fetcher{Bucket: b, Keys: keys}).Fetch(ctx, ""); err != nil {
			t.Fatalf("signed bundle, keys %d: %v", len(keys), err)
		}
	}
	_, err := (&bundle.Fetcher{Bucket: b, Keys: []ed25519.PublicKey{pub(other)}}).Fetch(ctx, "")
	if !errors.Is(err, bundle.ErrBadSignature) || err.Error() != ".admitfn/manifest.json: bundle signature does not verify (signed by key "+bundle.KeyID(pub(signer))+")" {
		t.Fatalf("signed by another key: %v", err)
	}

	// One changed byte of the manifest breaks the signature.
	raw, _, _ := b.Get(ctx, bundle.ManifestKey, "")
	b.Put(ctx, bundle.ManifestKey, bytes.Replace(raw, []byte(`"size": 8`), []byte(`"size": 9`), 1), "")
	if _, err := (&bundle.Fetcher{Bucket: b, Keys: []ed25519.PublicKey{pub(signer)}}).Fetch(ctx, ""); !errors.Is(err, bundle.ErrBadSignature) {
		t.Fatalf("tampered manifest: %v", err)
	}

	// A signed location stays signed: an unsigned publish over it is
	// refused, and writes nothing, unless asked for.
	before, _, _ := b.Get(ctx, bundle.ManifestKey, "")
	_, err = bundle.Publish(ctx, b, bundleA, bundle.PublishOptions{Now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)})
	if !errors.Is(err, bundle.ErrSignedLocation) || !strings.Contains(err.Error(), "is signed by key "+bundle.KeyID(pub(signer))+", so its functions verify signatures") {
		t.Fatalf("unsigned over signed: %v", err)
	}
	if after, _, _ := b.Get(ctx, bundle.ManifestKey, ""); !bytes.Equal(after, before) {
		t.Fatal("a refused unsigned publish replaced the manifest")
	}
	if _, err := bundle.Publish(ctx, b, bundleA, bundle.PublishOptions{AllowUnsigned: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := (&bundle.Fetcher{Bucket: b, Keys: []ed25519.PublicKey{pub(signer)}}).Fetch(ctx, ""); !errors.Is(err, bundle.ErrUnsigned) {
		t.Fatalf("unsigned bundle with a key: %v", err)
	}
	if _, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, ""); err != nil {
		t.Fatalf("unsigned bundle without a key: %v", err)
	}

	bare := store.NewDir(t.TempDir())
	bare.Put(ctx, "a.yaml", []byte("kind: A\n"), "")
	_, err = (&bundle.Fetcher{Bucket: bare, Keys: []ed25519.PublicKey{pub(signer)}}).Fetch(ctx, "")
	if !errors.Is(err, bundle.ErrUnsigned) || err.Error() != "no manifest: bundle is not signed (a public key is configured, so only signed bundles load)" {
		t.Fatalf("no manifest with a key: %v", err)
	}
}

func TestInvalidManifests(t *testing.T) {
	ctx := context.Background()
	good := `{"apiVersion":"admitfn.io/v1alpha1","kind":"BundleManifest","bundle":"x","created":"2026-11-22T10:00:00Z","objects":[{"key":"a.yaml","size":1,"sha256":"` + strings.Repeat("0", 64) + `"}]}`
	for name, tc := range map[string]struct{ manifest, want string }{
		"not JSON":       {`{`, "unexpected end of JSON input"},
		"no manifest":    {`{}`, "no manifest field"},
		"wrong kind":     {strings.Replace(good, "BundleManifest", "Bundle", 1), `apiVersion "admitfn.io/v1alpha1", kind "Bundle": want admitfn.io/v1alpha1 BundleManifest`},
		"unknown field":  {strings.Replace(good, `"bundle"`, `"extra":1,"bundle"`, 1), `json: unknown field "extra"`},
		"no objects":     {strings.Replace(good, good[strings.Index(good, `[`):strings.LastIndex(good, `]`)+1], `[]`, 1), "no objects"},
		"escaping key":   {strings.Replace(good, `"a.yaml"`, `"../a.yaml"`, 1), `object key "../a.yaml": not a policy file of a bundle (.yaml, .yml or .json, relative, not hidden)`},
		"hidden key":     {strings.Replace(good, `"a.yaml"`, `".hidden/a.yaml"`, 1), `object key ".hidden/a.yaml": not a policy file`},
		"test file":      {strings.Replace(good, `"a.yaml"`, `"a_test.yaml"`, 1), `object key "a_test.yaml": not a policy file`},
		"absolute key":   {strings.Replace(good, `"a.yaml"`, `"/a.yaml"`, 1), `object key "/a.yaml": not a policy file`},
		"other file":     {strings.Replace(good, `"a.yaml"`, `"a.sh"`, 1), `object key "a.sh": not a policy file`},
		"duplicate key":  {strings.Replace(good, `}]}`, `},{"key":"a.yaml","size":1,"sha256":"`+strings.Repeat("0", 64)+`"}]}`, 1), `object key "a.yaml" listed twice`},
		"short sha256":   {strings.Replace(good, strings.Repeat("0", 64), "00", 1), `object "a.yaml": sha256 "00" is not 64 hex digits`},
		"negative size":  {strings.Replace(good, `"size":1`, `"size":-1`, 1), `object "a.yaml": size -1 out of range`},
		"oversize":       {strings.Replace(good, `"size":1`, `"size":99999999999`, 1), `object "a.yaml": size 99999999999 out of range`},
		"manifest array": {`{"manifest":[]}`, "cannot unmarshal array"},
	} {
		t.Run(name, func(t *testing.T) {
			b := store.NewDir(t.TempDir())
			env := tc.manifest
			if strings.HasPrefix(env, `{"apiVersion"`) {
				env = `{"manifest":` + env + `}`
			}
			b.Put(ctx, bundle.ManifestKey, []byte(env), "")
			_, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, "")
			if !errors.Is(err, bundle.ErrInvalidManifest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalidManifest with %q", err, tc.want)
			}
		})
	}
}

// The manifest's bundle ID must be the one its objects make, so a manifest
// cannot pass off one bundle as another.
func TestBundleIDMismatch(t *testing.T) {
	ctx := context.Background()
	b := store.NewDir(t.TempDir())
	m := publish(t, b, bundleA, nil)
	raw, _, _ := b.Get(ctx, bundle.ManifestKey, "")
	b.Put(ctx, bundle.ManifestKey, bytes.Replace(raw, []byte(m.Bundle), []byte("0123456789abcdef"), 1), "")
	_, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, "")
	if !errors.Is(err, bundle.ErrIntegrity) || err.Error() != "bundle object does not match its manifest: the objects make bundle "+m.Bundle+", manifest says 0123456789abcdef" {
		t.Fatalf("error %v", err)
	}
}

// A manifest may leave out the bundle ID and the creation time: the
// Terraform modules write it with digests and sizes only (HCL cannot compute
// the ID). The digests still pin every byte, and the ID is computed.
func TestManifestWithoutBundleID(t *testing.T) {
	ctx := context.Background()
	b := store.NewDir(t.TempDir())
	var objects []string
	for _, s := range bundleA {
		b.Put(ctx, s.Name, s.Data, "")
		sum := sha256.Sum256(s.Data)
		objects = append(objects, fmt.Sprintf(`{"key":%q,"size":%d,"sha256":"%x"}`, s.Name, len(s.Data), sum))
	}
	b.Put(ctx, bundle.ManifestKey, []byte(`{"manifest":{"apiVersion":"admitfn.io/v1alpha1","kind":"BundleManifest","objects":[`+strings.Join(objects, ",")+`]}}`), "")
	snap, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.Sources, bundleA) || !snap.Manifested || snap.BundleID != policy.ID(bundleA) || !snap.Created.IsZero() {
		t.Fatalf("snapshot %+v", snap)
	}
	// A changed byte still fails its digest.
	b.Put(ctx, "a.yaml", []byte("kind: X\n"), "")
	if _, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, ""); !errors.Is(err, bundle.ErrIntegrity) {
		t.Fatalf("changed object: %v", err)
	}
}

func TestWithoutManifest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := store.NewDir(dir)
	for name, data := range map[string]string{
		"a.yaml": "kind: A\n", "nested/b.json": `{"kind":"B"}`, "a_test.yaml": "cases: []", "README.md": "#", ".hidden/c.yaml": "x", "nested/.d.yaml": "x",
	} {
		b.Put(ctx, name, []byte(data), "")
	}
	f := &bundle.Fetcher{Bucket: b}
	snap, err := f.Fetch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.Sources, bundleA) || snap.Manifested || snap.BundleID != policy.ID(bundleA) || !strings.HasPrefix(snap.Token, "list:") {
		t.Fatalf("snapshot %+v", snap)
	}
	if _, err := f.Fetch(ctx, snap.Token); !errors.Is(err, bundle.ErrNotModified) {
		t.Fatalf("unchanged listing: %v", err)
	}
	b.Put(ctx, "a.yaml", []byte("kind: AB\n"), "")
	snap2, err := f.Fetch(ctx, snap.Token)
	if err != nil || string(snap2.Sources[0].Data) != "kind: AB\n" || snap2.Token == snap.Token {
		t.Fatalf("changed listing: %+v %v", snap2, err)
	}
	// A manifest, once published, takes over from the listing.
	m := publish(t, b, bundleA, nil)
	snap3, err := f.Fetch(ctx, snap2.Token)
	if err != nil || !snap3.Manifested || snap3.BundleID != m.Bundle {
		t.Fatalf("after publishing: %+v %v", snap3, err)
	}

	if _, err := (&bundle.Fetcher{Bucket: store.NewDir(t.TempDir())}).Fetch(ctx, ""); !errors.Is(err, bundle.ErrEmpty) {
		t.Fatalf("empty location: %v", err)
	}
}

func TestKeys(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	priv1, pub1, err := bundle.MarshalKeys(k1)
	if err != nil {
		t.Fatal(err)
	}
	_, pub2, _ := bundle.MarshalKeys(k2)
	back, err := bundle.ParsePrivateKey(priv1)
	if err != nil || !back.Equal(k1) {
		t.Fatalf("private key round trip: %v", err)
	}
	keys, err := bundle.ParsePublicKeys(string(pub1) + "\n" + string(pub2))
	if err != nil || len(keys) != 2 || !keys[0].Equal(pub(k1)) || !keys[1].Equal(pub(k2)) {
		t.Fatalf("PEM keys: %v %v", keys, err)
	}
	b64 := base64.StdEncoding.EncodeToString(pub(k1)) + ", " + base64.StdEncoding.EncodeToString(pub(k2))
	keys, err = bundle.ParsePublicKeys(b64)
	if err != nil || len(keys) != 2 || !keys[1].Equal(pub(k2)) {
		t.Fatalf("base64 keys: %v %v", keys, err)
	}
	if keys, err := bundle.ParsePublicKeys("  "); err != nil || keys != nil {
		t.Fatalf("no keys: %v %v", keys, err)
	}
	for in, want := range map[string]string{
		"bm90IGEga2V5":                 `public key "bm90IGEga2V5": want a PEM PUBLIC KEY or 32 bytes in base64`,
		string(priv1):                  `public key: PEM block "PRIVATE KEY": want PUBLIC KEY`,
		string(pub1) + "trailing text": "public key: text outside PEM blocks",
	} {
		if _, err := bundle.ParsePublicKeys(in); err == nil || err.Error() != want {
			t.Errorf("ParsePublicKeys(%.20q): %v, want %q", in, err, want)
		}
	}
	if _, err := bundle.ParsePrivateKey(pub1); err == nil || err.Error() != "signing key: want a PEM PRIVATE KEY block (PKCS #8)" {
		t.Errorf("ParsePrivateKey(public key): %v", err)
	}
}

// A directory that carries a manifest holds exactly the files it names: a
// policy file added after the push is refused, not silently left out, and
// the message says to push again. A push into the directory removes the
// files an earlier push wrote that the bundle no longer has, and refuses
// to mix its files with policy files it did not write.
func TestPushedDirectoryHoldsExactlyItsManifest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := store.NewDir(dir)
	publish(t, b, bundleA, nil)
	os.WriteFile(filepath.Join(dir, "added.yaml"), []byte("kind: C\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "added_test.yaml"), []byte("kind: T\n"), 0o644)
	_, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, "")
	want := "bundle directory holds a policy file its manifest does not name: added.yaml, not named by .admitfn/manifest.json, which the bundle was pushed with: push the bundle again (admitfn push -p … --to " + dir + ") to include it, or remove it"
	if !errors.Is(err, bundle.ErrUnlisted) || !bundle.Refused(err) || err.Error() != want {
		t.Fatalf("added file: %v\nwant %s", err, want)
	}

	// Pushing the bundle with it again serves it.
	withC := append(bundleA[:2:2], policy.Source{Name: "added.yaml", Data: []byte("kind: C\n")})
	publish(t, b, withC, nil)
	snap, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, "")
	if err != nil || len(snap.Sources) != 3 {
		t.Fatalf("pushed again: %+v %v", snap, err)
	}
	// A push of a smaller bundle removes what the bundle dropped.
	publish(t, b, bundleA[:1], nil)
	if _, err := os.Stat(filepath.Join(dir, "added.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dropped file is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nested", "b.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dropped file is still there: %v", err)
	}
	if snap, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, ""); err != nil || !reflect.DeepEqual(snap.Sources, bundleA[:1]) {
		t.Fatalf("after the smaller push: %+v %v", snap, err)
	}

	// A file no push wrote is not push's to delete.
	os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte("kind: M\n"), 0o644)
	before, _, _ := b.Get(ctx, bundle.ManifestKey, "")
	_, err = bundle.Publish(ctx, b, bundleA, bundle.PublishOptions{})
	if want := "publish: " + dir + " holds mine.yaml, which is not part of the bundle nor of an earlier push: remove it, or push to an empty directory"; err == nil || err.Error() != want {
		t.Fatalf("foreign file: %v\nwant %s", err, want)
	}
	if after, _, _ := b.Get(ctx, bundle.ManifestKey, ""); !bytes.Equal(before, after) {
		t.Fatal("a refused push wrote a manifest")
	}
	if _, err := os.Stat(filepath.Join(dir, "mine.yaml")); err != nil {
		t.Fatalf("push removed a file it did not write: %v", err)
	}
}

// Push refuses a file larger than functions read, before it uploads
// anything.
func TestPushRefusesAFileFunctionsWouldNotRead(t *testing.T) {
	dir := t.TempDir()
	big := []policy.Source{{Name: "big.yaml", Data: bytes.Repeat([]byte("#"), store.MaxObjectBytes+1)}}
	_, err := bundle.Publish(context.Background(), store.NewDir(dir), big, bundle.PublishOptions{})
	if want := "publish: big.yaml is 33554433 bytes, larger than functions read (32 MiB a file)"; err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused push wrote %d entries", len(entries))
	}
}
