package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/s3store"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
	"github.com/admitfn/admitfn/test/doccheck"
)

// golden compares got with testdata/change/name, which -update rewrites:
// docs/cluster.md shows these outputs, and a test there holds it to them.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenAt(t, filepath.Join("testdata", "change"), name, got)
}

func goldenAt(t *testing.T, dir, name, got string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != got {
		t.Errorf("%s differs (go test ./cmd/admitfn -run %s -update rewrites it):\n got %s\nwant %s", path, t.Name(), got, want)
	}
}

// A publish that changes the webhook configuration is shown, refused
// unless asked for, and then keeps the old routes for the transition; one
// that does not change it goes through.
func TestPushSaysWhatItChanges(t *testing.T) {
	s := storetest.StartS3(t)
	s.CreateBucket(t, "policies", true)
	s.SetEnv(t)
	const to = "s3://policies/prod"
	bucket := s3store.New(s.Client(s.Endpoint), store.Location{Scheme: "s3", Bucket: "policies", Prefix: "prod"})
	keyFile, pub := keys(t)
	pubPEM, err := os.ReadFile(keyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ADMITFN_BUNDLE_PUBLIC_KEY", string(pubPEM))
	fetch := func() *bundle.Snapshot {
		t.Helper()
		snap, err := (&bundle.Fetcher{Bucket: bucket, Keys: pub}).Fetch(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}

	if code, out, errOut := admitfn("push", "-p", "testdata/change/v1", "--to", to, "--sign-key", keyFile); code != 0 {
		t.Fatalf("first push: %d\n%s\n%s", code, out, errOut)
	}
	v1 := fetch()

	// diff shows the change without publishing.
	code, out, errOut := admitfn("diff", "-p", "testdata/change/v2", "--to", to)
	if code != 0 || errOut != "" {
		t.Fatalf("diff: %d %s", code, errOut)
	}
	golden(t, "diff.txt", out)
	code, out, _ = admitfn("diff", "-p", "testdata/change/v2", "--to", to, "-o", "json")
	var d bundleDiff
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || !d.WebhooksChanged || d.From != v1.BundleID ||
		!reflect.DeepEqual(d.RoutesRetired, []string{"/validate/8b3e12d787", "/validate/b20c9c079a"}) || !reflect.DeepEqual(d.RoutesAdded, []string{"/validate/62ed178167"}) {
		t.Errorf("diff -o json: %d %+v\n%s", code, d, out)
	}
	golden(t, "diff.json", out)

	// push refuses it, having published nothing.
	code, out, errOut = admitfn("push", "-p", "testdata/change/v2", "--to", to, "--sign-key", keyFile)
	if code != 1 || !strings.HasPrefix(out, "bundle "+v1.BundleID+" at "+to+" -> ") || strings.Contains(out, "uploaded") {
		t.Errorf("push of a webhook change: %d\n%s", code, out)
	}
	golden(t, "push-refused.txt", errOut)
	// docs/cluster.md shows both.
	blocks := doccheck.Find(t, "docs/cluster.md", 2)
	for i, name := range []string{"diff.txt", "push-refused.txt"} {
		want, _ := os.ReadFile(filepath.Join("testdata", "change", name))
		if blocks[i].Text != string(want) {
			t.Errorf("%s shows\n%s\nnot testdata/change/%s:\n%s", blocks[i], blocks[i].Text, name, want)
		}
	}
	if now := fetch(); now.Serial != v1.Serial {
		t.Errorf("the refused push published serial %d", now.Serial)
	}

	// Asked for, it publishes, and the manifest keeps v1 for the routes
	// it retires.
	code, out, errOut = admitfn("push", "-p", "testdata/change/v2", "--to", to, "--sign-key", keyFile, "--allow-webhook-change", "--transition", "48h")
	if code != 0 {
		t.Fatalf("push --allow-webhook-change: %d\n%s\n%s", code, out, errOut)
	}
	v2 := fetch()
	if len(v2.Retired) != 1 || v2.Retired[0].Bundle != v1.BundleID || len(v2.Retired[0].Routes) != 2 ||
		v2.Retired[0].Routes[0].Path() != "/validate/8b3e12d787" || v2.Retired[0].Routes[1].Path() != "/validate/b20c9c079a" ||
		len(v2.Retired[0].Sources) != 2 || string(v2.Retired[0].Sources[0].Data) != string(v1.Sources[0].Data) || string(v2.Retired[0].Sources[1].Data) != string(v1.Sources[1].Data) ||
		v2.Retired[0].Until.Sub(v2.Created) != 48*time.Hour {
		t.Errorf("retired %+v", v2.Retired)
	}
	last := out[strings.LastIndex(strings.TrimSuffix(out, "\n"), "\n")+1:]
	if want := "retired routes served with bundle " + v1.BundleID + " until " + v2.Retired[0].Until.Format(time.RFC3339) + ": /validate/8b3e12d787 /validate/b20c9c079a\n"; last != want {
		t.Errorf("last line %q, want %q", last, want)
	}
	// The published webhook configurations are render's, named by the
	// signed manifest.
	_, rendered, _ := admitfn("render", "-p", "testdata/change/v2", "--url", bundle.WebhooksURL, "-o", "json")
	published, _, err := bucket.Get(context.Background(), bundle.WebhooksKey, "")
	if err != nil || string(published) != rendered {
		t.Errorf("%s: %v\n%s\nwant\n%s", bundle.WebhooksKey, err, published, rendered)
	}

	// A change of expressions alone keeps the webhook configuration: no
	// flag needed, and the transition goes on.
	if code, out, errOut := admitfn("push", "-p", "testdata/change/v2", "--to", to, "--sign-key", keyFile); code != 0 || !strings.Contains(out, "holds bundle "+v2.BundleID+" already: no change\n") {
		t.Errorf("push of the same bundle: %d\n%s\n%s", code, out, errOut)
	}
	if v := fetch(); len(v.Retired) != 1 || !v.Retired[0].Until.Equal(v2.Retired[0].Until) {
		t.Errorf("a second push changed the transition: %+v", v.Retired)
	}
}

// A change that keeps every route and the webhook configuration is
// published without asking.
func TestPushOfAnExpressionChange(t *testing.T) {
	v1, _ := filepath.Abs("testdata/change/v1")
	v3, _ := filepath.Abs("testdata/change/v3")
	goldenDir, _ := filepath.Abs("testdata/change")
	shown := doccheck.Find(t, "docs/cluster.md", 1)[0] // before leaving the repository
	t.Chdir(t.TempDir())
	const dir = "published"
	if code, out, errOut := admitfn("push", "-p", v1, "--to", dir); code != 0 {
		t.Fatalf("push v1: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut := admitfn("diff", "-p", v3, "--to", dir)
	if code != 0 || errOut != "" {
		t.Fatalf("diff: %d %s", code, errOut)
	}
	goldenAt(t, goldenDir, "diff-expression.txt", out)
	if shown.Text != out {
		t.Errorf("%s shows\n%s\nnot\n%s", shown, shown.Text, out)
	}
	if code, out, errOut := admitfn("push", "-p", v3, "--to", dir); code != 0 || !strings.Contains(out, "the webhook configuration does not change: nothing to apply\n") {
		t.Errorf("push v3: %d\n%s\n%s", code, out, errOut)
	}
	// Functions serve v3 on v1's routes; nothing retired.
	snap, err := (&bundle.Fetcher{Bucket: store.NewDir(dir)}).Fetch(context.Background(), "")
	if err != nil || len(snap.Retired) != 0 {
		t.Errorf("fetch: %v, retired %+v", err, snap)
	}
}

// --transition 0 retires the routes at once: the manifest keeps no earlier
// bundle, and push names no retired route.
func TestPushWithoutTransition(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if code, out, errOut := admitfn("push", "-p", "testdata/change/v1", "--to", dir); code != 0 {
		t.Fatalf("push v1: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut := admitfn("push", "-p", "testdata/change/v2", "--to", dir, "--allow-webhook-change", "--transition", "0")
	if code != 0 || strings.Contains(out, "retired routes served") {
		t.Fatalf("push v2: %d\n%s\n%s", code, out, errOut)
	}
	snap, err := (&bundle.Fetcher{Bucket: store.NewDir(dir)}).Fetch(context.Background(), "")
	if err != nil || len(snap.Retired) != 0 {
		t.Errorf("fetch: %v, retired %+v", err, snap.Retired)
	}
	if code, _, errOut := admitfn("push", "-p", "testdata/change/v1", "--to", dir, "--transition", "-1h"); code != 2 || !strings.Contains(errOut, "--transition must be 0 or more, not -1h0m0s") {
		t.Errorf("negative --transition: %d %q", code, errOut)
	}
}
