package testbin

import (
	"os"
	"testing"

	"golang.org/x/mod/modfile"
)

// The module that builds kube-apiserver for the end-to-end suite requires
// every module admitfn also requires at admitfn's version, so that build
// reuses the packages test-bin compiled (same flags, same sources) instead
// of compiling them again on a cold cache.
func TestKubeAPIServerToolsShareVersions(t *testing.T) {
	versions := func(path string) map[string]string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(path, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := map[string]string{}
		for _, r := range f.Require {
			v[r.Mod.Path] = r.Mod.Version
		}
		return v
	}
	ours, tools := versions("../../go.mod"), versions("../../hack/tools/kube-apiserver/go.mod")
	shared := 0
	for path, want := range ours {
		got, ok := tools[path]
		if !ok {
			continue
		}
		shared++
		if got != want {
			t.Errorf("hack/tools/kube-apiserver requires %s %s, admitfn %s: run `go get %s@%s` there", path, got, want, path, want)
		}
	}
	if shared == 0 {
		t.Error("no module in common: the go.mod files were not read as expected")
	}
}
