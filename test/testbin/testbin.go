// Package testbin hands tests the project's binaries. `make test` builds
// them once, before any test runs, into $ADMITFN_TEST_BIN; a package tested
// on its own builds what it asks for, once per test process.
//
// Every binary is built as the Lambda bootstrap is, static and with
// -trimpath, so the binaries, the Lambda zips, the vendored Cloud Functions
// build and the kube-apiserver share one set of compiled packages in the
// build cache instead of compiling the dependency tree once per build
// configuration.
package testbin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/admitfn/admitfn/hack/build/lambdabuild"
	"github.com/admitfn/admitfn/hack/build/srcrev"
)

// EnvDir names the directory make builds the binaries into.
const EnvDir = "ADMITFN_TEST_BIN"

// Timeout bounds one build. The first build on a cold cache compiles the
// whole Kubernetes dependency tree, which takes many minutes on 2 CPUs.
const Timeout = 30 * time.Minute

// Flags are the go build flags of every binary but the Lambda bootstrap,
// which has lambdabuild.Flags; both run with CGO_ENABLED=0.
var Flags = []string{"-trimpath"}

// packages maps each binary's name to the package it is built from.
// The Lambda bootstrap has a directory of its own: the directory a
// bootstrap runs from is its task root.
var packages = map[string]string{
	"server":    "github.com/admitfn/admitfn/functions/server",
	"admitfn":   "github.com/admitfn/admitfn/cmd/admitfn",
	"gcf":       "github.com/admitfn/admitfn/functions/gcf/runner",
	"bootstrap": lambdabuild.Package,
}

// Names lists the binaries, sorted.
func Names() []string {
	names := make([]string, 0, len(packages))
	for n := range packages {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Build builds the named binary into dir/name for this machine.
func Build(ctx context.Context, name, dir string) error {
	pkg, ok := packages[name]
	if !ok {
		return fmt.Errorf("testbin: no binary %q (have %v)", name, Names())
	}
	out := file(dir, name)
	if name == "bootstrap" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return lambdabuild.Build(ctx, pkg, runtime.GOARCH, out)
	}
	args := append([]string{"build"}, Flags...)
	if stamp := srcrev.Ldflags(srcrev.Revision(ctx)); stamp != "" {
		// The revision of the source, as the bootstrap's: binaries built
		// together trust each other's compiled bundles.
		args = append(args, "-ldflags", stamp)
	}
	args = append(args, "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// file is where dir keeps the named binary.
func file(dir, name string) string {
	if name == "bootstrap" {
		return filepath.Join(dir, "lambda", name)
	}
	return filepath.Join(dir, name)
}

var (
	mu    sync.Mutex
	tmp   string
	built = map[string]bool{}
)

// Get returns the path of the named binary: make's when $ADMITFN_TEST_BIN is
// set, otherwise one this process builds on first use (within Timeout).
func Get(name string) (string, error) {
	if _, ok := packages[name]; !ok {
		return "", fmt.Errorf("testbin: no binary %q (have %v)", name, Names())
	}
	if dir := os.Getenv(EnvDir); dir != "" {
		p := file(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("testbin: %w (make test-bin builds it; unset %s to build it here)", err, EnvDir)
		}
		return p, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if tmp == "" {
		d, err := os.MkdirTemp("", "admitfn-test-bin-")
		if err != nil {
			return "", err
		}
		tmp = d
	}
	p := file(tmp, name)
	if built[name] {
		return p, nil
	}
	fmt.Fprintf(os.Stderr, "testbin: building %s (%s not set; on a cold build cache this takes minutes)\n", name, EnvDir)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := Build(ctx, name, tmp); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("testbin: building %s took longer than %v: %w", name, Timeout, err)
		}
		return "", err
	}
	built[name] = true
	return p, nil
}

// Path is Get for a test: it fails the test when the binary cannot be had.
func Path(tb testing.TB, name string) string {
	tb.Helper()
	p, err := Get(name)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// MustGet is Get for a TestMain, which has no test to fail: it exits.
func MustGet(name string) string {
	p, err := Get(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return p
}

// Run is a TestMain's body: it runs the tests, removes what Get built and
// returns the exit code.
func Run(m *testing.M) int {
	code := m.Run()
	Cleanup()
	return code
}

// Cleanup removes what Get built; a TestMain calls it after m.Run.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if tmp != "" {
		os.RemoveAll(tmp)
		tmp, built = "", map[string]bool{}
	}
}
