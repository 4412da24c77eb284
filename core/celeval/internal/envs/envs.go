// Package envs holds the CEL environments admitfn compiles admission
// policies in: kube-apiserver's, one for each combination of the optional
// variables a policy's expressions may read (params, authorizer, patch
// types), on the bounded base environment (internal/bounded), each built
// on first use.
//
// They are declared as upstream's compiler declares them
// (k8s.io/apiserver/pkg/admission/plugin/cel: createEnvForOpts and
// compiler.CompileCELExpression, whose recipe is unexported), layered in
// another order. Upstream extends the base environment with `variables`,
// then with each of eight combinations of optional variables, for every
// policy; admitfn extends the base with a combination once per process, and
// declares a policy's `variables` on top of the combinations it uses. The
// type layers (request and namespaceObject, `variables`) are
// DeclTypeProviders of distinct names, each deferring to the one below, so
// the order changes no lookup; under a mutation's `variables` the layer
// below is the resolver of Object types, which is no type adapter, so its
// values are adapted by cel-go's default adapter where upstream's reach the
// base registry's, which adapts everything but protobuf messages the same
// way. TestCompileMatchesUpstream (core/celeval and core/mutate) compiles
// every policy of the repository both ways and compares errors and
// decisions.
package envs

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/mutation"

	"github.com/admitfn/admitfn/core/celeval/internal/bounded"
)

// All are the combinations of optional variables admitfn compiles for, in
// a fixed order.
func All() []plugincel.OptionalVariableDeclarations {
	var all []plugincel.OptionalVariableDeclarations
	for _, params := range []bool{false, true} {
		for _, authorizer := range []bool{false, true} {
			for _, patch := range []bool{false, true} {
				all = append(all, plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: authorizer, HasPatchTypes: patch})
			}
		}
	}
	return all
}

// Set is the environments of one compiler, each built on first use.
type Set struct {
	byOpts map[plugincel.OptionalVariableDeclarations]func() (*environment.EnvSet, error)
}

// New returns a set of environments, none built yet.
func New() *Set {
	s := &Set{byOpts: map[plugincel.OptionalVariableDeclarations]func() (*environment.EnvSet, error){}}
	for _, opts := range All() {
		if opts.HasPatchTypes {
			continue
		}
		plain := sync.OnceValues(func() (*environment.EnvSet, error) { return declare(bounded.Base(), opts) })
		s.byOpts[opts] = plain
		patch := opts
		patch.HasPatchTypes = true
		s.byOpts[patch] = sync.OnceValues(func() (*environment.EnvSet, error) { return withPatchTypes(plain) })
	}
	return s
}

// For is the environment of opts; an error if upstream's declarations do
// not build (a Kubernetes upgrade).
func (s *Set) For(opts plugincel.OptionalVariableDeclarations) (*environment.EnvSet, error) {
	return s.byOpts[opts]()
}

// declare extends base with the variables opts declares, as upstream's
// createEnvForOpts does; patch types aside (withPatchTypes).
func declare(base *environment.EnvSet, opts plugincel.OptionalVariableDeclarations) (*environment.EnvSet, error) {
	requestType, namespaceType := plugincel.BuildRequestType(), plugincel.BuildNamespaceType()
	envOpts := []cel.EnvOption{
		cel.Variable(plugincel.ObjectVarName, cel.DynType),
		cel.Variable(plugincel.OldObjectVarName, cel.DynType),
		cel.Variable(plugincel.NamespaceVarName, namespaceType.CelType()),
		cel.Variable(plugincel.RequestVarName, requestType.CelType()),
	}
	if opts.HasParams {
		envOpts = append(envOpts, cel.Variable(plugincel.ParamsVarName, cel.DynType))
	}
	if opts.HasAuthorizer {
		envOpts = append(envOpts,
			cel.Variable(plugincel.AuthorizerVarName, library.AuthorizerType),
			cel.Variable(plugincel.RequestResourceAuthorizerVarName, library.ResourceCheckType))
	}
	env, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        envOpts,
		DeclTypes:         []*apiservercel.DeclType{namespaceType, requestType},
	}, environment.StrictCostOpt)
	if err != nil {
		return nil, fmt.Errorf("environment misconfigured: %w", err)
	}
	return env, nil
}

// withPatchTypes extends the environment of a combination without patch
// types with upstream's hasPatchTypes: Object types for ApplyConfiguration
// and JSONPatch, and jsonpatch.escapeKey. Upstream builds that layer on top
// of the same one, for every policy.
func withPatchTypes(env func() (*environment.EnvSet, error)) (*environment.EnvSet, error) {
	base, err := env()
	if err != nil {
		return nil, err
	}
	patched, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			common.ResolverEnvOption(&mutation.DynamicTypeResolver{}),
			environment.UnversionedLib(library.JSONPatch),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("environment misconfigured: %w", err)
	}
	return patched, nil
}
