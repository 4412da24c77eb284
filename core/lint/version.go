package lint

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Expressions a cluster of an older Kubernetes refuses: a kube-apiserver of
// version 1.N accepts new expressions in the CEL environment of its
// compatibility version, 1.(N-1) (environment.DefaultCompatibilityVersion),
// so a library or function introduced since is unknown to it. Each
// expression is compiled as upstream's policy validation does, once in the
// environment admitfn runs and once in the cluster's; what compiles in the
// first and not in the second is found, with the version that first accepts
// it.

// MinKubernetesVersion is the oldest cluster lint checks for: the first
// with ValidatingAdmissionPolicy GA.
var MinKubernetesVersion = version.MajorMinor(1, 30)

// CompatibilityVersion is the CEL environment version a kube-apiserver of
// version v compiles new expressions in.
func CompatibilityVersion(v *version.Version) *version.Version {
	return version.MajorMinor(v.Major(), v.Minor()-1)
}

// TrackedKubernetesVersion is the Kubernetes version whose semantics admitfn
// embeds: a cluster of it accepts what admitfn does.
func TrackedKubernetesVersion() *version.Version {
	c := environment.DefaultCompatibilityVersion()
	return version.MajorMinor(c.Major(), c.Minor()+1)
}

type accessor struct{ name, expr string }

func (a accessor) GetExpression() string    { return a.expr }
func (a accessor) ReturnTypes() []*cel.Type { return []*cel.Type{cel.AnyType} }
func (a accessor) GetName() string          { return a.name }

// compileErrors compiles a policy's expressions in the environment of
// compatibility version env and returns, by field, those that fail.
func compileErrors(env *version.Version, hasParams, mutating bool, vars []admissionregistrationv1.Variable, exprs []expression) map[string]string {
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(env))
	if err != nil {
		return map[string]string{"": err.Error()}
	}
	out := map[string]string{}
	plain := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasPatchTypes: mutating}
	for i, v := range vars {
		if r := c.CompileAndStoreVariable(accessor{v.Name, v.Expression}, plain, environment.NewExpressions); r.Error != nil {
			out[fmt.Sprintf("spec.variables[%d].expression", i)] = r.Error.Error()
		}
	}
	for _, e := range exprs {
		if strings.HasPrefix(e.field, "spec.variables[") {
			continue
		}
		opts := plain
		// Validations and match conditions may ask the authorizer.
		opts.HasAuthorizer = strings.HasSuffix(e.field, "].expression") && !strings.HasPrefix(e.field, "spec.mutations")
		if r := c.CompileCELExpression(accessor{"", e.expression}, opts, environment.NewExpressions); r.Error != nil {
			out[e.field] = r.Error.Error()
		}
	}
	return out
}

// checkVersion finds the expressions of a policy that a cluster of version
// target refuses and admitfn accepts.
func checkVersion(target *version.Version, hasParams, mutating bool, vars []admissionregistrationv1.Variable, exprs []expression, at func(rule, field, msg string)) {
	tracked := TrackedKubernetesVersion()
	if !target.LessThan(tracked) {
		return
	}
	now := compileErrors(CompatibilityVersion(tracked), hasParams, mutating, vars, exprs)
	then := compileErrors(CompatibilityVersion(target), hasParams, mutating, vars, exprs)
	for _, e := range exprs {
		msg, refused := then[e.field]
		if _, fails := now[e.field]; !refused || fails {
			continue
		}
		// The first version that accepts it.
		first := tracked
		for m := target.Minor() + 1; m < tracked.Minor(); m++ {
			v := version.MajorMinor(target.Major(), m)
			if _, still := compileErrors(CompatibilityVersion(v), hasParams, mutating, vars, exprs)[e.field]; !still {
				first = v
				break
			}
		}
		line, _, _ := strings.Cut(msg, "\n")
		at(KubernetesVersion, e.field, fmt.Sprintf("Kubernetes %d.%d refuses it (%s); it needs %d.%d or later", target.Major(), target.Minor(), line, first.Major(), first.Minor()))
	}
}
