package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/lint"
)

// errLintFailed exits 1 without a further message: the output said it.
var errLintFailed = errors.New("lint errors")

func lintCmd(args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("lint", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprintf(stderr, `Usage: admitfn lint DIR...

Loads each DIR as a policy bundle (every expression compiled, every object
checked as kube-apiserver checks it on create), then:

  - type-checks each ValidatingAdmissionPolicy's validations and message
    expressions against the schemas of the built-in kinds its rules match,
    as kube-apiserver does for status.typeChecking (an error here is an
    expression that fails on every object it is meant for);
  - warns where a function differs from kube-apiserver: the authorizer (the
    function has none), namespaceObject fields other than metadata.name (the
    function is not sent the namespace), rules whose wildcards or custom
    resources leave expressions unchecked, and bindings that make more than
    %d webhook groups.

Exits 1 when a bundle does not load or has errors; warnings alone exit 0.
`, lint.MaxGroups)
	}
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	if fset.NArg() == 0 {
		fmt.Fprintln(stderr, "admitfn lint: name at least one bundle directory")
		return errUsage
	}
	errorCount, warnings := 0, 0
	for _, dir := range fset.Args() {
		_, b, err := engine.Load(os.DirFS(dir), ".", celeval.NewCompiler())
		if err != nil {
			fmt.Fprintf(stdout, "%s: %s\n", dir, strings.ReplaceAll(err.Error(), "\n", "\n  "))
			errorCount++
			continue
		}
		for _, f := range lint.Set(b) {
			line := f.String()
			if f.Origin.File != "" {
				line = filepath.Join(dir, line)
			} else {
				line = filepath.Clean(dir) + ": " + line
			}
			fmt.Fprintln(stdout, strings.ReplaceAll(line, "\n", "\n  "))
			if f.Severity == lint.Error {
				errorCount++
			} else {
				warnings++
			}
		}
	}
	fmt.Fprintf(stdout, "%s, %s\n", plural(errorCount, "error"), plural(warnings, "warning"))
	if errorCount > 0 {
		return errLintFailed
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
