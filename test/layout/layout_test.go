// Package layout checks rules of the repository's layout that no compiler
// enforces (CONTRIBUTING.md, "Layout").
package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/doccheck"
)

const module = "github.com/admitfn/admitfn/"

// kit reports whether a package exists for tests: the suites and kits under
// test/, the build tools under hack/, and the kits beside what they fake.
func kit(pkg string) bool {
	rel := strings.TrimPrefix(pkg, module)
	if strings.HasPrefix(rel, "test/") || strings.HasPrefix(rel, "hack/") {
		return true
	}
	last := rel[strings.LastIndex(rel, "/")+1:]
	return strings.HasSuffix(last, "test") || last == "testpolicies" || last == "slowpolicy"
}

// No production package imports a test kit: what ships is what the tests
// do not replace.
func TestNoProductionPackageImportsATestKit(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var production, kits int
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if kit(fields[0]) {
			kits++
			continue
		}
		production++
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) && kit(imp) {
				t.Errorf("%s imports the test kit %s", fields[0], imp)
			}
		}
	}
	if production < 20 || kits < 8 {
		t.Errorf("%d production packages and %d kits: the list no longer sees the repository", production, kits)
	}
}

// CONTRIBUTING.md's layout names directories that exist, and every package
// directory under core/, adapters/, functions/ and test/, and every
// top-level directory.
func TestContributingLayout(t *testing.T) {
	tree := doccheck.Find(t, "CONTRIBUTING.md", 1)[0]
	listed := map[string]bool{}
	var parents []string // the directory last listed at each indentation level
	for _, line := range strings.Split(strings.TrimSpace(tree.Text), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		level := (len(line) - len(trimmed)) / 2
		if level > len(parents) {
			t.Fatalf("%s: %q is indented under nothing", tree, line)
		}
		name := strings.TrimSuffix(strings.Fields(trimmed)[0], "/")
		path := name
		if level > 0 {
			path = parents[level-1] + "/" + name
		}
		if fi, err := os.Stat(filepath.Join("../..", path)); err != nil || !fi.IsDir() {
			t.Errorf("%s: %s is not a directory", tree, path)
		}
		for p := path; p != "."; p = filepath.Dir(p) {
			listed[p] = true
		}
		parents = append(parents[:level], path)
	}
	top, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "dist" && e.Name() != "bin" && !listed[e.Name()] {
			t.Errorf("%s: the top-level directory %s is not listed", tree, e.Name())
		}
	}
	for _, dir := range []string{"core", "adapters", "functions", "test"} {
		entries, err := os.ReadDir(filepath.Join("../..", dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !listed[dir+"/"+e.Name()] {
				t.Errorf("%s: %s/%s is not listed", tree, dir, e.Name())
			}
		}
	}
	if len(listed) < 30 {
		t.Errorf("%d directories listed: the tree was not read", len(listed))
	}
}

// Every fuzz target in the repository is in the Makefile's FUZZ_TARGETS,
// which make fuzz and CI's fuzz-short run, and every listed one exists: go
// test -fuzz that matches nothing passes without a word, so a moved or
// renamed target would silently stop being fuzzed.
func TestFuzzTargetsListed(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	var list string
	for _, line := range strings.SplitAfter(string(makefile), "\n") {
		if strings.HasPrefix(line, "FUZZ_TARGETS :=") || (list != "" && strings.HasSuffix(strings.TrimRight(list, "\n"), "\\")) {
			list += line
		}
	}
	for _, f := range strings.Fields(strings.TrimPrefix(list, "FUZZ_TARGETS :=")) {
		if f != "\\" {
			listed[f] = true
		}
	}
	if len(listed) == 0 {
		t.Fatal("no FUZZ_TARGETS in the Makefile")
	}
	found := map[string]bool{}
	err = filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "dist" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(src), "\n") {
			if name, ok := strings.CutPrefix(line, "func Fuzz"); ok && strings.Contains(name, "(f *testing.F)") {
				dir, _ := filepath.Rel("../..", filepath.Dir(path))
				found["./"+filepath.ToSlash(dir)+":Fuzz"+name[:strings.Index(name, "(")]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range found {
		if !listed[f] {
			t.Errorf("fuzz target %s is not in the Makefile's FUZZ_TARGETS", f)
		}
	}
	for f := range listed {
		if !found[f] {
			t.Errorf("FUZZ_TARGETS lists %s, which is no fuzz target", f)
		}
	}
}
