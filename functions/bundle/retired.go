package bundle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/functions/bundle/store"
)

// A publish that changes a group's route (a binding moved, added or
// removed; a selector, failurePolicy or reinvocationPolicy changed) leaves
// the cluster's webhook configuration naming the old route until it is
// applied again. The manifest keeps, for a transition, the bundle that had
// each route the publish retired, and functions serve a retired route with
// that bundle: the configuration in place keeps the decisions it was
// rendered for, whichever is applied first, the bundle or the
// configuration (docs/cluster.md).

// RetiredPrefix is where Publish stores the bundles that serve retired
// routes, each in the packed form, named by its bundle ID.
const RetiredPrefix = ".admitfn/retired/"

// WebhooksKey is where Publish stores the webhook configurations rendered
// for the bundle (`admitfn render` with the URL WebhooksURL), for whoever
// applies them: the Terraform webhook module reads them there.
const WebhooksKey = ".admitfn/webhooks.json"

// WebhooksURL is the base URL of the published webhook configurations,
// which their reader replaces with the function's.
const WebhooksURL = "https://admitfn.invalid"

// DefaultTransition is how long a function serves routes a publish
// retired.
const DefaultTransition = 7 * 24 * time.Hour

// MaxRetired bounds the bundles a manifest keeps for retired routes: each
// is read and compiled by every function that loads the manifest.
const MaxRetired = 8

// Retired is a set of routes an earlier bundle served and the manifest's
// bundle does not.
type Retired struct {
	// Bundle is the ID of the bundle that served the routes.
	Bundle string `json:"bundle"`
	// Routes are their paths (/validate/<id>, /mutate/<id>).
	Routes []string `json:"routes"`
	// Until is when the transition ends: functions answer the routes with
	// Bundle until then, and as unknown routes after.
	Until time.Time `json:"until"`
	// Object is Bundle's files in the packed form, at RetiredPrefix.
	Object ManifestObject `json:"object"`
}

// RetiredSnapshot is a Retired read back, with its bundle's files while
// its transition lasts (none after).
type RetiredSnapshot struct {
	Bundle  string
	Routes  []policy.Route
	Until   time.Time
	Sources []policy.Source
	// Err says why the bundle could not be read or verified (a lifecycle
	// rule deleted it; someone changed it): its routes are then not
	// served, and the bundle the manifest names still is.
	Err error
}

// unreferenced are the retired bundles prev's manifest stored that m no
// longer names, in a directory, which must hold what its manifest names
// before it is read back.
func unreferenced(bucket store.Bucket, prev *Snapshot, m *Manifest) []string {
	_, ok := bucket.(store.Remover)
	if loc, err := store.ParseLocation(bucket.Location()); !ok || err != nil || loc.Remote() {
		return nil // a bucket's: removeReplaced, once the bundle is read back
	}
	named := map[string]bool{}
	for _, r := range m.Retired {
		named[r.Object.Key] = true
	}
	var out []string
	for _, r := range prev.manifestRetired {
		if !named[r.Object.Key] {
			out = append(out, r.Object.Key)
		}
	}
	return out
}

func (r Retired) validate() error {
	if r.Bundle == "" || len(r.Routes) == 0 || r.Until.IsZero() {
		return fmt.Errorf("retired routes of %q: bundle, routes and until are required", r.Bundle)
	}
	for _, p := range r.Routes {
		if rt, ok := policy.ParseRoute(p); !ok || rt.Group == "" {
			return fmt.Errorf("retired route %q: not a group's route", p)
		}
	}
	if r.Object.Key != RetiredPrefix+r.Bundle+".json" {
		return fmt.Errorf("retired object key %q: want %s%s.json", r.Object.Key, RetiredPrefix, r.Bundle)
	}
	return r.Object.validate()
}

// Routes are the paths of sources' groups, validating then mutating.
func Routes(sources []policy.Source) ([]string, error) {
	set, err := policy.Parse(sources)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, g := range append(set.Groups(), set.MutatingGroups()...) {
		paths = append(paths, g.Path())
	}
	return paths, nil
}

// readRetired reads the bundles of m's retired routes whose transition
// lasts at now, each checked against m as the bundle's own objects are.
// One that cannot be read or verified is never served, but fails only its
// own routes (Err): the bundle m names is whole and verified, and refusing
// it would leave a cold-starting function with no bundle at all.
func (f *Fetcher) readRetired(ctx context.Context, m *Manifest, now time.Time) []RetiredSnapshot {
	out := make([]RetiredSnapshot, len(m.Retired))
	for i, r := range m.Retired {
		out[i] = RetiredSnapshot{Bundle: r.Bundle, Until: r.Until}
		for _, p := range r.Routes {
			rt, _ := policy.ParseRoute(p) // validate checked it
			out[i].Routes = append(out[i].Routes, rt)
		}
		if !now.Before(r.Until) {
			continue
		}
		out[i].Sources, out[i].Err = f.readRetiredBundle(ctx, r)
	}
	return out
}

func (f *Fetcher) readRetiredBundle(ctx context.Context, r Retired) ([]policy.Source, error) {
	data, err := f.Bucket.GetVersion(ctx, r.Object.Key, r.Object.Version)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.Object.Key, err)
	}
	if err := checkObject(r.Object, data); err != nil {
		return nil, err
	}
	sources, err := unpack(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", r.Object.Key, ErrIntegrity, err)
	}
	if id := policy.ID(sources); id != r.Bundle {
		return nil, fmt.Errorf("%s: %w: the files make bundle %s, manifest says %s", r.Object.Key, ErrIntegrity, id, r.Bundle)
	}
	return sources, nil
}

// unpack reads the files of a packed object.
func unpack(data []byte) ([]policy.Source, error) {
	var p packed
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	sources := make([]policy.Source, len(p.Files))
	for i, pf := range p.Files {
		sources[i] = policy.Source{Name: pf.Name, Data: pf.Data}
	}
	return sources, nil
}

// retire computes the retired routes of a manifest that replaces prev's
// with a bundle serving routes: prev's retired routes whose transition
// lasts and that routes does not serve again, and the routes of prev's
// bundle that routes drops, kept until now plus the transition. It uploads
// prev's bundle when that gives it routes. A negative transition retires
// nothing.
func retire(ctx context.Context, bucket store.Bucket, prev *Snapshot, routes []string, opts PublishOptions) ([]Retired, error) {
	if opts.Transition < 0 {
		return nil, nil
	}
	now := opts.now()
	serving := map[string]bool{}
	for _, p := range routes {
		serving[p] = true
	}
	var out []Retired
	taken := map[string]bool{}
	if prevRoutes, err := Routes(prev.Sources); err == nil {
		var gone []string
		for _, p := range prevRoutes {
			if !serving[p] {
				gone = append(gone, p)
				taken[p] = true
			}
		}
		if len(gone) > 0 {
			data, err := pack(prev.Sources)
			if err != nil {
				return nil, err
			}
			o, err := putObject(ctx, bucket, RetiredPrefix+prev.BundleID+".json", data, "application/json")
			if err != nil {
				return nil, err
			}
			out = append(out, Retired{Bundle: prev.BundleID, Routes: gone, Until: now.Add(opts.transition()), Object: o})
		}
	}
	for i, r := range prev.manifestRetired {
		if !now.Before(r.Until) {
			continue
		}
		if err := prev.Retired[i].Err; err != nil {
			// Carried on, it would make every function refuse the manifest.
			opts.warn(fmt.Sprintf("the bundle %s that answers the retired routes %s cannot be read (%v): they are retired now", r.Bundle, strings.Join(r.Routes, ", "), err))
			continue
		}
		var still []string
		for _, p := range r.Routes {
			if !serving[p] && !taken[p] {
				still = append(still, p)
				taken[p] = true
			}
		}
		if len(still) == 0 {
			continue
		}
		if i := slices.IndexFunc(out, func(o Retired) bool { return o.Bundle == r.Bundle }); i >= 0 {
			// The same bundle retired again (a revert of a revert): one
			// entry, the later transition.
			out[i].Routes = append(out[i].Routes, still...)
			continue
		}
		r.Routes = still
		out = append(out, r)
	}
	if len(out) > MaxRetired {
		var dropped []string
		for _, r := range out[MaxRetired:] {
			dropped = append(dropped, r.Routes...)
		}
		opts.warn(fmt.Sprintf("more than %d earlier bundles have routes in transition: the oldest routes (%s) are retired now", MaxRetired, strings.Join(dropped, ", ")))
		out = out[:MaxRetired]
	}
	return out, nil
}

func (o PublishOptions) transition() time.Duration {
	if o.Transition == 0 {
		return DefaultTransition
	}
	return o.Transition
}

// Published reads the bundle published at bucket, as the publish that
// replaces it would: nil, with a warning through opts.Warn, when there is
// none that functions trusting opts's keys would accept.
func Published(ctx context.Context, bucket store.Bucket, opts PublishOptions) (*Snapshot, error) {
	p, err := readPlace(ctx, bucket, opts)
	if err != nil {
		return nil, err
	}
	snap := previousBundle(ctx, bucket, p.prev, opts)
	if snap != nil && snap.Sources == nil {
		return nil, nil // only its retired routes could be read
	}
	return snap, nil
}
