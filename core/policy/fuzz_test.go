package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse: any file parses to a bundle or to errors, never a panic; and
// to the same bundle or errors from its Documents.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../policies/examples/*.yaml")
	for _, name := range files[:4] {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n"))
	f.Add([]byte("---\n--- \n{\"a\": [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse([]Source{{Name: "f.yaml", Data: data}})
		if (b == nil) == (err == nil) {
			t.Fatalf("bundle %v, error %v: want exactly one", b != nil, err)
		}
		if b != nil {
			b.Groups()
			b.MutatingGroups()
		}
		docs, derr := Documents(data)
		if derr != nil {
			return
		}
		b2, err2 := Parse([]Source{{Name: "f.yaml", Data: data, Documents: docs}})
		if fmt.Sprint(err2) != fmt.Sprint(err) || !reflect.DeepEqual(b2, b) {
			t.Fatalf("from Documents: %v\nfrom YAML: %v", err2, err)
		}
	})
}

// FuzzParseRoute: a path is a route whose Path is that path, or no route.
func FuzzParseRoute(f *testing.F) {
	for _, p := range []string{"/validate", "/validate/abc", "/mutate", "/mutate/0123456789", "/validate/", "/validate//x", "/mutatex", ""} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		r, ok := ParseRoute(path)
		if ok && r.Path() != path {
			t.Fatalf("ParseRoute(%q) = %+v, whose Path is %q", path, r, r.Path())
		}
	})
}
