package policy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/policy/testpolicies"
)

// TestParseReadsDocumentsAsItReadsYAML: every directory of policy files in
// the repository (each a bundle, broken ones included) parses to the same
// Set, or the same errors, whether its files carry their Documents or not.
func TestParseReadsDocumentsAsItReadsYAML(t *testing.T) {
	bundles := map[string][]policy.Source{}
	for _, dir := range append(testpolicies.Dirs, "core/policy") {
		root := filepath.Join("../..", dir)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !policy.IsBundleFile(d.Name()) {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			bundles[filepath.Dir(path)] = append(bundles[filepath.Dir(path)], policy.Source{Name: d.Name(), Data: data})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Documents the repository lacks: a List, a comment-only document, JSON,
	// numbers float64 cannot hold, a sequence, a duplicate key, and YAML
	// that does not parse (Documents fails: the file keeps none).
	bundles["synthetic"] = []policy.Source{
		{Name: "a.yaml", Data: []byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {n: \"1\"}}\n---\n# nothing\n---\n- a\n")},
		{Name: "b.json", Data: []byte(`{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "x": 123456789012345678901234567890, "y": 1.0}`)},
		{Name: "c.yml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nkind: Secret\n")},
		{Name: "d.yaml", Data: []byte("apiVersion: v1\n---\nkind: [\n")},
	}
	var parsed, broken, converted, unconverted int
	for _, dir := range slices.Sorted(func(yield func(string) bool) {
		for d := range bundles {
			if !yield(d) {
				return
			}
		}
	}) {
		sources := bundles[dir]
		withDocs := make([]policy.Source, len(sources))
		for i, s := range sources {
			withDocs[i] = s
			docs, err := policy.Documents(s.Data)
			if err != nil {
				unconverted++
				continue
			}
			converted++
			withDocs[i].Documents = docs
		}
		want, wantErr := policy.Parse(sources)
		got, gotErr := policy.Parse(withDocs)
		if wantErr != nil {
			broken++
			if gotErr == nil || gotErr.Error() != wantErr.Error() {
				t.Errorf("%s: with Documents: %v\nfrom YAML: %v", dir, gotErr, wantErr)
			}
			continue
		}
		parsed++
		if gotErr != nil {
			t.Errorf("%s: with Documents: %v; from YAML it parses", dir, gotErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the Set parsed with Documents differs from the one parsed from YAML", dir)
		}
	}
	// The repository's bundles, and its broken fixtures, are all compared.
	if parsed < 10 || broken < 5 || converted < 40 || unconverted != 1 {
		t.Fatalf("compared %d bundles that parse and %d that do not (%d files converted, %d not): the walk missed the repository's policies", parsed, broken, converted, unconverted)
	}
}

// TestDocuments: a file's documents as JSON, nil for one that holds only
// comments, numbered as Origin numbers them; a document that is not YAML
// is an error naming it.
func TestDocuments(t *testing.T) {
	docs, err := policy.Documents([]byte("---\na: 1\n---\n# only a comment\n---\nb: [x, \"y\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{[]byte(`{"a":1}`), nil, []byte(`{"b":["x","y"]}`)}
	if !reflect.DeepEqual(docs, want) {
		t.Fatalf("Documents = %q, want %q", docs, want)
	}
	if _, err := policy.Documents([]byte("a: 1\n---\nb: [\n")); err == nil || err.Error() != "document 2: invalid YAML: yaml: line 1: did not find expected node content" {
		t.Fatalf("Documents of broken YAML: error %v", err)
	}
}
