package main

import (
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/util/version"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/lint"
	"github.com/admitfn/admitfn/core/policy"
)

// loadRule is the rule of a bundle that does not load: every other finding
// is one of lint.Rules.
var loadRule = lint.Rule{ID: "load", Severity: lint.Error, Summary: "The bundle does not load: a function would refuse it."}

// finding is one lint finding as the reports print it.
type finding struct {
	Bundle   string `json:"bundle"`
	File     string `json:"file,omitempty"`     // the bundle file, as a path from the working directory
	Document int    `json:"document,omitempty"` // 1-based, in File
	Line     int    `json:"line,omitempty"`     // where the document starts in File
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Object   string `json:"object,omitempty"`
	Field    string `json:"field,omitempty"`
	Message  string `json:"message"`
}

func (c *cli) lintCmd() *cobra.Command {
	var (
		bundles    []string
		output     string
		k8sVersion string
		opts       lint.Options
	)
	cmd := &cobra.Command{
		Use:   "lint [BUNDLE...]",
		Short: "Type-check a bundle's expressions and warn about what a function cannot do",
		Long: fmt.Sprintf(`Loads each bundle (named by -p/--policies or as an argument: a directory, a
YAML or JSON file, or - for standard input) with every expression compiled
and every object checked as kube-apiserver checks it on create. Each
problem is a finding at its file, document and line, every object's at
once (a field typo does not hide an expression elsewhere that does not
compile). Then, on what loaded:

  - type-checks each ValidatingAdmissionPolicy's validations and message
    expressions against the schemas of the built-in kinds its rules match,
    as kube-apiserver does for status.typeChecking (an error here is an
    expression that fails on every object it is meant for);
  - warns where a function differs from kube-apiserver: the authorizer (the
    function has none), namespaceObject fields other than metadata.name (the
    function is not sent the namespace), rules whose wildcards or custom
    resources leave expressions unchecked, calls that can build values many
    times their input, and bindings that make more than %d webhook groups;
  - says where param kinds come from when that may surprise: without
    cluster access, a kind the bundle carries nothing of has no params;
    with it (--cluster-access: the function reads the clusters it serves,
    see docs/cluster.md), a kind the bundle carries is served from the
    bundle, never the cluster, and the authorizer and namespaceObject
    warnings are not made;
  - with --kubernetes-version 1.N, finds the expressions that use a CEL
    library or function a kube-apiserver of 1.N does not have (it accepts
    new expressions in the environment of 1.N-1): such a cluster refuses
    the policy in-cluster, and a webhook configuration whose pushed-down
    conditions use one. admitfn itself runs them whatever the cluster.

-o json prints the findings as JSON, -o sarif as a SARIF 2.1.0 log that code
scanning (GitHub, GitLab) shows beside the lines. Exits 1 when a bundle does
not load or has errors; warnings alone exit 0.`, lint.MaxGroups),
		Example: `  admitfn lint -p policies/
  admitfn lint policies/examples policies/library/*/
  admitfn lint -p policies/ -o sarif > admitfn.sarif
  helm template chart/ | admitfn lint -p -`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "text", "json", "sarif"); err != nil {
				return err
			}
			if k8sVersion != "" {
				v, err := version.ParseGeneric(k8sVersion)
				tracked := lint.TrackedKubernetesVersion()
				if err != nil || v.LessThan(lint.MinKubernetesVersion) || tracked.LessThan(version.MajorMinor(v.Major(), v.Minor())) {
					return usagef("--kubernetes-version %q: want a version from %s to %d.%d", k8sVersion, lint.MinKubernetesVersion, tracked.Major(), tracked.Minor())
				}
				opts.KubernetesVersion = version.MajorMinor(v.Major(), v.Minor())
			}
			paths := append(bundles, args...)
			if len(paths) == 0 {
				return usagef("name at least one bundle: admitfn lint -p policies/")
			}
			if i := slices.Index(paths, "-"); i >= 0 && slices.Contains(paths[i+1:], "-") {
				return usagef("standard input (-) can be read only once")
			}
			return c.lint(paths, output, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.ClusterAccess, "cluster-access", false, "lint for a deployment that reads the clusters it serves (ADMITFN_CLUSTERS with access)")
	cmd.Flags().StringVar(&k8sVersion, "kubernetes-version", "", "the Kubernetes version of the clusters the bundle is for, 1.N: find expressions their kube-apiserver would refuse")
	cmd.Flags().StringArrayVarP(&bundles, "policies", "p", nil, policiesUsage+" (repeatable; also taken as arguments)")
	cmd.MarkFlagFilename("policies", "yaml", "yml", "json")
	outputFlag(cmd, &output, "text", "json", "sarif")
	return cmd
}

func (c *cli) lint(paths []string, output string, opts lint.Options) error {
	var findings []finding
	for _, path := range paths {
		findings = append(findings, c.lintBundle(path, opts)...)
	}
	errorCount, warnings := 0, 0
	for _, f := range findings {
		if f.Severity == string(lint.Error) {
			errorCount++
		} else {
			warnings++
		}
	}
	var err error
	switch output {
	case "json":
		err = writeJSON(c.out, struct {
			Errors   int       `json:"errors"`
			Warnings int       `json:"warnings"`
			Findings []finding `json:"findings"`
		}{errorCount, warnings, nonNilFindings(findings)})
	case "sarif":
		err = writeSARIF(c.out, findings)
	default:
		colour := c.colour(c.out)
		for _, f := range findings {
			sev := paint(colour, map[string]string{"error": "red", "warning": "yellow"}[f.Severity], f.Severity)
			where := f.Object
			if f.Field != "" {
				where += ": " + f.Field
			}
			if where != "" {
				where += ": "
			}
			var line string
			switch {
			case f.File != "":
				line = fmt.Sprintf("%s: document %d: %s: %s%s", f.File, f.Document, sev, where, f.Message)
			case where != "":
				line = fmt.Sprintf("%s: %s: %s%s", f.Bundle, sev, where, f.Message)
			default:
				line = fmt.Sprintf("%s: %s: %s", f.Bundle, sev, f.Message)
			}
			fmt.Fprintln(c.out, strings.ReplaceAll(line, "\n", "\n  "))
		}
		fmt.Fprintf(c.out, "%s, %s\n", plural(errorCount, "error"), plural(warnings, "warning"))
	}
	if err != nil {
		return err
	}
	if errorCount > 0 {
		return errReported
	}
	return nil
}

// lintBundle loads and lints the bundle at path. A bundle that does not
// load gives a finding per problem, each at its file and line where it has
// one: every object's, not only the first's, and the compile errors of the
// objects that did load; the rules then check what compiled.
func (c *cli) lintBundle(path string, opts lint.Options) []finding {
	name := bundleName(path)
	sources, err := c.readBundle(path)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "bundle "+path+": ")
		return []finding{{Bundle: name, Rule: loadRule.ID, Severity: string(loadRule.Severity), Message: msg}}
	}
	data := map[string][]byte{}
	for _, s := range sources {
		data[s.Name] = s.Data
	}
	single := path != "-" && len(sources) == 1 && sources[0].Name == filepath.Base(path)
	if single {
		if fi, err := os.Stat(path); err != nil || fi.IsDir() {
			single = false
		}
	}
	// at fills where a finding is, from where in the bundle it was found.
	at := func(fd *finding, origin policy.Origin) {
		if origin.File == "" {
			return
		}
		fd.File, fd.Document = origin.File, origin.Document
		switch {
		case path == "-":
			fd.File = "<stdin>"
		case single:
			fd.File = path
		default:
			fd.File = filepath.Join(path, origin.File)
		}
		fd.Line = policy.DocumentLine(data[origin.File], origin.Document)
	}

	b, errs := policy.ParseLenient(sources)
	if _, err := engine.New(b, celeval.NewCompiler()); err != nil {
		var compileErrs policy.Errors
		if !errors.As(err, &compileErrs) {
			compileErrs = policy.Errors{err}
		}
		errs = append(errs, compileErrs...)
	}
	var out []finding
	failed := map[policy.Origin]bool{}
	for _, e := range errs {
		fd := finding{Bundle: name, Rule: loadRule.ID, Severity: string(loadRule.Severity), Message: e.Error()}
		var oe *policy.OriginError
		if errors.As(e, &oe) {
			at(&fd, oe.Origin)
			failed[oe.Origin] = true
			// The finding says where; its message, what.
			msg := strings.TrimPrefix(fd.Message, oe.Origin.File+": ")
			fd.Message = strings.TrimPrefix(msg, fmt.Sprintf("document %d: ", oe.Origin.Document))
		}
		out = append(out, fd)
	}
	if len(failed) > 0 {
		b.DropAt(failed) // the rules check what loaded and compiled
	}
	for _, f := range lint.SetWith(b, opts) {
		fd := finding{Bundle: name, Rule: f.Rule, Severity: string(f.Severity), Object: f.Object, Field: f.Field, Message: f.Message}
		at(&fd, f.Origin)
		out = append(out, fd)
	}
	return out
}

func nonNilFindings(f []finding) []finding {
	if f == nil {
		return []finding{}
	}
	return f
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
