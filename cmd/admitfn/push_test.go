package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/adapters/httpadapter"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/gcsstore"
	"github.com/admitfn/admitfn/functions/bundle/store/s3store"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
	"github.com/admitfn/admitfn/test/doccheck"
)

func admitfn(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// keygen makes the directory of the key it writes, for its owner alone.
func TestKeygenMakesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys", "prod")
	code, out, errOut := admitfn("keygen", "--out", filepath.Join(dir, "bundle.key"))
	if code != 0 || !strings.HasPrefix(out, "wrote "+filepath.Join(dir, "bundle.key")+" and ") || errOut != "" {
		t.Fatalf("keygen: %d %q %q", code, out, errOut)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "bundle.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key: %v %v", fi, err)
	}
}

// keys makes a signing key with admitfn keygen and reads its public half.
func keys(t *testing.T) (keyFile string, pub []ed25519.PublicKey) {
	t.Helper()
	keyFile = filepath.Join(t.TempDir(), "bundle.key")
	code, out, errOut := admitfn("keygen", "--out", keyFile)
	if code != 0 || !regexp.MustCompile(`^wrote \S+ and \S+\.pub \(key id [0-9a-f]{16}\)\n-----BEGIN PUBLIC KEY-----\n`).MatchString(out) {
		t.Fatalf("keygen: %d %q %q", code, out, errOut)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v %v", fi, err)
	}
	pubPEM, err := os.ReadFile(keyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if pub, err = bundle.ParsePublicKeys(string(pubPEM)); err != nil || len(pub) != 1 {
		t.Fatalf("public key: %v", err)
	}
	if code, _, errOut := admitfn("keygen", "--out", keyFile); code != 1 || !strings.Contains(errOut, "exists: not overwriting it") {
		t.Errorf("keygen over an existing key: %d %q", code, errOut)
	}
	return keyFile, pub
}

// push publishes the example bundle to the location and fetches it back as
// a function would.
func pushAndFetch(t *testing.T, to string, bucket store.Bucket, versioned bool) {
	t.Helper()
	keyFile, pub := keys(t)
	code, out, errOut := admitfn("push", "-p", "../../policies/examples", "--to", to, "--sign-key", keyFile, "--expires", "240h")
	if code != 0 {
		t.Fatalf("push: %d\n%s\n%s", code, out, errOut)
	}
	sources, err := policy.ReadFS(os.DirFS("../../policies/examples"), ".")
	if err != nil {
		t.Fatal(err)
	}
	id := policy.ID(sources)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	snap, err := (&bundle.Fetcher{Bucket: bucket, Keys: pub}).Fetch(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if snap.BundleID != id || len(snap.Sources) != 12 || !snap.Manifested || !snap.Packed {
		t.Errorf("fetched %s with %d files (packed: %v)", snap.BundleID, len(snap.Sources), snap.Packed)
	}
	// The packed form holds the files pushed, their YAML already parsed.
	for i, s := range snap.Sources {
		if docs, _ := policy.Documents(sources[i].Data); s.Name != sources[i].Name || !bytes.Equal(s.Data, sources[i].Data) || !reflect.DeepEqual(s.Documents, docs) {
			t.Errorf("fetched file %d: %s, %d documents; pushed %s, %d", i, s.Name, len(s.Documents), sources[i].Name, len(docs))
		}
	}
	// push compiled the bundle, and says with what.
	if snap.CompiledBy == nil || *snap.CompiledBy != bundle.ThisToolchain() {
		t.Errorf("manifest compiledBy %+v, want %+v", snap.CompiledBy, bundle.ThisToolchain())
	}
	if d := time.Until(snap.Expires); d < 239*time.Hour || d > 240*time.Hour {
		t.Errorf("manifest expires in %v, want 240h", d)
	}
	stamp := fmt.Sprintf("serial %d, expires %s", snap.Serial, snap.Expires.Format(time.RFC3339))
	wantLast := "published bundle " + id + " to " + to + ": 12 files, manifest prod/.admitfn/manifest.json, signed by key " + bundle.KeyID(pub[0]) + ", " + stamp
	// The difference first: a first push adds everything.
	end := slices.Index(lines, "apply the webhook configuration after the push (admitfn render, or the Terraform webhook module)")
	if lines[0] != to+" holds no bundle: bundle "+id+" would be its first" || end < 0 || lines[end-1] != "  route added: /mutate/f678019434" {
		t.Fatalf("push output:\n%s\nwant the difference with nothing first", out)
	}
	uploads := lines[end+1 : len(lines)-1]
	if len(uploads) != 14 || last != wantLast || !strings.HasPrefix(uploads[12], "uploaded prod/.admitfn/packed.json (") || !strings.HasPrefix(uploads[13], "uploaded prod/.admitfn/webhooks.json (") {
		t.Errorf("push output:\n%s\nwant the packed object and the webhook configurations, then last line %q", out, wantLast)
	}
	// One progress line per object, as each upload ends, the packed one
	// after the files.
	progress := append([]string(nil), uploads[:12]...)
	sort.Strings(progress)
	for i, o := range snap.Sources {
		sum := sha256.Sum256(o.Data)
		want := fmt.Sprintf("uploaded prod/%s (%d bytes, sha256 %x", o.Name, len(o.Data), sum[:6])
		if i >= len(progress) || !strings.HasPrefix(progress[i], want) {
			t.Errorf("progress line %d: %q, want %q…", i, progress[min(i, len(progress)-1)], want)
		}
	}

	// Every command reads the published bundle as the function does: with
	// the right key it is the bundle pushed; with another key it is
	// refused.
	pubPEM, _ := os.ReadFile(keyFile + ".pub")
	t.Setenv("ADMITFN_BUNDLE_PUBLIC_KEY", string(pubPEM))
	_, local, _ := admitfn("render", "-p", "../../policies/examples", "--url", "https://x")
	if code, remote, errOut := admitfn("render", "-p", to, "--url", "https://x"); code != 0 || remote != local {
		t.Errorf("render -p %s: exit %d %s\n%s", to, code, errOut, remote)
	}
	if code, out, errOut := admitfn("apply", "-p", to, "-f", "testdata/apply/manifests", "--audit"); code != 0 || !strings.Contains(out, "DENIED    Deployment production/api") {
		t.Errorf("apply -p %s: exit %d %s\n%s", to, code, errOut, out)
	}
	otherKey, _ := keys(t)
	otherPub, _ := os.ReadFile(otherKey + ".pub")
	t.Setenv("ADMITFN_BUNDLE_PUBLIC_KEY", string(otherPub))
	if code, out, _ := admitfn("lint", "-p", to); code != 1 || !strings.Contains(out, "signature") {
		t.Errorf("lint with another key: exit %d\n%s", code, out)
	}
	t.Setenv("ADMITFN_BUNDLE_PUBLIC_KEY", "")

	// Re-signing writes the manifest only, with a higher serial, and only
	// for the bundle published there.
	code, out, errOut = admitfn("push", "--resign", "--sign-key", keyFile, "--to", to, "-p", "../../policies/examples")
	resigned, err := (&bundle.Fetcher{Bucket: bucket, Keys: pub}).Fetch(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("re-signed bundle %s at %s: manifest prod/.admitfn/manifest.json, signed by key %s, serial %d, expires %s\n",
		id, to, bundle.KeyID(pub[0]), resigned.Serial, resigned.Expires.Format(time.RFC3339))
	if code != 0 || out != want || resigned.Serial <= snap.Serial || resigned.BundleID != id || !reflect.DeepEqual(resigned.CompiledBy, snap.CompiledBy) {
		t.Errorf("push -resign: %d %q %q\nwant %q (serial above %d)", code, out, errOut, want, snap.Serial)
	}
	code, _, errOut = admitfn("push", "--resign", "--sign-key", keyFile, "--to", to, "-p", "testdata/small")
	if code != 1 || !strings.Contains(errOut, ", the bundle to re-sign: if you did not publish it, someone put an older manifest back; push the bundle instead") {
		t.Errorf("push -resign of other policies: %d %q", code, errOut)
	}
	for _, s := range snap.Sources {
		if policy.IsTestFile(s.Name) {
			t.Errorf("test file %s was published", s.Name)
		}
	}

	// Another bundle over the same prefix removes what the first had and
	// it has not, once it is published; an object no push wrote stays.
	ctx := context.Background()
	if _, err := bucket.Put(ctx, "notes.txt", []byte("kept"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	before, err := bucket.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstData, first, err := bucket.Get(ctx, snap.Sources[0].Name, "")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = admitfn("push", "-p", "testdata/small", "--to", to, "--sign-key", keyFile, "--allow-webhook-change")
	if code != 0 {
		t.Fatalf("push over it: %d\n%s\n%s", code, out, errOut)
	}
	var removed []string
	for _, l := range strings.Split(out, "\n") {
		if key, ok := strings.CutPrefix(l, "removed "); ok {
			removed = append(removed, strings.TrimSuffix(key, ": the bundle no longer has it"))
		}
	}
	var wantRemoved []string
	for _, s := range snap.Sources {
		wantRemoved = append(wantRemoved, "prod/"+s.Name)
	}
	sort.Strings(removed)
	if !slices.Equal(removed, wantRemoved) {
		t.Errorf("removed %q, want the first bundle's files %q\n%s", removed, wantRemoved, out)
	}
	after, err := bucket.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range after {
		keys = append(keys, o.Key)
	}
	second, err := (&bundle.Fetcher{Bucket: bucket, Keys: pub}).Fetch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{".admitfn/lock.json", ".admitfn/manifest.json", ".admitfn/packed.json", ".admitfn/retired/" + id + ".json", ".admitfn/signed.json", ".admitfn/webhooks.json", "notes.txt", "policy.yaml"}
	if !slices.Equal(keys, wantKeys) || len(second.Sources) != 1 || len(before) != 18 {
		t.Errorf("after the second push the prefix holds %q (%d objects before), want %q", keys, len(before), wantKeys)
	}
	// Where the bucket keeps versions, the first bundle's stay readable at
	// the versions its manifest pinned.
	if versioned {
		data, err := bucket.GetVersion(ctx, first.Key, first.Version)
		if err != nil || !bytes.Equal(data, firstData) {
			t.Errorf("%s at version %s after its removal: %v", first.Key, first.Version, err)
		}
	}
}

func TestPushToS3(t *testing.T) {
	s := storetest.StartS3(t)
	s.CreateBucket(t, "policies", true)
	s.SetEnv(t)
	pushAndFetch(t, "s3://policies/prod", s3store.New(s.Client(s.Endpoint), store.Location{Scheme: "s3", Bucket: "policies", Prefix: "prod"}), true)
}

func TestPushToGCS(t *testing.T) {
	g := storetest.StartGCS(t)
	g.CreateBucket(t, "policies", false)
	t.Setenv("STORAGE_EMULATOR_HOST", g.Host)
	pushAndFetch(t, "gs://policies/prod", gcsstore.New(g.Client(t, g.Host), store.Location{Scheme: "gs", Bucket: "policies", Prefix: "prod"}), false)
}

func TestPushToDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errOut := admitfn("push", "-p", "testdata/small", "--to", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("push: %d %s %s", code, out, errOut)
	}
	var report struct {
		Location, Manifest string
		Content            bundle.Manifest
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || report.Location != dir || report.Manifest != ".admitfn/manifest.json" || report.Content.Kind != bundle.ManifestKind || len(report.Content.Objects) != 1 {
		t.Fatalf("-o json: %v %s", err, out)
	}
	if errOut != "" {
		t.Errorf("-o json wrote progress to a stderr that is not a terminal: %q", errOut)
	}
	m := report.Content
	if m.CompiledBy == nil || *m.CompiledBy != bundle.ThisToolchain() || m.CompiledBy.Kubernetes == "" || m.CompiledBy.CEL == "" {
		t.Errorf("manifest compiledBy %+v, want %+v", m.CompiledBy, bundle.ThisToolchain())
	}
	snap, err := (&bundle.Fetcher{Bucket: store.NewDir(dir)}).Fetch(context.Background(), "")
	if err != nil || snap.BundleID != m.Bundle {
		t.Fatalf("fetch: %v", err)
	}
	// The published directory is itself a bundle admitfn reads.
	if code, out, errOut := admitfn("lint", dir); code != 0 {
		t.Errorf("lint of the published directory: %d %s %s", code, out, errOut)
	}
}

// A bundle that would not load is not published: nothing is uploaded.
func TestPushRefusesABadBundle(t *testing.T) {
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "p.yaml"), []byte("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n  matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}\n  validations:\n  - expression: 'object.spec +'\n"), 0o644)
	to := filepath.Join(t.TempDir(), "out")
	code, _, errOut := admitfn("push", "-p", bad, "--to", to)
	if code != 1 || !strings.HasPrefix(errOut, "admitfn push: "+bad+": 1 error in policy bundle:\n  p.yaml: policy p: spec.validations[0].expression: compilation failed") {
		t.Errorf("push of a bad bundle: %d %q", code, errOut)
	}
	if _, err := os.Stat(to); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the target was touched: %v", err)
	}
}

func TestPushUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"push"}, 2, "admitfn push: -p/--policies and --to are required\nRun 'admitfn push --help' for usage.\n"},
		{[]string{"push", "-p", "x"}, 2, "admitfn push: -p/--policies and --to are required\nRun 'admitfn push --help' for usage.\n"},
		{[]string{"push", "-p", "x", "--to", "y", "extra"}, 2, "admitfn push: unexpected arguments: extra\nRun 'admitfn push --help' for usage.\n"},
		{[]string{"push", "-p", "x", "--to", "y", "-o", "yaml"}, 2, "admitfn push: -o/--output must be text or json, not \"yaml\"\nRun 'admitfn push --help' for usage.\n"},
		{[]string{"push", "-p", "testdata/nonexistent", "--to", "y"}, 1, "admitfn push: bundle testdata/nonexistent: no such file or directory\n"},
		{[]string{"push", "-p", "testdata/small", "--to", "ftp://host/p"}, 1, "admitfn push: policy location \"ftp://host/p\": unsupported scheme \"ftp\": want a directory, s3://bucket/prefix or gs://bucket/prefix\n"},
		{[]string{"push", "-p", "testdata/small", "--to", "out", "--sign-key", "push_test.go"}, 1, "admitfn push: push_test.go: signing key: want a PEM PRIVATE KEY block (PKCS #8)\n"},
		{[]string{"push", "--resign", "--to", "y"}, 2, "admitfn push: --resign needs --to and --sign-key\nRun 'admitfn push --help' for usage.\n"},
		{[]string{"push", "-p", "x", "--to", "y", "--expires", "0s"}, 2, "admitfn push: --expires must be positive, not 0s\nRun 'admitfn push --help' for usage.\n"},
		{[]string{"keygen"}, 2, "admitfn keygen: --out is required: the file for the private key\nRun 'admitfn keygen --help' for usage.\n"},
		{[]string{"keygen", "--out", "k", "extra"}, 2, "admitfn keygen: unexpected arguments: extra\nRun 'admitfn keygen --help' for usage.\n"},
	} {
		code, _, errOut := admitfn(tc.args...)
		if code != tc.code || errOut != tc.err {
			t.Errorf("admitfn %v: %d %q, want %d %q", tc.args, code, errOut, tc.code, tc.err)
		}
	}
	if code, out, _ := admitfn("push", "-h"); code != 0 {
		t.Errorf("push -h: %d %s", code, out)
	}
}

func TestToken(t *testing.T) {
	code, out, _ := admitfn("token")
	_, out2, _ := admitfn("token")
	tok := strings.TrimSpace(out)
	if code != 0 || len(tok) != 43 || out == out2 {
		t.Fatalf("token: %d %q %q", code, out, out2)
	}
	if got, err := httpadapter.ParseTokens(tok); err != nil || len(got) != 1 {
		t.Errorf("the function refuses the token: %v", err)
	}
	// The rendered configuration carries it in every webhook's URL.
	code, cfg, errOut := admitfn("render", "-p", "testdata/small", "--url", "https://fn.example.com/"+tok)
	if code != 0 || !strings.Contains(cfg, "url: https://fn.example.com/"+tok+"/validate/8b3e12d787\n") {
		t.Errorf("render with a token: %d %s %s", code, cfg, errOut)
	}
}

// A bucket that does not exist is named as such, in S3 and in GCS.
func TestPushToAMissingBucket(t *testing.T) {
	s := storetest.StartS3(t)
	s.SetEnv(t)
	code, _, errOut := admitfn("push", "-p", "testdata/small", "--to", "s3://nobucket/prod")
	if want := "admitfn push: s3://nobucket/prod: the bucket \"nobucket\" does not exist: create it (the Terraform modules make one), or check the name and AWS_REGION\n"; code != 1 || errOut != want {
		t.Errorf("s3: exit %d %q, want %q", code, errOut, want)
	}
	g := storetest.StartGCS(t)
	t.Setenv("STORAGE_EMULATOR_HOST", g.Host)
	code, _, errOut = admitfn("push", "-p", "testdata/small", "--to", "gs://nobucket/prod")
	if want := "admitfn push: gs://nobucket/prod: the bucket \"nobucket\" does not exist: create it (the Terraform modules make one), or check the name\n"; code != 1 || errOut != want {
		t.Errorf("gcs: exit %d %q, want %q", code, errOut, want)
	}
	// Reading from it says the same.
	if code, out, _ := admitfn("lint", "-p", "gs://nobucket/prod"); code != 1 || !strings.Contains(out, "does not exist") {
		t.Errorf("lint -p gs://nobucket: exit %d\n%s", code, out)
	}
}

// docs/bundles.md's push example is what pushing the example bundle
// prints, but for the store's version ids, the serial and the expiry.
func TestBundlesDocPushExample(t *testing.T) {
	block := doccheck.Find(t, "docs/bundles.md", 1)[0]
	command, shown, _ := strings.Cut(block.Text, "\n")
	if command != "admitfn push -p policies/examples --to s3://my-admitfn-policies/prod" {
		t.Fatalf("%s: %q is not a push of the example bundle", block, command)
	}
	s := storetest.StartS3(t)
	s.CreateBucket(t, "my-admitfn-policies", true)
	s.SetEnv(t)
	code, out, errOut := admitfn("push", "-p", "../../policies/examples", "--to", "s3://my-admitfn-policies/prod")
	if code != 0 {
		t.Fatalf("push: %d %s", code, errOut)
	}
	normal := func(line string) string {
		line = regexp.MustCompile(`version \S+\)`).ReplaceAllString(line, "version V)")
		return regexp.MustCompile(`serial \d+, expires \S+`).ReplaceAllString(line, "serial N, expires T")
	}
	got := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		got[normal(l)] = true
	}
	for _, l := range strings.Split(strings.TrimSpace(shown), "\n") {
		l = strings.TrimPrefix(l, "# ")
		if l != "…" && !got[normal(l)] {
			t.Errorf("docs/bundles.md shows %q; push printed:\n%s", l, out)
		}
	}
}

// A bucket writer's manifest in the way of a signed push: push warns, does
// not follow its serial, and publishes one functions take.
func TestPushWarnsOfAManifestItCannotVerify(t *testing.T) {
	keyFile, pub := keys(t)
	s := storetest.StartS3(t)
	s.CreateBucket(t, "policies", true)
	s.SetEnv(t)
	to := "s3://policies/prod"
	bucket := s3store.New(s.Client(s.Endpoint), store.Location{Scheme: "s3", Bucket: "policies", Prefix: "prod"})
	forged, err := json.Marshal(map[string]any{"manifest": bundle.Manifest{APIVersion: bundle.ManifestAPIVersion, Kind: bundle.ManifestKind, Serial: 1<<63 - 1, Location: to,
		Objects: []bundle.ManifestObject{{Key: "a.yaml", Size: 1, SHA256: strings.Repeat("0", 64)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Put(context.Background(), bundle.ManifestKey, forged, ""); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Unix()
	code, out, errOut := admitfn("push", "-p", "testdata/small", "--to", to, "--sign-key", keyFile)
	if code != 0 || errOut != "warning: the manifest at s3://policies/prod does not verify with a trusted key (bundle is not signed): its serial is not followed\n" {
		t.Fatalf("push: %d %q %q", code, out, errOut)
	}
	snap, err := (&bundle.Fetcher{Bucket: bucket, Keys: pub}).Fetch(context.Background(), "")
	if err != nil || snap.Serial < before || snap.Serial > time.Now().Unix() {
		t.Fatalf("a function reads %+v, %v", snap, err)
	}

	// Functions that trust a key refuse an unsigned bundle, and so does
	// push, before uploading anything.
	t.Setenv("ADMITFN_BUNDLE_PUBLIC_KEY", base64.StdEncoding.EncodeToString(pub[0]))
	code, _, errOut = admitfn("push", "-p", "testdata/small", "--to", to)
	if want := "admitfn push: publish: the location's bundles are signed: functions that trust key " + bundle.KeyID(pub[0]) + " refuse an unsigned bundle: sign it\n"; code != 1 || errOut != want {
		t.Fatalf("unsigned push with a trusted key: %d %q, want %q", code, errOut, want)
	}
}

// Push warns when the signing key is readable by others.
func TestPushWarnsOfAReadableSigningKey(t *testing.T) {
	keyFile, _ := keys(t)
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := admitfn("push", "-p", "testdata/small", "--to", filepath.Join(t.TempDir(), "out"), "--sign-key", keyFile)
	want := "warning: signing key " + keyFile + " is readable by others (mode 0644): whoever reads it can sign bundles every function loads; chmod 600 it\n"
	if code != 0 || errOut != want {
		t.Fatalf("push: %d %q, want %q", code, errOut, want)
	}
}

// Every command reads a pushed directory as a function does: a policy file
// added after the push is an error, for the CLI as for the function, and
// pushing again takes it in.
func TestCommandsReadAPushedDirectoryAsFunctionsDo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pushed")
	if code, out, errOut := admitfn("push", "-p", "../../policies/examples", "--to", dir); code != 0 {
		t.Fatalf("push: %d %s %s", code, out, errOut)
	}
	added, err := os.ReadFile("../../policies/examples/01-basic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	added = bytes.ReplaceAll(added, []byte(`name: "`), []byte(`name: "added-`))
	if err := os.WriteFile(filepath.Join(dir, "99-added.yaml"), added, 0o644); err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile("../../policies/examples/examples_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "examples_test.yaml"), test, 0o644); err != nil {
		t.Fatal(err)
	}
	reason := "bundle directory holds a policy file its manifest does not name: 99-added.yaml, not named by .admitfn/manifest.json, which the bundle was pushed with: push the bundle again (admitfn push -p … --to " + dir + ") to include it, or remove it\n"
	for _, args := range [][]string{
		{"render", "-p", dir, "--url", "https://admitfn.invalid"},
		{"apply", "-p", dir, "-f", "../../policies/reviews/deployment-production.json"},
	} {
		code, _, errOut := admitfn(args...)
		if want := "admitfn " + args[0] + ": bundle " + dir + ": " + reason; code != 1 || errOut != want {
			t.Errorf("admitfn %v: %d %q\nwant %q", args, code, errOut, want)
		}
	}
	if code, out, _ := admitfn("lint", dir); code != 1 || out != dir+": error: "+reason+"1 error, 0 warnings\n" {
		t.Errorf("lint: %d %q", code, out)
	}
	code, out, _ := admitfn("test", dir)
	if want := "FAIL " + dir + "/examples_test.yaml: the file does not load\n       policies: bundle " + dir + ": " + reason + "FAIL: 0 of 0 cases failed, 1 file did not load\n"; code != 1 || out != want {
		t.Errorf("test: %d %q\nwant %q", code, out, want)
	}
	_, err = (&bundle.Fetcher{Bucket: store.NewDir(dir)}).Fetch(context.Background(), "")
	if !errors.Is(err, bundle.ErrUnlisted) || err.Error()+"\n" != reason {
		t.Fatalf("a function: %v", err)
	}
	// Pushed again from a source that has it, the policy is in the bundle
	// every command and function reads.
	src := t.TempDir()
	for _, name := range []string{"01-basic.yaml", "02-params.yaml"} {
		data, _ := os.ReadFile(filepath.Join("../../policies/examples", name))
		os.WriteFile(filepath.Join(src, name), data, 0o644)
	}
	os.WriteFile(filepath.Join(src, "99-added.yaml"), added, 0o644)
	if code, out, errOut := admitfn("push", "-p", src, "--to", dir); code != 0 {
		t.Fatalf("push again: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := admitfn("lint", dir); code != 0 {
		t.Errorf("lint after pushing again: %d %s %s", code, out, errOut)
	}
}

// A file larger than functions read fails every command, not only the
// function's start.
func TestCommandsRefuseAFileFunctionsWouldNotRead(t *testing.T) {
	dir := t.TempDir()
	big := append([]byte("# padding\n"), bytes.Repeat([]byte("#\n"), store.MaxObjectBytes/2)...)
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("bundle %s: big.yaml is %d bytes, larger than functions read (32 MiB a file)\n", dir, len(big))
	if code, out, _ := admitfn("lint", dir); code != 1 || out != dir+": error: "+strings.TrimPrefix(want, "bundle "+dir+": ")+"1 error, 0 warnings\n" {
		t.Errorf("lint: %d %q", code, out)
	}
	for _, args := range [][]string{
		{"push", "-p", dir, "--to", filepath.Join(t.TempDir(), "out")},
		{"render", "-p", dir, "--url", "https://admitfn.invalid"},
	} {
		if code, _, errOut := admitfn(args...); code != 1 || errOut != "admitfn "+args[0]+": "+want {
			t.Errorf("admitfn %s: %d %q, want %q", args[0], code, errOut, "admitfn "+args[0]+": "+want)
		}
	}
}

// Finding: keygen and init wrote through dangling symbolic links (a key
// landing where the link's owner chose), and keygen overwrote an existing
// public key, which then no longer matched the private key it was
// distributed with. Both refuse, and write nothing.
func TestKeygenAndInitWriteNoLinkNorOverAFile(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(dir, "elsewhere")
	key := filepath.Join(dir, "bundle.key")
	if err := os.Symlink(elsewhere, key); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := admitfn("keygen", "--out", key); code != 1 || errOut != "admitfn keygen: "+key+" is a symbolic link: not writing through it\n" {
		t.Errorf("keygen through a dangling link: %d %q", code, errOut)
	}
	os.Remove(key)
	if err := os.WriteFile(key+".pub", []byte("the key everyone trusts"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := admitfn("keygen", "--out", key); code != 1 || errOut != "admitfn keygen: "+key+".pub exists: not overwriting it\n" {
		t.Errorf("keygen over a public key: %d %q", code, errOut)
	}
	if pub, _ := os.ReadFile(key + ".pub"); string(pub) != "the key everyone trusts" {
		t.Errorf("public key now %q", pub)
	}
	if _, err := os.Lstat(key); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused keygen left %s: %v", key, err)
	}

	bundleDir := filepath.Join(dir, "policies")
	os.MkdirAll(bundleDir, 0o755)
	policyFile := filepath.Join(bundleDir, "require-team-label.yaml")
	if err := os.Symlink(elsewhere, policyFile); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := admitfn("init", bundleDir); code != 1 || errOut != "admitfn init: "+policyFile+" is a symbolic link: not writing through it\n" {
		t.Errorf("init through a dangling link: %d %q", code, errOut)
	}
	if _, err := os.Stat(elsewhere); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("something was written through a link: %v", err)
	}
}
