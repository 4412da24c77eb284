// Package bundle loads the policy bundle an entry point serves and builds
// its engine, once per process: the same start-up on every platform.
package bundle

import (
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/admitfn/admitfn/core/engine"
	"github.com/admitfn/admitfn/core/policy"
	"github.com/admitfn/admitfn/core/validate"
)

// Load compiles the bundle in directory dir and logs the policy groups it
// serves, one line each.
func Load(dir string, log zerolog.Logger) (*engine.Engine, *policy.Bundle, error) {
	eng, b, err := engine.Load(os.DirFS(dir), ".", validate.NewCompiler())
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", dir, err)
	}
	for _, g := range eng.Groups() {
		e := log.Info().Str("route", g.Path()).Str("failure_policy", string(g.FailurePolicy)).Int("bindings", len(g.Bindings)+len(g.MutatingBindings))
		if g.Type == policy.Mutating {
			e = e.Str("reinvocation_policy", string(g.ReinvocationPolicy))
		}
		e.Msg("policy group")
	}
	return eng, b, nil
}

// Counts are the bundle's sizes for a start-up log line.
func Counts(b *policy.Bundle) (policies, bindings int) {
	return len(b.Policies) + len(b.MutatingPolicies), len(b.Bindings) + len(b.MutatingBindings)
}
