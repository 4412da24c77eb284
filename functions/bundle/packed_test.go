package bundle_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
)

// bundleDocs has a file of three documents, one only a comment.
var bundleDocs = []policy.Source{
	{Name: "a.yaml", Data: []byte("kind: A\n---\n# nothing\n---\nkind: B\nx: 1.0\n")},
	{Name: "nested/b.json", Data: []byte(`{"kind":"B"}`)},
}

func publishPacked(t *testing.T, b store.Bucket, sources []policy.Source, key ed25519.PrivateKey, compiledBy *bundle.Toolchain) *bundle.Manifest {
	t.Helper()
	m, err := bundle.Publish(context.Background(), b, sources, bundle.PublishOptions{SignKey: key, Pack: true, CompiledBy: compiledBy})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func withDocuments(t *testing.T, sources []policy.Source) []policy.Source {
	t.Helper()
	out := make([]policy.Source, len(sources))
	for i, s := range sources {
		docs, err := policy.Documents(s.Data)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = policy.Source{Name: s.Name, Data: s.Data, Documents: docs}
	}
	return out
}

// A packed bundle is read from its one object: the files as published,
// with their documents parsed when the manifest names this build.
func TestPackedBundle(t *testing.T) {
	ctx := context.Background()
	this := bundle.ThisToolchain()
	other := this
	other.CEL = "v0.0.1"
	key := newKey(t)
	for name, tc := range map[string]struct {
		compiledBy *bundle.Toolchain
		key        ed25519.PrivateKey
		want       []policy.Source
	}{
		"this build, signed":   {&this, key, withDocuments(t, bundleDocs)},
		"this build, unsigned": {&this, nil, bundleDocs},
		"another build":        {&other, key, bundleDocs},
		"no toolchain":         {nil, key, bundleDocs},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			b := store.NewDir(dir)
			var uploaded []string
			m, err := bundle.Publish(ctx, b, bundleDocs, bundle.PublishOptions{SignKey: tc.key, Pack: true, CompiledBy: tc.compiledBy, Uploaded: func(o bundle.ManifestObject) { uploaded = append(uploaded, o.Key) }})
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, bundle.PackedKey))
			if err != nil {
				t.Fatal(err)
			}
			if m.Packed == nil || m.Packed.Key != bundle.PackedKey || m.Packed.Size != int64(len(data)) || m.Packed.SHA256 != sha(string(data)) {
				t.Fatalf("manifest's packed object %+v", m.Packed)
			}
			if uploaded[len(uploaded)-1] != bundle.PackedKey || len(uploaded) != 3 {
				t.Fatalf("uploaded %q: the files, then the packed object", uploaded)
			}
			f := &bundle.Fetcher{Bucket: b}
			if tc.key != nil {
				f.Keys = []ed25519.PublicKey{pub(tc.key)}
			}
			snap, err := f.Fetch(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if !snap.Packed || !reflect.DeepEqual(snap.Sources, tc.want) || snap.BundleID != policy.ID(bundleDocs) {
				t.Fatalf("snapshot %+v", snap)
			}
			// A directory's files are still checked: one edited or removed
			// since the push is an error, not a bundle served from the
			// packed copy.
			a := filepath.Join(dir, "a.yaml")
			if err := os.WriteFile(a, []byte("kind: C\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Fetch(ctx, ""); !errors.Is(err, bundle.ErrIntegrity) || err.Error() != "a.yaml: bundle object does not match its manifest: 8 bytes, manifest says "+itoa(len(bundleDocs[0].Data)) {
				t.Fatalf("a file edited: %v", err)
			}
			if err := os.Remove(a); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Fetch(ctx, ""); !errors.Is(err, store.ErrNotFound) || err.Error() != "a.yaml: object not found" {
				t.Fatalf("a file removed: %v", err)
			}
		})
	}

	// From a bucket the files are not read: the manifest pins the packed
	// object.
	dir := t.TempDir()
	b := at{store.NewDir(dir), "s3://bucket/prod"}
	if _, err := bundle.Publish(ctx, b, bundleDocs, bundle.PublishOptions{Pack: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if snap, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, ""); err != nil || !snap.Packed || !reflect.DeepEqual(snap.Sources, bundleDocs) {
		t.Fatalf("a file removed from a bucket: %v", err)
	}
	// The documents are policy.Documents', a comment-only one null.
	docs := withDocuments(t, bundleDocs)[0].Documents
	if len(docs) != 3 || docs[1] != nil || string(docs[2]) != `{"kind":"B","x":1}` {
		t.Fatalf("documents %q", docs)
	}
}

// Whoever can write to the bucket, but not sign, cannot change a packed
// bundle; unsigned, a packed object that does not hold exactly the files
// the manifest names is refused.
func TestPackedBundleIntegrity(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	b := store.NewDir(t.TempDir())
	m := publishPacked(t, b, bundleDocs, key, nil)
	packed, _, err := b.Get(ctx, bundle.PackedKey, "")
	if err != nil {
		t.Fatal(err)
	}
	signed := &bundle.Fetcher{Bucket: b, Keys: []ed25519.PublicKey{pub(key)}}
	b.Put(ctx, bundle.PackedKey, bytes.Replace(packed, []byte(`"files":[`), []byte(`"files": [`), 1), "")
	if _, err := signed.Fetch(ctx, ""); !errors.Is(err, bundle.ErrIntegrity) || !strings.HasPrefix(err.Error(), ".admitfn/packed.json: bundle object does not match its manifest: "+itoa(len(packed)+1)+" bytes, manifest says "+itoa(len(packed))) {
		t.Fatalf("changed packed object: %v", err)
	}

	// Unsigned manifests that describe a packed object faithfully, which
	// holds other files than the manifest's.
	var p struct {
		Files []struct {
			Name      string            `json:"name"`
			Data      []byte            `json:"data"`
			Documents []json.RawMessage `json:"documents"`
		} `json:"files"`
	}
	if err := json.Unmarshal(packed, &p); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		edit func()
		want string
	}{
		"changed file": {func() { p.Files[0].Data = []byte("kind: C\n") }, "a.yaml: bundle object does not match its manifest: 8 bytes, manifest says " + itoa(len(bundleDocs[0].Data))},
		"renamed file": {func() { p.Files[1].Name = "nested/c.json" }, `.admitfn/packed.json: bundle object does not match its manifest: file 2 is "nested/c.json", manifest says "nested/b.json"`},
		"missing file": {func() { p.Files = p.Files[:1] }, ".admitfn/packed.json: bundle object does not match its manifest: 1 files, manifest names 2"},
		"not JSON":     {nil, ".admitfn/packed.json: bundle object does not match its manifest: unexpected end of JSON input"},
	} {
		t.Run(name, func(t *testing.T) {
			orig := p
			orig.Files = append(orig.Files[:0:0], p.Files...)
			defer func() { p = orig }()
			data := []byte("{")
			if tc.edit != nil {
				tc.edit()
				data, _ = json.Marshal(p)
			}
			b.Put(ctx, bundle.PackedKey, data, "")
			mm := *m
			mm.Packed = &bundle.ManifestObject{Key: bundle.PackedKey, Size: int64(len(data)), SHA256: sha(string(data))}
			env, err := bundle.Encode(&mm, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Put(ctx, bundle.ManifestKey, env, "")
			if _, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, ""); !errors.Is(err, bundle.ErrIntegrity) || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A bundle whose packed form would be over what a function reads in one
// object is published without it.
func TestPackedFormTooLarge(t *testing.T) {
	ctx := context.Background()
	half := []byte(strings.Repeat("#"+strings.Repeat("x", 63)+"\n", store.MaxObjectBytes*3/8/64) + "kind: A\n")
	sources := []policy.Source{{Name: "a.yaml", Data: half}, {Name: "b.yaml", Data: half}}
	b := store.NewDir(t.TempDir())
	m := publishPacked(t, b, sources, nil, nil)
	if m.Packed != nil {
		t.Fatalf("packed %+v", m.Packed)
	}
	if _, _, err := b.Get(ctx, bundle.PackedKey, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("packed object: %v", err)
	}
	snap, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, "")
	if err != nil || snap.Packed || !reflect.DeepEqual(snap.Sources, sources) {
		t.Fatalf("fetch: %v", err)
	}
}

// The packed object is where Publish puts it, and a manifest names no other.
func TestPackedObjectKey(t *testing.T) {
	ctx := context.Background()
	b := store.NewDir(t.TempDir())
	m := publishPacked(t, b, bundleDocs, nil, nil)
	for name, tc := range map[string]struct {
		packed bundle.ManifestObject
		want   string
	}{
		"other key":  {bundle.ManifestObject{Key: "a.yaml", Size: 1, SHA256: strings.Repeat("0", 64)}, `packed object key "a.yaml": want .admitfn/packed.json`},
		"short sha":  {bundle.ManifestObject{Key: bundle.PackedKey, Size: 1, SHA256: "00"}, `object ".admitfn/packed.json": sha256 "00" is not 64 hex digits`},
		"over limit": {bundle.ManifestObject{Key: bundle.PackedKey, Size: store.MaxObjectBytes + 1, SHA256: strings.Repeat("0", 64)}, `object ".admitfn/packed.json": size 33554433 out of range`},
	} {
		t.Run(name, func(t *testing.T) {
			mm := *m
			mm.Packed = &tc.packed
			env, err := bundle.Encode(&mm, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Put(ctx, bundle.ManifestKey, env, "")
			if _, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, ""); !errors.Is(err, bundle.ErrInvalidManifest) || !strings.HasSuffix(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalidManifest: …%s", err, tc.want)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// What a function enforces comes from the files it checked: documents
// edited in packed.json, under an unsigned manifest that names the edited
// object's digest, are not what it compiles, while every file still
// matches the manifest. Under a signature, an edit fails the digest.
func TestPackedDocumentsAreBoundToTheFiles(t *testing.T) {
	ctx := context.Background()
	this := bundle.ThisToolchain()
	for _, loc := range []string{"", "s3://bucket/prod"} {
		t.Run("at "+loc, func(t *testing.T) {
			var b store.Bucket = store.NewDir(t.TempDir())
			if loc != "" {
				b = at{b, loc}
			}
			m, err := bundle.Publish(ctx, b, bundleDocs, bundle.PublishOptions{Pack: true, CompiledBy: &this})
			if err != nil {
				t.Fatal(err)
			}
			packed, _, err := b.Get(ctx, bundle.PackedKey, "")
			if err != nil {
				t.Fatal(err)
			}
			forged := bytes.Replace(packed, []byte(`{"kind":"A"}`), []byte(`{"kind":"Z"}`), 1)
			if bytes.Equal(forged, packed) {
				t.Fatalf("no document to edit in %s", packed)
			}
			b.Put(ctx, bundle.PackedKey, forged, "")
			mm := *m
			mm.Packed = &bundle.ManifestObject{Key: bundle.PackedKey, Size: int64(len(forged)), SHA256: sha(string(forged))}
			env, err := bundle.Encode(&mm, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Put(ctx, bundle.ManifestKey, env, "")
			snap, err := (&bundle.Fetcher{Bucket: b}).Fetch(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			// No documents: policy.Parse parses the files' YAML.
			if !snap.Packed || !reflect.DeepEqual(snap.Sources, bundleDocs) {
				t.Fatalf("sources %+v\nwant the files, without documents", snap.Sources)
			}
		})
	}
}

// A toolchain is this build's only when it names one source: a version or
// a clean revision, or the binary's build ID. Unstamped builds of any code
// ("(devel)", no revision) do not trust each other.
func TestToolchainIdentity(t *testing.T) {
	this := bundle.ThisToolchain()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	// A test binary has no VCS stamp: its build ID names it.
	if this.Admitfn != "(devel)" || this.Revision != "" || this.Build != strings.TrimSpace(string(out)) || !this.IsThis() {
		t.Fatalf("this toolchain %+v, build ID %q", this, out)
	}
	for name, edit := range map[string]func(*bundle.Toolchain){
		"unstamped":        func(tc *bundle.Toolchain) { tc.Build = "" },
		"another build":    func(tc *bundle.Toolchain) { tc.Build += "x" },
		"dirty revision":   func(tc *bundle.Toolchain) { tc.Build, tc.Revision = "", "0123abc-dirty" },
		"dirty version":    func(tc *bundle.Toolchain) { tc.Build, tc.Admitfn = "", "v0.0.0-20261127-0123abc+dirty" },
		"another revision": func(tc *bundle.Toolchain) { tc.Revision = "0123abc" },
	} {
		tc := this
		edit(&tc)
		if tc.IsThis() {
			t.Errorf("%s: %+v is taken for this build", name, tc)
		}
	}
	var none *bundle.Toolchain
	if none.IsThis() {
		t.Error("no toolchain is taken for this build")
	}
}
