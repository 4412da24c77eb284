package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/bundle/store/anystore"
)

func (c *cli) diffCmd() *cobra.Command {
	var (
		policies, to, output string
		timeout              time.Duration
	)
	cmd := &cobra.Command{
		Use:   "diff -p BUNDLE --to s3://bucket/prefix|gs://bucket/prefix|DIR",
		Short: "Show what pushing a bundle would change, and whether the webhook configuration must be applied again",
		Long: `Compares a bundle with the one published at a location (read as a function
would, verified with ADMITFN_BUNDLE_PUBLIC_KEY when it is set) and prints what
'admitfn push' would change: the policies, bindings and params added, removed
and changed; the routes added and retired; and whether the cluster's webhook
configuration changes, so must be applied again after the push. Publishes
nothing. Exits 0 whatever it finds; -o json for pipelines.`,
		Example: `  admitfn diff -p policies/ --to s3://my-bucket/admitfn
  admitfn diff -p policies/ --to gs://my-bucket/admitfn -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if policies == "" || to == "" {
				return usagef("-p/--policies and --to are required")
			}
			if err := checkOutput(output, "text", "json"); err != nil {
				return err
			}
			keys, err := c.publicKeys()
			if err != nil {
				return err
			}
			_, set, sources, err := c.loadBundle(policies)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			d, err := c.diffAt(ctx, to, set, sources, bundle.PublishOptions{TrustedKeys: keys})
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(c.out, d)
			}
			d.write(c.out)
			return nil
		},
	}
	policiesFlag(cmd, &policies)
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "where the bundle is published: s3://bucket/prefix, gs://bucket/prefix or a directory (required)")
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	outputFlag(cmd, &output, "text", "json")
	return cmd
}

// bundleDiff is what publishing a bundle changes at a location.
type bundleDiff struct {
	Location string `json:"location"`
	// From is the bundle published there ("" for none); To, the new one.
	From string `json:"from"`
	To   string `json:"to"`
	// Objects added, removed and changed, by kind and name.
	Objects []objectChange `json:"objects"`
	// Routes the new bundle adds, and those it retires.
	RoutesAdded   []string `json:"routesAdded"`
	RoutesRetired []string `json:"routesRetired"`
	// WebhooksChanged: the rendered webhook configurations differ, so the
	// cluster's must be applied again once the bundle is published.
	WebhooksChanged bool `json:"webhooksChanged"`
}

type objectChange struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Change string `json:"change"` // added, removed, changed
}

// diffAt compares set (parsed from sources) with the bundle published at
// to.
func (c *cli) diffAt(ctx context.Context, to string, set *policy.Set, sources []policy.Source, opts bundle.PublishOptions) (*bundleDiff, error) {
	loc, err := store.ParseLocation(to)
	if err != nil {
		return nil, err
	}
	storeOpts, err := anystore.OptionsFromEnv(c.getenv)
	if err != nil {
		return nil, err
	}
	bucket, err := anystore.Open(ctx, loc, storeOpts, false)
	if err != nil {
		return nil, withCredentialHint(loc, err)
	}
	if opts.Warn == nil {
		opts.Warn = func(msg string) { fmt.Fprintf(c.err, "warning: %s\n", msg) }
	}
	prev, err := bundle.Published(ctx, bucket, opts)
	if err != nil {
		return nil, withCredentialHint(loc, err)
	}
	return diffBundles(loc.String(), prev, set, sources)
}

// diffBundles compares the new bundle with prev (nil for none).
func diffBundles(location string, prev *bundle.Snapshot, set *policy.Set, sources []policy.Source) (*bundleDiff, error) {
	d := &bundleDiff{Location: location, To: policy.ID(sources), Objects: []objectChange{}, RoutesAdded: []string{}, RoutesRetired: []string{}}
	before := &policy.Set{}
	if prev != nil {
		d.From = prev.BundleID
		var err error
		if before, err = policy.Parse(prev.Sources); err != nil {
			return nil, fmt.Errorf("the published bundle %s: %w", prev.BundleID, err)
		}
	}
	old, cur := objectsOf(before), objectsOf(set)
	for _, k := range slices.Sorted(mapKeys(old, cur)) {
		o, inOld := old[k]
		n, inCur := cur[k]
		change := ""
		switch {
		case !inOld:
			change = "added"
		case !inCur:
			change = "removed"
		case !bytes.Equal(o, n):
			change = "changed"
		default:
			continue
		}
		kind, name, _ := strings.Cut(k, "/")
		d.Objects = append(d.Objects, objectChange{Kind: kind, Name: name, Change: change})
	}
	oldRoutes, curRoutes := routesOf(before), routesOf(set)
	for _, p := range curRoutes {
		if !slices.Contains(oldRoutes, p) {
			d.RoutesAdded = append(d.RoutesAdded, p)
		}
	}
	for _, p := range oldRoutes {
		if !slices.Contains(curRoutes, p) {
			d.RoutesRetired = append(d.RoutesRetired, p)
		}
	}
	oldHooks, err := publishedWebhooks(before)
	if err != nil {
		return nil, err
	}
	curHooks, err := publishedWebhooks(set)
	if err != nil {
		return nil, err
	}
	d.WebhooksChanged = !bytes.Equal(oldHooks, curHooks)
	return d, nil
}

// objectsOf maps "Kind/name" of each policy, binding and param object to
// its canonical JSON.
func objectsOf(set *policy.Set) map[string][]byte {
	out := map[string][]byte{}
	add := func(kind, name string, v any) {
		data, _ := json.Marshal(v) // API types and unstructured maps: cannot fail
		out[kind+"/"+name] = data
	}
	for _, p := range set.Policies {
		add("ValidatingAdmissionPolicy", p.Name, p)
	}
	for _, b := range set.Bindings {
		add("ValidatingAdmissionPolicyBinding", b.Name, b)
	}
	for _, p := range set.MutatingPolicies {
		add("MutatingAdmissionPolicy", p.Name, p)
	}
	for _, b := range set.MutatingBindings {
		add("MutatingAdmissionPolicyBinding", b.Name, b)
	}
	for _, p := range set.Params {
		name := p.GetName()
		if ns := p.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
		add(p.GetKind(), name, p.Object)
	}
	return out
}

func routesOf(set *policy.Set) []string {
	var out []string
	for _, g := range append(set.Groups(), set.MutatingGroups()...) {
		out = append(out, g.Path())
	}
	return out
}

func mapKeys(ms ...map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// write prints d for people.
func (d *bundleDiff) write(w io.Writer) {
	switch {
	case d.From == "":
		fmt.Fprintf(w, "%s holds no bundle: bundle %s would be its first\n", d.Location, d.To)
	case d.From == d.To:
		fmt.Fprintf(w, "%s holds bundle %s already: no change\n", d.Location, d.To)
		return
	default:
		fmt.Fprintf(w, "bundle %s at %s -> bundle %s\n", d.From, d.Location, d.To)
	}
	for _, o := range d.Objects {
		sign := map[string]string{"added": "+", "removed": "-", "changed": "~"}[o.Change]
		fmt.Fprintf(w, "  %s %s/%s (%s)\n", sign, o.Kind, o.Name, o.Change)
	}
	for _, p := range d.RoutesAdded {
		fmt.Fprintf(w, "  route added: %s\n", p)
	}
	for _, p := range d.RoutesRetired {
		fmt.Fprintf(w, "  route retired: %s (served with bundle %s during the transition)\n", p, d.From)
	}
	switch {
	case d.From == "":
		fmt.Fprintln(w, "apply the webhook configuration after the push (admitfn render, or the Terraform webhook module)")
	case d.WebhooksChanged:
		fmt.Fprintln(w, "the webhook configuration changes: apply it again after the push (admitfn render, or the Terraform webhook module)")
	default:
		fmt.Fprintln(w, "the webhook configuration does not change: nothing to apply")
	}
}
