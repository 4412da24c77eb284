// Package gcfsource writes the source zip Cloud Functions builds the Go
// function from: go.mod at its root, a root package that imports the
// function (Cloud Functions builds the package at the source root), the
// module's packages the function needs, every dependency vendored so the
// build needs nothing but the zip, and the policy bundle in policies/.
package gcfsource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/hack/build/zipfile"
)

// Module is this repository's module path.
const Module = "github.com/admitfn/admitfn"

// Function is the package that registers the function; LocalRunner is the
// functions-framework runner for local runs.
const (
	Function    = Module + "/functions/gcf"
	LocalRunner = Function + "/runner"
)

const rootPackage = `// Package function is the root of admitfn's Cloud Functions source: Cloud
// Functions builds the package at the root of the uploaded source, and this
// one registers the function (entry point Admitfn) by importing it.
package function

import _ "github.com/admitfn/admitfn/functions/gcf"
`

// Write stages the source from the module at repo with the bundle in
// policies and writes the zip to w.
func Write(ctx context.Context, repo, policies string, w io.Writer) error {
	return WriteWith(ctx, repo, policies, w, nil)
}

// WriteWith is Write with extra files (slash-separated path: content)
// added to the source: a release's licence, notices and version stamp.
func WriteWith(ctx context.Context, repo, policies string, w io.Writer, extra map[string][]byte) error {
	stage, err := os.MkdirTemp("", "admitfn-gcf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := Stage(ctx, repo, policies, stage); err != nil {
		return err
	}
	for name, data := range extra {
		p := filepath.Join(stage, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return zipDir(stage, w)
}

// Stage lays the source out in the empty directory dir.
func Stage(ctx context.Context, repo, policies, dir string) error {
	pkgs, err := modulePackages(ctx, repo)
	if err != nil {
		return err
	}
	for _, p := range pkgs {
		rel, err := filepath.Rel(repo, p.Dir)
		if err != nil {
			return err
		}
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			if err := copyFile(filepath.Join(p.Dir, f), filepath.Join(dir, rel, f)); err != nil {
				return err
			}
		}
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := copyFile(filepath.Join(repo, f), filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "function.go"), []byte(rootPackage), 0o644); err != nil {
		return err
	}
	if err := copyBundle(policies, filepath.Join(dir, "policies")); err != nil {
		return err
	}
	return goCmd(ctx, dir, "mod", "vendor")
}

type goPackage struct {
	ImportPath, Dir     string
	GoFiles, EmbedFiles []string
	Module              *struct{ Path string }
}

// modulePackages lists this module's packages the function and its local
// runner import (tests excluded).
func modulePackages(ctx context.Context, repo string) ([]goPackage, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,EmbedFiles,Module", LocalRunner)
	cmd.Dir = repo
	cmd.Env = goEnv()
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v", exitDetail(err))
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		if p.Module != nil && p.Module.Path == Module {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, nil
}

// copyBundle copies the bundle's files, read as every entry point reads a
// bundle directory (policy.ReadFS): no test files, links resolved.
func copyBundle(from, to string) error {
	sources, err := policy.ReadFS(os.DirFS(from), ".")
	if err != nil {
		return err
	}
	for _, s := range sources {
		p := filepath.Join(to, filepath.FromSlash(s.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, s.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

func goEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
}

func goCmd(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func exitDetail(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Sprintf("%v\n%s", err, ee.Stderr)
	}
	return err.Error()
}

// zipDir writes dir's files as a reproducible archive.
func zipDir(dir string, w io.Writer) error {
	var entries []zipfile.Entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		entries = append(entries, zipfile.Entry{Name: filepath.ToSlash(rel), Mode: 0o644, Data: data})
		return err
	})
	if err != nil {
		return err
	}
	return zipfile.Write(w, entries)
}
