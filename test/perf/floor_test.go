package perf_test

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/perf"
)

// upstreamPrefixes are the modules whose packages admitfn's core reuses:
// Kubernetes' and cel-go's.
var upstreamPrefixes = []string{"k8s.io/", "sigs.k8s.io/", "github.com/google/cel-go/"}

// The upstream floor of P4 and P6 links exactly the Kubernetes and cel-go
// packages core/ imports: one more would flatter admitfn, one fewer the
// floor.
func TestUpstreamFloorImports(t *testing.T) {
	root := perf.RepoRoot()
	cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./core/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./core/...: %v", err)
	}
	var want []string
	for _, p := range strings.Fields(string(out)) {
		for _, prefix := range upstreamPrefixes {
			if strings.HasPrefix(p, prefix) && !slices.Contains(want, p) {
				want = append(want, p)
			}
		}
	}
	slices.Sort(want)

	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "test", "perf", "upstream", "upstream.go"), nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("test/perf/upstream imports\n%s\nwant core/'s Kubernetes and cel-go imports\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
