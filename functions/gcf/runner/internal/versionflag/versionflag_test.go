package versionflag_test

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/admitfn/admitfn/test/testbin"
)

var runner string

func TestMain(m *testing.M) {
	runner = testbin.MustGet("gcf")
	os.Exit(testbin.Run(m))
}

// The runner's --version answers before the function's init loads a bundle: here one
// that does not exist, which stops the runner without the flag.
func TestVersionFlag(t *testing.T) {
	env := append(os.Environ(), "ADMITFN_POLICIES="+t.TempDir()+"/none", "LOCAL_ONLY=true", "PORT=0")
	cmd := exec.Command(runner, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	// make's builds stamp the revision of their source (hack/build/srcrev).
	want := regexp.MustCompile(`^admitfn \(devel\) \(revision (unknown|src-[0-9a-f]{16}), Kubernetes v1\.37\.2, ` + regexp.QuoteMeta(runtime.Version()) + `\)\n$`)
	if err != nil || !want.Match(out) {
		t.Errorf("runner --version: %q, %v; want %s", out, err, want)
	}
	cmd = exec.Command(runner)
	cmd.Env = env
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), `"severity":"CRITICAL","message":"admitfn cannot start: `) {
		t.Errorf("runner without --version: %v\n%s", err, out)
	}
}
