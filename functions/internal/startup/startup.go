// Package startup starts the policy bundle an entry point serves, the same
// way on every platform: from the location in ADMITFN_POLICIES (a
// directory, s3:// or gs://), verified, compiled and then kept fresh by a
// reload.Reloader.
package startup

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/adapters/metrics"
	"github.com/admitfn/admitfn/core/celeval"
	corecluster "github.com/admitfn/admitfn/core/cluster"
	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/version"
	"github.com/admitfn/admitfn/functions/bundle"
	"github.com/admitfn/admitfn/functions/bundle/reload"
	"github.com/admitfn/admitfn/functions/bundle/store"
	"github.com/admitfn/admitfn/functions/cluster"
	"github.com/admitfn/admitfn/functions/internal/envvar"
	"github.com/admitfn/admitfn/functions/internal/memlimit"
)

// Config is where the bundle comes from and how it is checked.
type Config struct {
	Policies  string
	Fallback  string
	PublicKey string
	// PublicKeySet: the key variable or flag was given, even empty. A key
	// setting that holds no key is an error, not "verification off": a
	// Terraform variable left blank would otherwise switch signing off
	// without a word.
	PublicKeySet bool
	// Interval: 0 for the default, negative for no refresh.
	Interval time.Duration
	// Background: the caller runs the Reloader's Run loop, so reviews never
	// wait for a check (the server).
	Background  bool
	S3PathStyle bool
	// Open opens the bundle's location with the object stores the entry
	// point is built with; nil opens directories only.
	Open Opener
	// ExactCost tracks the cost of every evaluation (celeval.ExactCost).
	ExactCost bool
	// InitTimeout bounds the first load from an object store; a directory
	// is read without a bound.
	InitTimeout time.Duration
	// MemoryLimit, when one is in force, paces the collector after each
	// load (memlimit.Limit.GCPercent).
	MemoryLimit memlimit.Limit
	// Settled, if set, runs once the first bundle is loaded and what it
	// leaves running in the background is done (the policies of a bundle
	// that compiles on use, client-go's schema for ApplyConfiguration
	// mutations), or once Start returns without a bundle.
	Settled func()
}

// ConfigFromEnv reads Config from the environment; policies is the
// location to use when ADMITFN_POLICIES is not set.
func ConfigFromEnv(getenv func(string) string, policies string) (Config, error) {
	c := Config{Policies: getenv("ADMITFN_POLICIES"), Fallback: getenv("ADMITFN_FALLBACK_POLICIES"), PublicKey: getenv("ADMITFN_BUNDLE_PUBLIC_KEY")}
	c.PublicKeySet = c.PublicKey != ""
	if c.Policies == "" {
		c.Policies = policies
	}
	var err error
	if c.Interval, err = ParseInterval(getenv("ADMITFN_REFRESH_INTERVAL")); err != nil {
		return c, err
	}
	if c.S3PathStyle, err = store.S3PathStyle(getenv); err != nil {
		return c, err
	}
	if c.ExactCost, err = envvar.Bool("ADMITFN_EXACT_COST", getenv("ADMITFN_EXACT_COST")); err != nil {
		return c, err
	}
	return c, nil
}

// Opener opens a bundle location.
type Opener func(context.Context, store.Location) (store.Bucket, error)

// OpenWith opens directories, and the locations of the schemes it is given
// (s3, gs) with their backends; any other scheme is an error naming what
// the entry point reads.
func OpenWith(backends map[string]Opener) Opener {
	return func(ctx context.Context, loc store.Location) (store.Bucket, error) {
		if !loc.Remote() {
			return store.OpenDir(loc.Bucket, false)
		}
		if open, ok := backends[loc.Scheme]; ok {
			return open(ctx, loc)
		}
		reads := "directories only"
		if len(backends) > 0 {
			reads = strings.Join(slices.Sorted(maps.Keys(backends)), ":// and ") + ":// and directories"
		}
		return nil, fmt.Errorf("%s: %w: this function reads %s", loc, store.ErrNotBuiltIn, reads)
	}
}

// keys are the public keys bundles must be signed with; none when no key is
// configured.
func (c Config) keys() ([]ed25519.PublicKey, error) {
	keys, err := bundle.ParsePublicKeys(c.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: ADMITFN_BUNDLE_PUBLIC_KEY: %w", ErrConfig, err)
	}
	if len(keys) == 0 && (c.PublicKeySet || c.PublicKey != "") {
		return nil, fmt.Errorf("%w: ADMITFN_BUNDLE_PUBLIC_KEY is set but holds no key: set it to the public keys bundles must be signed with, or unset it to load unsigned bundles", ErrConfig)
	}
	return keys, nil
}

// Compiler is the compiler c asks for.
func (c Config) Compiler() *celeval.Compiler {
	if c.ExactCost {
		return celeval.NewCompiler(celeval.ExactCost())
	}
	return celeval.NewCompiler()
}

// ParseInterval reads ADMITFN_REFRESH_INTERVAL: "" is the default, "0"
// turns refresh off.
func ParseInterval(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("refresh interval %q: want a duration such as 30s, or 0 to turn refresh off", s)
	}
	if d == 0 {
		return -1, nil
	}
	if d < time.Second {
		return 0, fmt.Errorf("refresh interval %q: at least 1s", s)
	}
	return d, nil
}

// ErrConfig marks configuration errors, which no retry mends.
var ErrConfig = errors.New("configuration error")

// Start opens the location and loads the bundle. A directory that does not
// load is an error (a broken deployment should not start). An object store
// that cannot be read is not: the Reloader starts without a bundle (or with
// the fallback), reviews fail until a load succeeds, and later requests
// retry with backoff. Every load logs the policy groups it serves.
func Start(ctx context.Context, c Config, log zerolog.Logger) (*reload.Reloader, error) {
	loc, err := store.ParseLocation(c.Policies)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	keys, err := c.keys()
	if err != nil {
		return nil, err
	}
	open := c.Open
	if open == nil {
		open = OpenWith(nil)
	}
	bucket, err := open(ctx, loc)
	if err != nil {
		if !loc.Remote() {
			return nil, fmt.Errorf("load %s: %w", c.Policies, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	// A fast path of CEL evaluation that this cel-go breaks is said once,
	// here or when a program first needs it, not left to run slower.
	celeval.OnFallback(func(f celeval.Fallback) {
		log.Warn().Str("path", f.Path).Str("reason", f.Reason).Msg("CEL fast path not in use: evaluation is cel-go's own, the same decisions, slower (docs/configuration.md)")
	})
	celeval.CheckFastPaths()
	compiler := c.Compiler()
	// Until the first bundle is compiled little else runs, and compiling
	// allocates several times what it keeps: collecting as often as usual
	// then is a third of a cold start. Collect rarely until then; the first
	// load gives the garbage back and restores the pace (reload.AfterLoad).
	after := &reload.AfterLoad{Pace: c.MemoryLimit.CollectRarely(), Log: log, Settled: c.Settled}
	defer after.Started()
	cfg := reload.Config{
		Fetcher:          &bundle.Fetcher{Bucket: bucket, Keys: keys},
		Compiler:         compiler,
		Interval:         c.Interval,
		Background:       c.Background,
		Log:              log,
		WarnUnmanifested: loc.Remote(),
		OnLoad: func(e *engine.Engine) {
			logGroups(e, log)
			after.OnLoad(e)
		},
	}
	if c.Fallback != "" {
		eng, _, err := engine.Load(os.DirFS(c.Fallback), ".", compiler)
		if err != nil {
			return nil, fmt.Errorf("%w: fallback bundle %s: %w", ErrConfig, c.Fallback, err)
		}
		cfg.Fallback, cfg.FallbackSource = eng, c.Fallback
		log.Info().Str("fallback_policies", c.Fallback).Str("bundle", eng.BundleID()).Msg("fallback bundle loaded")
	}
	r := reload.New(cfg)
	loadCtx, cancel := ctx, context.CancelFunc(func() {})
	if loc.Remote() && c.InitTimeout > 0 {
		loadCtx, cancel = context.WithTimeout(ctx, c.InitTimeout)
	}
	defer cancel()
	if err := r.Load(loadCtx); err != nil {
		if !loc.Remote() {
			return nil, fmt.Errorf("load %s: %w", c.Policies, err)
		}
		log.Warn().Str("policies", loc.String()).Bool("fallback", cfg.Fallback != nil).
			Msg("starting without a bundle from the policy store: reviews fail (the webhook's failurePolicy decides), or the fallback serves, until a load succeeds")
		after.Settle()
	}
	return r, nil
}

// MemoryLimit applies the soft memory limit of the first source that has
// one (GOMEMLIMIT rules), and warns when none can be set.
func MemoryLimit(getenv func(string) string, log zerolog.Logger, sources ...memlimit.Source) memlimit.Limit {
	limit, err := memlimit.Apply(getenv, sources...)
	if err != nil {
		log.Warn().Err(err).Msg("no soft memory limit")
	}
	return limit
}

// Ready adds to e what every entry point's ready line says: which admitfn
// this is, where the bundle is, its id and size once one is loaded, and the
// memory limit.
func Ready(e *zerolog.Event, c Config, rl *reload.Reloader) *zerolog.Event {
	v := version.Get()
	e = e.Str("version", v.Version).Str("revision", v.Revision).Str("kubernetes", v.Kubernetes).Str("policies", c.Policies).Bool("exact_cost", c.ExactCost)
	// Whether a bucket writer without the key can change what is enforced.
	keys, _ := c.keys() // Start refused keys that do not parse
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = bundle.KeyID(k)
	}
	e = e.Bool("signatures_required", len(keys) > 0)
	if len(ids) > 0 {
		e = e.Strs("bundle_keys", ids)
	}
	if eng := rl.Engine(); eng != nil {
		policies, bindings := counts(eng.Policies())
		e = e.Str("bundle", eng.BundleID()).Int("policies_loaded", policies).Int("bindings", bindings)
	}
	return c.MemoryLimit.Log(e)
}

// logGroups logs the policy groups a bundle serves, one line each.
func logGroups(eng *engine.Engine, log zerolog.Logger) {
	for _, g := range eng.Groups() {
		e := log.Info().Str("bundle", eng.BundleID()).Str("route", g.Path()).Str("failure_policy", string(g.FailurePolicy)).Int("bindings", len(g.Bindings)+len(g.MutatingBindings))
		if g.Type == policy.Mutating {
			e = e.Str("reinvocation_policy", string(g.ReinvocationPolicy))
		}
		e.Msg("policy group")
	}
}

// counts are the bundle's sizes for a start-up log line.
func counts(b *policy.Set) (policies, bindings int) {
	return len(b.Policies) + len(b.MutatingPolicies), len(b.Bindings) + len(b.MutatingBindings)
}

// Metrics reports r's bundle age and failed checks to metrics recorders.
func Metrics(r *reload.Reloader) metrics.BundleStatus {
	return func() metrics.Bundle {
		s := r.Status()
		return metrics.Bundle{Age: s.Age, LoadErrors: s.LoadErrors, Refused: s.Refused}
	}
}

// Clusters opens the clusters v (ADMITFN_CLUSTERS) names, with the
// authenticators the entry point links, for httpadapter.WithClusters: nil
// when it names none.
func Clusters(v string, auth cluster.Authenticators, log zerolog.Logger) (map[string]corecluster.Reader, error) {
	c, err := cluster.ParseConfig(v, os.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("%w: ADMITFN_CLUSTERS: %w", ErrConfig, err)
	}
	if len(c.Clusters) == 0 {
		return nil, nil
	}
	readers, err := cluster.Open(c, auth)
	if err != nil {
		return nil, fmt.Errorf("%w: ADMITFN_CLUSTERS: %w", ErrConfig, err)
	}
	out := make(map[string]corecluster.Reader, len(readers))
	var read []string
	for name, r := range readers {
		if r == nil {
			out[name] = nil
			continue
		}
		r.SetLog(log)
		out[name] = r
		read = append(read, name)
	}
	slices.Sort(read)
	log.Info().Strs("clusters", c.Names()).Strs("clusters_read", read).Msg("serving clusters")
	return out, nil
}
