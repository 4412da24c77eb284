// Package layout checks rules of the repository's layout that no compiler
// enforces (CONTRIBUTING.md, "Layout").
package layout

import (
	"os/exec"
	"strings"
	"testing"
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
