package main

import (
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/render"
	"github.com/admitfn/admitfn/core/validate"
)

func renderCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policies := fs.String("policies", "policies/examples", "policy bundle directory")
	url := fs.String("url", "", "base URL of the function, https://HOST[:PORT][/prefix] (required)")
	caFile := fs.String("ca-bundle", "", "PEM file of the CA that signed the function's certificate (omit for publicly trusted certificates)")
	name := fs.String("name", "admitfn", "name of the ValidatingWebhookConfiguration")
	timeout := fs.Int("timeout", render.DefaultTimeoutSeconds, "timeoutSeconds of each webhook (1-30)")
	includeKubeSystem := fs.Bool("include-kube-system", false, "also send kube-system requests to the function (excluded by default)")
	output := fs.String("o", "yaml", "output format: yaml or json")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: admitfn render -url https://HOST[:PORT][/prefix] [flags]

Prints the ValidatingWebhookConfiguration for a policy bundle: one webhook per
policy group (bindings that kube-apiserver can pre-filter alike), each calling
the function on its own route. Apply it with kubectl apply -f -.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	if *output != "yaml" && *output != "json" {
		fmt.Fprintf(stderr, "-o must be yaml or json, not %q\n", *output)
		return errUsage
	}
	var ca []byte
	if *caFile != "" {
		var err error
		if ca, err = os.ReadFile(*caFile); err != nil {
			return fmt.Errorf("read CA bundle: %w", err)
		}
		if block, _ := pem.Decode(ca); block == nil || block.Type != "CERTIFICATE" {
			return fmt.Errorf("CA bundle %s holds no PEM certificate", *caFile)
		}
	}

	b, err := policy.LoadFS(os.DirFS(*policies), ".")
	if err != nil {
		return err
	}
	// Compile too: a configuration is only worth rendering for a bundle the
	// function will accept.
	eng, err := engine.New(b, validate.NewCompiler())
	if err != nil {
		return err
	}
	cfg, err := render.Validating(eng.Groups(), render.Options{
		Name: *name, URL: *url, CABundle: ca, TimeoutSeconds: int32(*timeout), IncludeKubeSystem: *includeKubeSystem,
	})
	if err != nil {
		return err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
	if err != nil {
		return err
	}
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	var out []byte
	if *output == "json" {
		out, err = json.MarshalIndent(obj, "", "  ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(obj)
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
