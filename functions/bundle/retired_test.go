package bundle_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
)

// routed is a bundle of one binding, bound in namespaces labelled env=sel
// (everywhere when sel is ""): another sel is another route.
func routed(sel string) []policy.Source {
	match := ""
	if sel != "" {
		match = "\n  matchResources: {namespaceSelector: {matchLabels: {env: " + sel + "}}}"
	}
	return []policy.Source{{Name: "p.yaml", Data: []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations: [{expression: "false"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec:
  policyName: p
  validationActions: [Deny]` + match + "\n")}}
}

// The retired routes and their bundle are under the signature: a bucket
// writer can neither swap the bundle a retired route answers with (a
// swapped one is never served) nor stretch its transition, and
// re-signing drops ended transitions without lengthening the others.
func TestRetiredRoutesAreUnderTheSignature(t *testing.T) {
	key := newKey(t)
	root := t.TempDir()
	prod := at{store.NewDir(root), "s3://policies/prod"}
	publishAt(t, prod, routed(""), key, t0, 0)
	m := publishAt(t, prod, routed("prod"), key, t0.Add(time.Hour), 0)
	oldRoutes, _ := bundle.Routes(routed(""))
	if len(m.Retired) != 1 || m.Retired[0].Bundle != policy.ID(routed("")) || strings.Join(m.Retired[0].Routes, " ") != strings.Join(oldRoutes, " ") ||
		!m.Retired[0].Until.Equal(t0.Add(time.Hour+bundle.DefaultTransition)) || m.Retired[0].Object.Key != bundle.RetiredPrefix+policy.ID(routed(""))+".json" {
		t.Fatalf("retired %+v", m.Retired)
	}
	snap, err := fetchAt(prod, key, t0.Add(2*time.Hour))
	if err != nil || len(snap.Retired) != 1 || len(snap.Retired[0].Sources) != 1 || string(snap.Retired[0].Sources[0].Data) != string(routed("")[0].Data) {
		t.Fatalf("fetch: %v %+v", err, snap)
	}

	// Re-signing within the transition keeps it as it is; after it, drops it.
	resign := func(now time.Time) *bundle.Manifest {
		t.Helper()
		m, err := bundle.Resign(context.Background(), prod, m.Bundle, bundle.PublishOptions{SignKey: key, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if r := resign(t0.Add(3 * time.Hour)); len(r.Retired) != 1 || !r.Retired[0].Until.Equal(m.Retired[0].Until) {
		t.Errorf("re-signed within the transition: %+v", r.Retired)
	}
	// After the transition a function reads no retired bundle, and says
	// the routes ended.
	end := m.Retired[0].Until
	if snap, err := fetchAt(prod, key, end); err != nil || len(snap.Retired) != 1 || snap.Retired[0].Sources != nil {
		t.Errorf("fetch at the end of the transition: %v %+v", err, snap)
	}
	if r := resign(end); len(r.Retired) != 0 {
		t.Errorf("re-signed after the transition: %+v", r.Retired)
	}

	// A retired bundle swapped in the bucket is refused, as any object.
	publishAt(t, prod, routed(""), key, t0.Add(4*time.Hour), 0)
	m = publishAt(t, prod, routed("prod"), key, t0.Add(5*time.Hour), 0)
	if len(m.Retired) != 1 {
		t.Fatalf("retired %+v", m.Retired)
	}
	other := filepath.Join(root, filepath.FromSlash(m.Retired[0].Object.Key))
	data, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(strings.Replace(string(data), "false", "true ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The bundle the manifest names is whole and verified: it loads, and
	// the swapped one is never served.
	snap, err = fetchAt(prod, key, t0.Add(6*time.Hour))
	if err != nil || snap.BundleID != policy.ID(routed("prod")) || len(snap.Retired) != 1 || snap.Retired[0].Sources != nil ||
		!errors.Is(snap.Retired[0].Err, bundle.ErrIntegrity) || !bundle.Refused(snap.Retired[0].Err) {
		t.Errorf("a swapped retired bundle: %v, %+v; want the bundle, and ErrIntegrity for the retired one", err, snap)
	}
}

// A manifest's retired routes must be routes of a group, each listed once,
// with their bundle's object where push puts it.
func TestRetiredRoutesAreValidated(t *testing.T) {
	obj := bundle.ManifestObject{Key: bundle.RetiredPrefix + "abc.json", Size: 1, SHA256: strings.Repeat("0", 64)}
	until := t0.Add(time.Hour)
	for _, tc := range []struct {
		name    string
		retired []bundle.Retired
		want    string
	}{
		{"bare prefix", []bundle.Retired{{Bundle: "abc", Routes: []string{"/validate"}, Until: until, Object: obj}}, `retired route "/validate": not a group's route`},
		{"no route", []bundle.Retired{{Bundle: "abc", Until: until, Object: obj}}, `bundle, routes and until are required`},
		{"twice", []bundle.Retired{{Bundle: "abc", Routes: []string{"/validate/x"}, Until: until, Object: obj}, {Bundle: "abc", Routes: []string{"/validate/x"}, Until: until, Object: obj}}, `retired route "/validate/x" listed twice`},
		{"elsewhere", []bundle.Retired{{Bundle: "abc", Routes: []string{"/validate/x"}, Until: until, Object: bundle.ManifestObject{Key: "p.yaml", Size: 1, SHA256: obj.SHA256}}}, `retired object key "p.yaml"`},
	} {
		dir := store.NewDir(t.TempDir())
		m := &bundle.Manifest{APIVersion: bundle.ManifestAPIVersion, Kind: bundle.ManifestKind, Objects: []bundle.ManifestObject{{Key: "p.yaml", Size: 1, SHA256: obj.SHA256}}, Retired: tc.retired}
		data, err := bundle.Encode(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dir.Put(context.Background(), bundle.ManifestKey, data, ""); err != nil {
			t.Fatal(err)
		}
		_, err = (&bundle.Fetcher{Bucket: dir}).Fetch(context.Background(), "")
		if !errors.Is(err, bundle.ErrInvalidManifest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A retired bundle gone from the bucket (a lifecycle rule, a hand) is
// dropped with a warning by the next publish, which still retires the
// routes of the bundle it replaces: carried on, it would make every
// function refuse the manifest.
func TestPublishDropsAnUnreadableRetiredBundle(t *testing.T) {
	key := newKey(t)
	root := t.TempDir()
	prod := at{store.NewDir(root), "s3://policies/prod"}
	publishAt(t, prod, routed(""), key, t0, 0)
	m := publishAt(t, prod, routed("prod"), key, t0.Add(time.Hour), 0)
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(m.Retired[0].Object.Key))); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	m, err := bundle.Publish(context.Background(), prod, routed("dev"), bundle.PublishOptions{SignKey: key, Now: t0.Add(2 * time.Hour), Warn: func(s string) { warnings = append(warnings, s) }})
	if err != nil {
		t.Fatal(err)
	}
	gone, _ := bundle.Routes(routed(""))
	prodRoutes, _ := bundle.Routes(routed("prod"))
	if len(m.Retired) != 1 || m.Retired[0].Bundle != policy.ID(routed("prod")) || m.Retired[0].Routes[0] != prodRoutes[0] {
		t.Errorf("retired %+v, want the prod bundle's route alone", m.Retired)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "the bundle "+policy.ID(routed(""))+" that answers the retired routes "+gone[0]+" cannot be read") {
		t.Errorf("warnings %q", warnings)
	}
	if _, err := fetchAt(prod, key, t0.Add(3*time.Hour)); err != nil {
		t.Errorf("a function refuses the manifest: %v", err)
	}
}

// A manifest keeps the bundles of at most MaxRetired earlier publishes in
// transition: the next one drops the oldest routes and says which.
func TestRetiredBundlesAreCapped(t *testing.T) {
	dir := store.NewDir(t.TempDir())
	var warnings []string
	var m *bundle.Manifest
	for i := range bundle.MaxRetired + 2 {
		var err error
		m, err = bundle.Publish(context.Background(), dir, routed(fmt.Sprintf("e%d", i)), bundle.PublishOptions{Now: t0.Add(time.Duration(i) * time.Minute), Warn: func(s string) { warnings = append(warnings, s) }})
		if err != nil {
			t.Fatal(err)
		}
	}
	oldest, _ := bundle.Routes(routed("e0"))
	if len(m.Retired) != bundle.MaxRetired || m.Retired[0].Bundle != policy.ID(routed(fmt.Sprintf("e%d", bundle.MaxRetired))) {
		t.Errorf("%d retired bundles, newest %s", len(m.Retired), m.Retired[0].Bundle)
	}
	want := fmt.Sprintf("more than %d earlier bundles have routes in transition: the oldest routes (%s) are retired now", bundle.MaxRetired, oldest[0])
	if len(warnings) != 1 || warnings[0] != want {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
}
