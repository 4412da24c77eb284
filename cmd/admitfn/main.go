// Command admitfn is the policy author's and operator's tool: it renders the
// webhook configuration for a bundle, tests and lints bundles, and publishes
// them to object storage.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/admitfn/admitfn/core/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes, as docs/cli.md states them.
const (
	exitOK      = 0 // the command did what was asked
	exitFailure = 1 // tests failed, lint found errors, or the command failed
	exitUsage   = 2 // the command line is wrong
)

// cli is one invocation's world: its streams and environment.
type cli struct {
	in     io.Reader
	out    io.Writer
	err    io.Writer
	getenv func(string) string
	now    func() time.Time
	// stdinTaken is set once a command has read in, which can be read once.
	stdinTaken bool
}

// run executes the command line args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{in: os.Stdin, out: stdout, err: stderr, getenv: os.Getenv, now: time.Now}
	return c.run(args)
}

func (c *cli) run(args []string) int {
	root := c.root()
	if err := singleDashLongFlag(root, args); err != nil {
		fmt.Fprintf(c.err, "admitfn: %v\nRun 'admitfn --help' for usage.\n", err)
		return exitUsage
	}
	// A mistyped command before flags (admitfn rendr -p x): cobra would
	// parse the flags as the root's and complain about -p.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && !strings.HasPrefix(args[0], "__") {
		root.InitDefaultHelpCmd()
		root.InitDefaultCompletionCmd()
		if found, _, _ := root.Find(args[:1]); found == root {
			fmt.Fprintf(c.err, "admitfn: %v\nRun 'admitfn --help' for usage.\n", unknownCommand(root, args[0]).(usageError).error)
			return exitUsage
		}
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	var usage usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errReported):
		return exitFailure
	case errors.Is(err, errUsageReported):
		return exitUsage
	case errors.As(err, &usage):
		fmt.Fprintf(c.err, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), usage.error, cmd.CommandPath())
		return exitUsage
	default:
		fmt.Fprintf(c.err, "%s: %v\n", cmd.CommandPath(), err)
		return exitFailure
	}
}

// usageError is a wrong command line: exit 2, with a pointer to --help.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

var (
	// errReported exits 1 without a further message: the output said why
	// (failed tests, lint errors).
	errReported = errors.New("failures reported")
	// errUsageReported exits 2 without a further message.
	errUsageReported = errors.New("usage reported")
)

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "admitfn",
		Short: "Kubernetes admission policies, served from a function",
		Long: `admitfn serves Kubernetes ValidatingAdmissionPolicies and
MutatingAdmissionPolicies from a function that kube-apiserver calls as a
webhook. This command renders the webhook configurations for a bundle of
policies, tests and lints bundles, and publishes them where the functions
load them from.

Exit codes: 0 when the command did what was asked, 1 when tests failed, lint
found errors or the command failed (the error is on stderr), 2 when the
command line is wrong.`,
		Example: `  admitfn lint -p policies/
  admitfn test policies/
  admitfn render -p policies/ --url https://fn.example.com/TOKEN | kubectl apply -f -
  admitfn push -p policies/ --to s3://my-bucket/admitfn --sign-key bundle.key`,
		Version:                    version.Get().String(),
		Args:                       cobra.ArbitraryArgs,
		SilenceErrors:              true,
		SilenceUsage:               true,
		SuggestionsMinimumDistance: 2,
		CompletionOptions:          cobra.CompletionOptions{HiddenDefaultCmd: false},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				// As kubectl: the help, on stdout, and success.
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}
	root.SetIn(c.in)
	root.SetOut(c.out)
	root.SetErr(c.err)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	if c.now == nil {
		c.now = time.Now
	}
	root.AddCommand(c.renderCmd(), c.testCmd(), c.lintCmd(), c.applyCmd(), c.pushCmd(), c.diffCmd(), c.keygenCmd(), c.tokenCmd(), c.versionCmd(), c.initCmd())
	return root
}

// unknownCommand is the usage error of a command root does not have, with
// the nearest one it has.
func unknownCommand(root *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if s := root.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usageError{errors.New(msg)}
}

// noArgs is cobra.NoArgs as a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments: %s", strings.Join(args, " "))
	}
	return nil
}

// singleDashLongFlag refuses a long flag written with one dash (-policies):
// pflag would read it as -p olicies.
func singleDashLongFlag(root *cobra.Command, args []string) error {
	long := map[string]bool{"help": true, "version": true}
	var collect func(*cobra.Command)
	collect = func(cmd *cobra.Command) {
		cmd.Flags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		for _, sub := range cmd.Commands() {
			collect(sub)
		}
	}
	collect(root)
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if long[name] {
			return usagef("%s: long flags take two dashes: -%s", a, a)
		}
	}
	return nil
}

// outputFlag registers -o/--output with its choices, completed by the shell.
func outputFlag(cmd *cobra.Command, p *string, choices ...string) {
	cmd.Flags().StringVarP(p, "output", "o", choices[0], "output format: "+strings.Join(choices, ", "))
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(choices, cobra.ShellCompDirectiveNoFileComp))
}

func checkOutput(got string, choices ...string) error {
	for _, c := range choices {
		if got == c {
			return nil
		}
	}
	list := strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
	return usagef("-o/--output must be %s, not %q", list, got)
}

// colour reports whether w gets colour: a terminal, and NO_COLOR unset
// (https://no-color.org) and TERM not dumb.
func (c *cli) colour(w io.Writer) bool {
	if c.getenv("NO_COLOR") != "" || c.getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// paint wraps s in an ANSI colour when on is set.
func paint(on bool, colour, s string) string {
	if !on {
		return s
	}
	code := map[string]string{"red": "31", "green": "32", "yellow": "33"}[colour]
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (c *cli) versionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print admitfn's version, revision, Kubernetes and Go versions",
		Long: `Prints the version of this admitfn build: its module version and VCS
revision, the Kubernetes release whose admission semantics it embeds, and
the Go version that built it. 'admitfn --version' prints the same line.`,
		Example: `  admitfn version
  admitfn version -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "text", "json"); err != nil {
				return err
			}
			info := version.Get()
			if output == "json" {
				return writeJSON(c.out, map[string]string{"version": info.Version, "revision": info.Revision, "kubernetes": info.Kubernetes, "go": info.Go})
			}
			_, err := fmt.Fprintln(c.out, info)
			return err
		},
	}
	outputFlag(cmd, &output, "text", "json")
	return cmd
}
