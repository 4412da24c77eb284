// Command admitfn is the policy author's and operator's tool: it renders the
// webhook configuration for a bundle, tests and lints bundles, and publishes
// them to object storage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/admitfn/admitfn/core/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `admitfn serves Kubernetes ValidatingAdmissionPolicies and MutatingAdmissionPolicies from a function.

Usage:
  admitfn <command> [flags]

Commands:
  render   print the webhook configurations that point kube-apiserver at the function
  test     run the test cases beside a bundle's policies
  lint     type-check a bundle's expressions and warn about what a function cannot do
  push     publish a bundle to S3, GCS or a directory, manifest last, optionally signed
  keygen   make an ed25519 key pair for signing bundles
  token    make a path token for the function's URL
  version  print admitfn's version, revision, Kubernetes and Go versions (also --version)

Run 'admitfn <command> -h' for a command's flags.
`

// run executes a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "render":
		err = renderCmd(args[1:], stdout, stderr)
	case "test":
		err = testCmd(args[1:], stdout, stderr)
	case "lint":
		err = lintCmd(args[1:], stdout, stderr)
	case "push":
		err = pushCmd(args[1:], stdout, stderr, os.Getenv)
	case "keygen":
		err = keygenCmd(args[1:], stdout, stderr)
	case "token":
		err = tokenCmd(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "admitfn version takes no arguments\n")
			return 2
		}
		fmt.Fprintln(stdout, version.Get())
		return 0
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "admitfn: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errTestsFailed), errors.Is(err, errLintFailed):
		return 1
	default:
		fmt.Fprintf(stderr, "admitfn %s: %v\n", args[0], err)
		return 1
	}
}

// errUsage marks bad flags; the flag package has already explained them.
var errUsage = errors.New("usage")

// parseFlags parses a subcommand's flags: -h is flag.ErrHelp, anything the
// flag package rejected (and explained) is errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}
