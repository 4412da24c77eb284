package store_test

import (
	"path/filepath"
	"testing"

	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/storetest"
)

func TestDirContract(t *testing.T) {
	root := t.TempDir()
	storetest.Contract(t, store.NewDir(filepath.Join(root, "prod")), store.NewDir(filepath.Join(root, "staging")), false)
}

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want store.Location
		err  string
	}{
		{in: "policies", want: store.Location{Bucket: "policies"}},
		{in: "/srv/policies/", want: store.Location{Bucket: "/srv/policies/"}},
		{in: "s3://bucket", want: store.Location{Scheme: "s3", Bucket: "bucket"}},
		{in: "s3://bucket/", want: store.Location{Scheme: "s3", Bucket: "bucket"}},
		{in: "s3://bucket/team/prod/", want: store.Location{Scheme: "s3", Bucket: "bucket", Prefix: "team/prod"}},
		{in: "gs://bucket/prod", want: store.Location{Scheme: "gs", Bucket: "bucket", Prefix: "prod"}},
		{in: "", err: `empty policy location: want a directory, s3://bucket/prefix or gs://bucket/prefix`},
		{in: "https://bucket/prod", err: `policy location "https://bucket/prod": unsupported scheme "https": want a directory, s3://bucket/prefix or gs://bucket/prefix`},
		{in: "s3:///prod", err: `policy location "s3:///prod": no bucket name`},
		{in: "gs://bucket/a/../b", err: `policy location "gs://bucket/a/../b": the prefix "a/../b" is not a clean path`},
		{in: "gs://bucket/a//b", err: `policy location "gs://bucket/a//b": the prefix "a//b" is not a clean path`},
		{in: "s3://bucket/p?versionId=1", err: `policy location "s3://bucket/p?versionId=1": query strings and fragments are not part of a location`},
		{in: "s3://bucket/a%2Fb", err: `policy location "s3://bucket/a%2Fb": escaped characters in the prefix are not supported`},
	} {
		got, err := store.ParseLocation(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseLocation(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseLocation(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	loc := store.Location{Scheme: "s3", Bucket: "b", Prefix: "p/q"}
	if loc.String() != "s3://b/p/q" || loc.Key("x.yaml") != "p/q/x.yaml" {
		t.Errorf("String %q, Key %q", loc.String(), loc.Key("x.yaml"))
	}
	if rel, ok := loc.Rel("p/q/d/x.yaml"); !ok || rel != "d/x.yaml" {
		t.Errorf("Rel: %q %v", rel, ok)
	}
	if _, ok := loc.Rel("p/qq/x.yaml"); ok {
		t.Error("Rel accepted a key of a sibling prefix")
	}
}

func TestValidKey(t *testing.T) {
	for key, want := range map[string]bool{
		"a.yaml": true, "d/a.yaml": true, ".admitfn/manifest.json": true,
		"": false, "/a.yaml": false, "../a.yaml": false, "..": false, "d/../a.yaml": false, "d//a.yaml": false, `d\a.yaml`: false, "./a.yaml": false,
	} {
		if got := store.ValidKey(key); got != want {
			t.Errorf("ValidKey(%q) = %v, want %v", key, got, want)
		}
	}
}
