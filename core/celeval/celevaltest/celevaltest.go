// Package celevaltest gives tests kube-apiserver's own compiler of a policy,
// to compare celeval's compilers with.
package celevaltest

import (
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"

	"github.com/admitfn/admitfn/core/celeval"
)

// UpstreamPolicyCompiler is kube-apiserver's compiler of one policy
// (plugincel.NewCompositedCompiler: every environment, built for the
// policy) on c's base environment, for comparisons with c.ForPolicy.
func UpstreamPolicyCompiler(c *celeval.Compiler) (celeval.PolicyCompiler, error) {
	cc, err := plugincel.NewCompositedCompiler(c.Env())
	if err != nil {
		return nil, err
	}
	return upstream{cc}, nil
}

// upstream compiles every expression in its one composition.
type upstream struct{ *plugincel.CompositedCompiler }

func (u upstream) Composition(plugincel.OptionalVariableDeclarations) (*plugincel.CompositedCompiler, error) {
	return u.CompositedCompiler, nil
}
