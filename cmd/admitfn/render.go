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

	"github.com/admitfn/admitfn/core/celeval"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/render"
)

func renderCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policies := fs.String("policies", "policies/examples", "policy bundle directory")
	url := fs.String("url", "", "base URL of the function, https://HOST[:PORT][/prefix] (required)")
	caFile := fs.String("ca-bundle", "", "PEM file of the CA that signed the function's certificate (omit for publicly trusted certificates)")
	name := fs.String("name", "admitfn", "name of the webhook configurations")
	timeout := fs.Int("timeout", render.DefaultTimeoutSeconds, "timeoutSeconds of each webhook (1-30)")
	includeKubeSystem := fs.Bool("include-kube-system", false, "also send kube-system requests to the function (excluded by default)")
	output := fs.String("o", "yaml", "output format: yaml or json")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: admitfn render -url https://HOST[:PORT][/prefix] [flags]

Prints the webhook configurations for a policy bundle: a
ValidatingWebhookConfiguration for its ValidatingAdmissionPolicyBindings and a
MutatingWebhookConfiguration for its MutatingAdmissionPolicyBindings (each only
when the bundle has such bindings). Each holds one webhook per policy group
(bindings that kube-apiserver can pre-filter alike) calling the function on its
own route. YAML output is one document per configuration; JSON output is a v1
List of them. Apply either with kubectl apply -f -.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
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
	eng, err := engine.New(b, celeval.NewCompiler())
	if err != nil {
		return err
	}
	opts := render.Options{Name: *name, URL: *url, CABundle: ca, TimeoutSeconds: int32(*timeout), IncludeKubeSystem: *includeKubeSystem}
	validating, err := render.Validating(eng.Groups(), opts)
	if err != nil {
		return err
	}
	mutating, err := render.Mutating(eng.Groups(), opts)
	if err != nil {
		return err
	}
	var objs []any
	if len(validating.Webhooks) > 0 {
		objs = append(objs, validating)
	}
	if len(mutating.Webhooks) > 0 {
		objs = append(objs, mutating)
	}
	if len(objs) == 0 {
		return fmt.Errorf("the bundle in %s has no bindings: there is nothing for kube-apiserver to call", *policies)
	}
	items := make([]any, len(objs))
	for i, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		items[i] = u
	}
	var out []byte
	if *output == "json" {
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		out, err = json.MarshalIndent(list, "", "  ")
		out = append(out, '\n')
	} else {
		for i, item := range items {
			doc, err := yaml.Marshal(item)
			if err != nil {
				return err
			}
			if i > 0 {
				out = append(out, "---\n"...)
			}
			out = append(out, doc...)
		}
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
