package main

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/admitfn/admitfn/core/lint"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/render"
	"github.com/admitfn/admitfn/functions/bundle"
)

func (c *cli) renderCmd() *cobra.Command {
	var (
		policies, url, caFile, name, output, clusterName string
		timeout                                          int
		pushDown, quiet, strict                          bool
		sent                                             webhookNamespaces
	)
	cmd := &cobra.Command{
		Use:   "render -p BUNDLE --url https://HOST[:PORT][/prefix]",
		Short: "Print the webhook configurations that point kube-apiserver at the function",
		Long: `Prints the webhook configurations for a policy bundle: a
ValidatingWebhookConfiguration for its ValidatingAdmissionPolicyBindings and a
MutatingWebhookConfiguration for its MutatingAdmissionPolicyBindings (each only
when the bundle has such bindings). Each holds one webhook per policy group
(bindings that kube-apiserver can pre-filter alike) calling the function on its
own route. YAML output is one document per configuration; JSON output is a v1
List of them. Apply either with kubectl apply -f -.

Push-down: each webhook gets a matchCondition that kube-apiserver evaluates
before calling, true whenever a binding of its group could act on the
request: the policies' own matchConditions where a webhook's may read what
they read, and what the bindings' match resources say that rules and
selectors cannot (resourceNames, excludeResourceRules, each binding's
operations, resources and scope). What was pushed for each webhook, and what
was not and why, goes to standard error (--quiet: not). --push-down=false
renders no condition (docs/cluster.md, "Fewer calls").

Without --cluster the webhooks call the function on URLs that name no
cluster, which it answers without cluster access: a binding that reads
namespaceObject beyond its name, asks the authorizer or takes params the
bundle does not carry is decided without them (docs/differences.md).
render names such bindings on standard error; --strict fails instead.`,
		Example: `  admitfn render -p policies/ --url https://fn.example.com/TOKEN | kubectl apply -f -
  admitfn render -p policies/ --url https://fn.example.com/TOKEN --cluster prod-eu | kubectl apply -f -
  admitfn render -p policies/ --url https://10.0.0.5:8443 --ca-bundle ca.pem -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, "yaml", "json"); err != nil {
				return err
			}
			return c.render(policies, output, render.Options{Name: name, URL: url, Cluster: clusterName, TimeoutSeconds: int32(timeout),
				IncludeKubeSystem: sent.includeKubeSystem, ExcludeNamespaces: sent.exclude, PushDown: pushDown}, caFile, quiet, strict)
		},
	}
	policiesFlag(cmd, &policies)
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "base URL of the function, https://HOST[:PORT][/prefix] (required)")
	f.StringVar(&caFile, "ca-bundle", "", "PEM file of the CA that signed the function's certificate (omit for publicly trusted certificates)")
	f.StringVar(&name, "name", "admitfn", "name of the webhook configurations")
	f.StringVar(&clusterName, "cluster", "", "the cluster these configurations are for, one of the function's ADMITFN_CLUSTERS: its URLs carry the name, and the function answers them from that cluster")
	f.IntVar(&timeout, "timeout", render.DefaultTimeoutSeconds, "timeoutSeconds of each webhook (1-30)")
	f.BoolVar(&sent.includeKubeSystem, "include-kube-system", false, "also send kube-system requests to the function (excluded by default)")
	f.StringArrayVar(&sent.exclude, "exclude-namespace", nil, "do not send this namespace's requests to the function either: its own, when it runs in the cluster it guards (repeatable)")
	f.BoolVar(&pushDown, "push-down", true, "add matchConditions that skip calls no binding could act on")
	f.BoolVarP(&quiet, "quiet", "q", false, "do not print the push-down report on standard error")
	f.BoolVar(&strict, "strict", false, "without --cluster, fail when a binding reads the cluster (namespaceObject, authorizer, params the bundle does not carry)")
	outputFlag(cmd, &output, "yaml", "json")
	return cmd
}

// webhookNamespaces are the namespaces the rendered webhooks are not sent:
// kube-system unless --include-kube-system, and each --exclude-namespace.
// apply and test take the same flags and skip the same requests, so what
// they decide is what the cluster sends the function.
type webhookNamespaces struct {
	includeKubeSystem bool
	exclude           []string
}

// flags registers apply's and test's flags for the namespaces render
// leaves out.
func (w *webhookNamespaces) flags(f *pflag.FlagSet) {
	f.BoolVar(&w.includeKubeSystem, "include-kube-system", false, "send kube-system requests to the webhooks too, as admitfn render --include-kube-system configures them")
	f.StringArrayVar(&w.exclude, "exclude-namespace", nil, "send this namespace's requests to no webhook, as admitfn render --exclude-namespace configures them (repeatable)")
}

// check refuses an excluded namespace no namespace can be named.
func (w webhookNamespaces) check() error {
	if err := (render.Options{ExcludeNamespaces: w.exclude}).CheckNamespaces(); err != nil {
		return usagef("--exclude-namespace: %v", err)
	}
	return nil
}

// skips reports whether a request in namespace ns reaches no webhook.
func (w webhookNamespaces) skips(ns string) bool {
	return ns != "" && slices.Contains(render.Options{IncludeKubeSystem: w.includeKubeSystem, ExcludeNamespaces: w.exclude}.Excluded(), ns)
}

func (c *cli) render(policies, output string, opts render.Options, caFile string, quiet, strict bool) error {
	if opts.URL == "" {
		return usagef("--url is required: the function's base URL, https://HOST[:PORT][/prefix]")
	}
	if err := opts.Check(); err != nil {
		return usagef("%v", err)
	}
	if caFile != "" {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return fmt.Errorf("read CA bundle: %w", err)
		}
		if block, _ := pem.Decode(ca); block == nil || block.Type != "CERTIFICATE" {
			return fmt.Errorf("CA bundle %s holds no PEM certificate", caFile)
		}
		opts.CABundle = ca
	}
	// Compile too: a configuration is only worth rendering for a bundle the
	// function will accept.
	eng, _, _, err := c.loadBundle(policies)
	if err != nil {
		return err
	}
	opts.Policies = eng.Policies()
	if opts.Cluster == "" {
		if err := c.warnClusterReads(opts.Policies, strict, "rendered without --cluster, the function decides it without cluster access (docs/differences.md)"); err != nil {
			return err
		}
	}
	items, reports, err := renderItems(eng.Groups(), opts)
	if err != nil {
		return err
	}
	if !quiet && len(items) > 0 {
		for _, r := range reports {
			fmt.Fprint(c.err, r.String())
		}
	}
	if len(items) == 0 {
		return fmt.Errorf("the bundle %s has no bindings: there is nothing for kube-apiserver to call", bundleName(policies))
	}
	var out []byte
	if output == "json" {
		out, err = renderList(items)
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
	_, err = c.out.Write(out)
	return err
}

// warnClusterReads names on standard error each binding of set that reads
// the cluster, with what that means here (consequence); strict makes them
// an error.
func (c *cli) warnClusterReads(set *policy.Set, strict bool, consequence string) error {
	reads := lint.ClusterReads(set)
	for _, r := range reads {
		fmt.Fprintf(c.err, "warning: %s: %s\n", r, consequence)
	}
	if strict && len(reads) > 0 {
		return fmt.Errorf("--strict: %d binding(s) read the cluster", len(reads))
	}
	return nil
}

// renderItems are the webhook configurations of groups, as unstructured
// objects (none for a bundle without bindings), and the push-down reports.
func renderItems(groups []*policy.Group, opts render.Options) ([]any, []render.Report, error) {
	validating, mutating, reports, err := render.Render(groups, opts)
	if err != nil {
		return nil, nil, err
	}
	var objs []any
	if len(validating.Webhooks) > 0 {
		objs = append(objs, validating)
	}
	if len(mutating.Webhooks) > 0 {
		objs = append(objs, mutating)
	}
	items := make([]any, len(objs))
	for i, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, nil, err
		}
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		items[i] = u
	}
	return items, reports, nil
}

// renderList is render -o json: a v1 List of items.
func renderList(items []any) ([]byte, error) {
	var out bytes.Buffer
	err := writeJSON(&out, map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	return out.Bytes(), err
}

// publishedWebhooks is what push stores at bundle.WebhooksKey: render -o
// json of set with the URL bundle.WebhooksURL, for the Terraform webhook
// module to point at the function. With push-down, so that push sees a
// change of a pushed condition as the change of the configurations it is.
func publishedWebhooks(set *policy.Set) ([]byte, error) {
	items, _, err := renderItems(append(set.Groups(), set.MutatingGroups()...), render.Options{URL: bundle.WebhooksURL, PushDown: true, Policies: set})
	if err != nil {
		return nil, err
	}
	return renderList(items)
}
